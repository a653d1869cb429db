"""What the stored gate runs show, and the rule that asks them: ``require_passed``, what the
tests gate (``advance_workflow``) and the merge steps ask.

Evidence for a commit is a run over the whole checkout (no ``files`` given) from a clean
tree at that commit, of every gate in effect (the owner's: gate_table.py): a run on named
files, on uncommitted changes or on another commit does not count. A gate without such
evidence is run then, on the authority of the caller (gate_runs.py asks the door).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

from sqlalchemy import select

from workq.db.engine import retry_lost_read
from workq.db.tables import gate_runs
from workq.domain import dates
from workq.domain.authority import Authority
from workq.domain.decisions import Action
from workq.errors import QualityGateFailed, Step, TestsFailing, UncommittedChanges
from workq.schemas import GateIssue, GateReport, GateResult, GateRun
from workq.services.coding import gate_runs as runs
from workq.services.coding.gate_table import TRUST, in_effect
from workq.services.handle import Queue, load
from workq.services.queue import door
from workq.vcs import git


def _stored_result(row: Any) -> GateResult:
    summary = json.loads(row.summary)
    return GateResult(
        gate_number=row.gate_number,
        name=row.gate,
        passed=row.passed,
        score=row.score,
        issues=[GateIssue(**i) for i in summary.get("issues", [])],
        issues_total=row.issues_found,
        skipped=row.score == "skipped",
        timed_out=row.timed_out,
        exit_code=row.exit_code,
        error=summary.get("error"),
        cause=summary.get("cause") or (None if row.passed else "failed"),
        output=summary.get("output", ""),
        output_cut_bytes=summary.get("output_cut_bytes", 0),
        tests=row.tests,
    )


def _first_issue(result: GateResult) -> str:
    if result.error:
        return result.error
    if result.issues:
        i = result.issues[0]
        return f"{i.file}:{i.line}: {i.message}"
    return f"exit {result.exit_code}"


def _why(result: GateResult) -> str:
    """A failing gate's cause, in words: the three a user must tell apart named apart."""
    if result.cause == "missing_program" and result.error:
        return result.error.split(":")[0]
    if result.cause == "no_tests":
        return "no tests collected"
    if result.timed_out:
        return "timed out"
    if result.tests and result.issues_total:
        return f"{result.issues_total} failing"
    if result.issues_total:
        count = f"{result.issues_total} issue{'s' if result.issues_total != 1 else ''}"
        # The first one as the gate reported it, so the text says what the structured
        # error says (an agent reading only the text can act on it).
        return f"{count}, first {_first_issue(result)}" if result.issues else count
    return f"exit {result.exit_code}"


def refuse(answer: GateReport, number: int, *, when: Mapping[str, datetime] | None = None) -> None:
    """Raise for the failing gates of ``answer``. ``when``: the stored runs it was read
    from (gate name -> when it finished), said in the refusal: they are not run again on
    that commit unless asked."""
    failing = [g for g in answer.gates if not g.passed]
    if not failing:
        return
    names = ", ".join(f"{g.name} ({_why(g)})" for g in failing)
    facts: dict[str, Any] = {
        "number": number,
        "commit": answer.commit,
        "failing": [
            {"gate": g.name, "cause": g.cause, "first_issue": _first_issue(g)} for g in failing
        ],
    }
    if when:
        last = max(when.values())
        names += f", in a run that finished {dates.stamp(last)} (not run again)"
        facts["failed_at"] = {name: dates.iso_z(at) for name, at in when.items()}
        facts["hint"] = (
            Step.RUN_GATES,
            " on this commit to run them again (a flaky failure), or fix and commit",
        )
    if any(g.tests for g in failing):
        if answer.test_results is not None:
            facts["test_results"] = answer.test_results.model_dump()
        raise TestsFailing(
            f"issue #{number}: the tests fail on {answer.commit[:12]}: {names}", **facts
        )
    raise QualityGateFailed(
        f"issue #{number}: quality gates failed on {answer.commit[:12]}: {names}", **facts
    )


def require_passed(
    q: Queue,
    number: int,
    checkout: Path,
    commit: str,
    *,
    by: Authority,
    action: Action = Action.GATES,
    run: bool = True,
    actor: str | None = None,
) -> GateReport:
    """Return when the stored evidence shows every gate in effect (the owner's table, read
    from the default branch: never ``commit``'s own) passed on ``commit`` (run over the
    whole checkout from a clean tree). A gate without such evidence (none, another commit,
    or a failure) is run now in ``checkout`` when ``run`` is true, and stored, on the
    authority of ``by`` for ``action`` (asked before the gates run and again as they are
    stored).

    Raises:
        TestsFailing: the tests gate failed (facts: the failing gates, their first issue).
        QualityGateFailed: another gate failed; or, with ``run`` false, evidence is
            missing; or ``checkout`` is not at ``commit``.
        UncommittedChanges: gates must run and ``checkout`` has uncommitted changes.
        NotFound: no issue ``number``.
        WorkqError: the table's refusal, when gates must run (NotHolder, LeaseLapsed...).
    """
    root = git.toplevel(checkout)
    config = in_effect(q, root)
    with q.db.read() as conn:
        issue = load(conn, number)
        found = runs.latest(conn, issue.id, commit)
    stored = [_stored_result(found[s.name]) for s in config.gates if s.name in found]
    good = [g for g in stored if g.passed]
    todo = [s for s in config.gates if s.name not in {g.name for g in good}]
    if not todo:
        return runs.report(number, commit, False, root, config.source, [], good)
    failed = [g for g in stored if not g.passed]
    if failed:  # a commit's failure stands until someone asks again (run_quality_gates)
        answer = runs.report(number, commit, False, root, config.source, [], stored)
        refuse(answer, number, when={g.name: found[g.name].finished_at for g in failed})
    if not run:
        answer = runs.report(number, commit, False, root, config.source, [], stored)
        refuse(answer, number)
        missing = ", ".join(s.name for s in todo)
        raise QualityGateFailed(
            f"issue #{number}: no evidence that gates {missing} passed on {commit[:12]}",
            hint=(Step.RUN_GATES, " with no files on that commit (a clean tree), then again"),
            number=number,
            commit=commit,
            missing=[s.name for s in todo],
        )
    head = git.head(root)
    if head != commit:
        raise QualityGateFailed(
            f"the checkout {root} is at {head[:12]}, not {commit[:12]}: the gates of "
            f"{commit[:12]} cannot run there",
            hint="check out that commit there (or give the right checkout), then again",
            number=number,
            commit=commit,
            head=head,
        )
    dirty = git.dirty_paths(root)
    if dirty:
        raise UncommittedChanges(
            f"{root} has uncommitted changes ({', '.join(dirty[:5])}): gates run on them "
            f"would not be evidence for {commit[:12]}",
            number=number,
            paths=dirty[:20],
        )
    door.ask(q, action, number, by)
    files = runs.all_files(root)
    ran = [runs.run_gate(q, spec, root, files, config.source) for spec in todo]
    runs.store(q, number, commit, False, True, ran, by=by, action=action, actor=actor)
    answer = runs.report(number, commit, False, root, config.source, ran, good)
    refuse(answer, number)
    return answer


def check_work(
    q: Queue, number: int, checkout: Path | None, *, by: Authority, actor: str | None = None
) -> GateReport:
    """The tests gate of the workflow: the gates on what ``checkout`` holds now, run on
    the authority of ``by`` (the holder). A clean tree needs them passed on its HEAD
    (``require_passed``); uncommitted changes are checked by running the gates on them now
    (stored as runs on a dirty tree).

    Raises:
        QualityGateFailed: no checkout, or a gate failed.
        TestsFailing: the tests gate failed.
        WorkqError: the table's refusal (NotHolder, LeaseLapsed, ...).
    """
    if checkout is None:
        raise runs.no_checkout(number, "so nothing can show that its tests pass")
    root = git.toplevel(checkout)
    if not git.dirty_paths(root):
        return require_passed(q, number, root, git.head(root), by=by, actor=actor)
    answer = runs.run(q, number, root, by=by, actor=actor)
    refuse(answer, number)
    return answer


@retry_lost_read
def evidence(q: Queue, number: int, *, limit: int = 100) -> list[GateRun]:
    """The stored gate runs of issue ``number``, newest first."""
    with q.db.read() as conn:
        issue = load(conn, number)
        rows = conn.execute(
            select(gate_runs)
            .where(gate_runs.c.issue_id == issue.id)
            .order_by(gate_runs.c.id.desc())
            .limit(limit)
        ).all()
    return [
        GateRun(
            number=r.number,
            commit=r.commit_sha,
            dirty=r.dirty,
            full=r.whole_checkout,
            gate=r.gate,
            gate_number=r.gate_number,
            tests=r.tests,
            passed=r.passed,
            score=r.score,
            issues_found=r.issues_found,
            tests_passed=r.tests_passed,
            tests_failed=r.tests_failed,
            timed_out=r.timed_out,
            exit_code=r.exit_code,
            started_at=r.started_at,
            finished_at=r.finished_at,
            actor=r.actor,
        )
        for r in rows
    ]


# --- the merge queue's hook ----------------------------------------------------------------


class MergeCandidate(NamedTuple):
    """What a merge is about to land, for the checks in ``land.GATES``."""

    root: Path
    """The repository."""
    worktree: Path
    """The worktree whose branch lands."""
    tip: str
    """The branch's tip: what the evidence is for."""
    commit: str | None
    """The commit the default branch will move to (a merge commit, or the tip); None when
    asked before the merge lease is taken (gates may take minutes), then asked again."""
    number: int | None
    actor: str | None
    by: Authority
    """Who asks to land it: its issue's holder, or an override."""


def merge_gate(q: Queue, candidate: MergeCandidate) -> None:
    """Refuse a merge whose branch tip has not passed the gates in effect (the default
    branch's: never the tip's own), unless merges trust the agent's word. Gates without
    evidence run as part of the merge (``Action.MERGE``: the holder, or an override)."""
    if q.tests_gate == TRUST or candidate.number is None:
        return
    require_passed(
        q,
        candidate.number,
        candidate.worktree,
        candidate.tip,
        by=candidate.by,
        action=Action.MERGE,
        actor=candidate.actor,
    )
