"""Running an issue's quality gates on its checkout, and storing each run as evidence.

The gates are the owner's (gate_table.py: the default branch's table). Running them is the
holder's act (``Action.GATES`` of domain/decisions.py, or the action of the step that runs
them, a merge): the door is asked before they start (``door.ask``), they run outside any
transaction, and the transaction that stores their runs asks again (``door.admit``): a
claim taken over or lapsed meanwhile stores nothing. Each run of a gate is stored on the
issue (``gate_runs``) with the commit the checkout was at and whether its tree was dirty,
and an event (``gates_run``) says which gates passed on which commit.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, insert, select

from workq.db.engine import retry_lost_read
from workq.db.tables import events, gate_runs, issues, repositories
from workq.domain import gates as rules
from workq.domain import leases
from workq.domain.authority import Authority
from workq.domain.decisions import Action
from workq.domain.gates import GateSpec
from workq.errors import GitFailed, InvalidInput, NotHolder, QualityGateFailed, Step
from workq.schemas import (
    GateCause,
    GateIssue,
    GateReport,
    GateResult,
    GateTestResults,
    Status,
)
from workq.services.coding import commands
from workq.services.coding.gate_table import in_effect
from workq.services.handle import Queue, load, record
from workq.services.queue import door, policies
from workq.services.workspaces import worktrees
from workq.vcs import git

EVENT_KIND = "gates_run"
# What an answer and a stored run keep of a gate's output.
OUTPUT_CHARS = 1500
ISSUES_KEPT = 20
# pytest's exit status when it collected no test.
PYTEST_NO_TESTS = 5


@retry_lost_read
def checkout_for(q: Queue, number: int, fallback: Path | None = None) -> Path | None:
    """Where issue ``number``'s gates run: its worktree, else its repository's checkout, else
    the git work tree ``fallback`` stands in (the caller's directory), else None."""
    found = worktrees.get_for_issue(q, number)
    if found is not None and Path(found.path).is_dir():
        return Path(found.path)
    with q.db.read() as conn:
        issue = load(conn, number)
        path = None
        if issue.repository is not None:
            path = conn.execute(
                select(repositories.c.path).where(repositories.c.name == issue.repository)
            ).scalar()
    if path is not None and Path(path).is_dir():
        return Path(path)
    if fallback is not None and fallback.is_dir():
        try:
            return git.toplevel(fallback)
        except GitFailed:
            return None
    return None


def no_checkout(number: int, why: str) -> QualityGateFailed:
    return QualityGateFailed(
        f"issue #{number} has no checkout to run quality gates in, {why}",
        hint=(
            "give the issue a worktree or a repository (workspaces toolset), or run workq inside "
            "the repository's checkout; or trust the agent's word: serve --tests-gate trust "
            "(WORKQ_TESTS_GATE=trust)"
        ),
        number=number,
        reason="no_checkout",
    )


def locate(q: Queue, number: int, here: Path | None) -> Path:
    """``checkout_for``, or the error that says how to give the issue one.

    Raises:
        QualityGateFailed: no checkout (reason ``no_checkout``).
        NotFound: no issue ``number``.
    """
    found = checkout_for(q, number, here)
    if found is None:
        raise no_checkout(number, "so its gates cannot run")
    return found


@retry_lost_read
def held_issue(q: Queue, by: Authority) -> int:
    """The one issue ``by`` holds (a live claim first; else a lapsed one, which the door
    then refuses with what happened): the default issue of run_quality_gates.

    Raises:
        NotHolder: it holds none.
        InvalidInput: it holds several.
    """
    numbers: list[int] = []
    if by.run_ids:
        with q.db.read() as conn:
            now = q.now()
            rows = conn.execute(
                select(issues.c.number, issues.c.lease_expires_at)
                .where(
                    issues.c.status == Status.IN_PROGRESS.value,
                    issues.c.claimed_by.in_(sorted(by.run_ids)),
                )
                .order_by(issues.c.number)
                .limit(10)
            ).all()
        live = [int(r.number) for r in rows if leases.live(r.lease_expires_at, now)]
        numbers = live or [int(r.number) for r in rows]
    if not numbers:
        raise NotHolder(
            "this session holds no claimed issue",
            hint=("claim one first (", Step.CLAIM_NEXT, "), or give issue_number"),
        )
    if len(numbers) > 1:
        held = ", ".join(f"#{n}" for n in numbers)
        raise InvalidInput(
            f"this session holds several issues ({held}); say which with issue_number",
            field="issue_number",
        )
    return numbers[0]


# --- running -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ran:
    spec: GateSpec
    result: GateResult
    counts: rules.TestCounts | None
    started: datetime
    finished: datetime


def _skipped(spec: GateSpec) -> GateResult:
    return GateResult(
        gate_number=spec.number,
        name=spec.name,
        passed=True,
        score="skipped",
        skipped=True,
        tests=spec.tests,
    )


# A pytest plugin the tests gate loads (PYTEST_PLUGINS) so that a run killed on timeout can
# say which test it was in: it writes each test's id to a file of the run's scratch
# directory (its path written into the plugin: no variable of workq's in the environment).
_PROBE = "workq_gate_probe"
_PROBE_SOURCE = """\
def pytest_runtest_logstart(nodeid, location):
    with open({path!r}, "w", encoding="utf-8") as f:
        f.write(nodeid)
"""


def _run_tests_gate(
    spec: GateSpec, argv: Sequence[str], root: Path
) -> tuple[commands.Outcome, str | None]:
    """Run a tests gate with the probe loaded; its outcome and the last test it started."""
    with tempfile.TemporaryDirectory(prefix="workq-gate-") as scratch:
        probe = Path(scratch) / "last-test"
        source = _PROBE_SOURCE.format(path=str(probe))
        (Path(scratch) / f"{_PROBE}.py").write_text(source, encoding="utf-8")
        env = commands.environment(passed=spec.env)
        plugins = [p for p in env.get("PYTEST_PLUGINS", "").split(",") if p]
        paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env.update(
            PYTEST_PLUGINS=",".join([*plugins, _PROBE]),
            PYTHONPATH=os.pathsep.join([scratch, *paths]),
        )
        outcome = commands.run(argv, cwd=root, timeout=spec.timeout, env=env)
        last = probe.read_text(encoding="utf-8", errors="replace") if probe.is_file() else None
    return outcome, (last or None)


def run_gate(q: Queue, spec: GateSpec, root: Path, files: Sequence[str], source: str) -> Ran:
    """Run one gate on the files of ``root`` it takes (of ``files``)."""
    started = q.now()
    chosen = rules.select(spec, files)
    if not chosen:
        return Ran(spec, _skipped(spec), None, started, q.now())
    last_test = None
    argv = rules.argv(spec, chosen)
    if spec.tests:
        outcome, last_test = _run_tests_gate(spec, argv, root)
    else:
        env = commands.environment(passed=spec.env)
        outcome = commands.run(argv, cwd=root, timeout=spec.timeout, env=env)
    counts = rules.pytest_counts(outcome.output) if spec.tests else None
    found, total = rules.diagnostics(outcome.output, root=str(root), limit=ISSUES_KEPT)
    error: str | None = None
    cause: GateCause | None = None
    if outcome.missing is not None:
        cause = "missing_program"
        error = f"{outcome.missing}: install it, or change gate {spec.name!r}'s command ({source})"
    elif outcome.timed_out:
        cause = "timed_out"
        during = f" while running {last_test[:300]}" if last_test else ""
        error = (
            f"timed out after {spec.timeout:g} s{during}; the gate and every process it "
            "started were killed"
        )
    elif spec.tests and outcome.exit_code == PYTEST_NO_TESTS:
        cause = "no_tests"
        error = f"no tests collected: add tests, or take gate {spec.name!r} out ({source})"
    elif not outcome.ok:
        cause = "failed"
    passed = outcome.ok
    if counts is not None and not passed:
        total = max(total, counts.failed + counts.errors)
    output = "" if passed else outcome.output[-OUTPUT_CHARS:]
    result = GateResult(
        gate_number=spec.number,
        name=spec.name,
        passed=passed,
        score=rules.score(passed, total) if error is None else "0/10",
        issues=[GateIssue(file=d.file, line=d.line, message=d.message) for d in found],
        issues_total=total,
        timed_out=outcome.timed_out,
        exit_code=outcome.exit_code,
        error=error,
        cause=cause,
        output=output,
        output_cut_bytes=outcome.cut_bytes,
        tests=spec.tests,
    )
    return Ran(spec, result, counts, started, q.now())


def _test_results(ran: Sequence[Ran]) -> GateTestResults | None:
    tests = [r for r in ran if r.spec.tests and not r.result.skipped]
    if not tests:
        return None
    passed = failed = 0
    errors: list[str] = []
    for r in tests:
        if r.counts is not None:
            passed += r.counts.passed
            failed += r.counts.failed
            errors.extend(r.counts.failures)
            if r.counts.errors and not r.counts.failures:
                errors.append(f"{r.counts.errors} errors ({r.spec.name})")
        if r.result.error:
            errors.append(f"{r.spec.name}: {r.result.error}")
        elif not r.result.passed and r.counts is None:
            errors.append(f"{r.spec.name}: exit {r.result.exit_code}, no pytest summary")
    return GateTestResults(passed=passed, failed=failed, errors=errors[: rules.GATES_MAX])


def _summary(r: Ran) -> str:
    data: dict[str, Any] = {
        "issues": [i.model_dump() for i in r.result.issues],
        "error": r.result.error,
        "cause": r.result.cause,
        "output": r.result.output,
        "output_cut_bytes": r.result.output_cut_bytes,
    }
    if r.counts is not None:
        data["failures"] = list(r.counts.failures)
    return json.dumps(data, sort_keys=True)


def store(
    q: Queue,
    number: int,
    commit: str,
    dirty: bool,
    full: bool,
    ran: Sequence[Ran],
    *,
    by: Authority,
    action: Action,
    actor: str | None,
) -> None:
    """Store the runs of ``ran`` as issue ``number``'s evidence, in one transaction that
    first asks the door whether ``by`` may still do ``action`` (a claim taken over, released
    or lapsed while the gates ran stores nothing).

    Raises:
        WorkqError: the table's refusal (NotHolder, StaleClaim, LeaseLapsed, ...).
    """
    if not ran:
        return

    def work(conn: Connection) -> None:
        issue = door.admit(q, conn, action, number, by).row
        for r in ran:
            c = r.counts
            conn.execute(
                insert(gate_runs).values(
                    issue_id=issue.id,
                    number=number,
                    commit_sha=commit,
                    dirty=dirty,
                    whole_checkout=full,
                    gate=r.spec.name,
                    gate_number=r.spec.number,
                    tests=r.spec.tests,
                    passed=r.result.passed,
                    score=r.result.score,
                    issues_found=r.result.issues_total,
                    tests_passed=c.passed if c else None,
                    tests_failed=c.failed if c else None,
                    tests_errors=c.errors if c else None,
                    exit_code=r.result.exit_code,
                    timed_out=r.result.timed_out,
                    summary=_summary(r),
                    started_at=r.started,
                    finished_at=r.finished,
                    actor=actor,
                )
            )
        record(
            q,
            conn,
            kind=EVENT_KIND,
            issue_id=issue.id,
            number=number,
            actor=actor,
            now=q.now(),
            after={
                "commit": commit,
                "dirty": dirty,
                "full": full,
                "passed": all(r.result.passed for r in ran),
                "gates": {r.spec.name: _word(r.result) for r in ran},
                **by.recorded(),
            },
        )
        if not all(r.result.passed for r in ran):
            _failing(q, conn, issue, actor, [r.spec.name for r in ran if not r.result.passed])

    q.db.write(work)


def _failing(q: Queue, conn: Connection, issue: Any, actor: str | None, gates: list[str]) -> None:
    """Record ``gates_failing`` when this failed run makes the ``gate_failures`` policy's
    count of failed runs in a row on the issue (once per streak: a pass starts a new one)."""
    streak = policies.count(conn, "gate_failures", issue.repository)
    recent = conn.execute(
        select(events.c.after)
        .where(events.c.number == issue.number, events.c.kind == EVENT_KIND)
        .order_by(events.c.id.desc())
        .limit(streak + 1)
    ).scalars()
    passed = [bool(json.loads(a or "{}").get("passed")) for a in recent]
    if len(passed) < streak or any(passed[:streak]):
        return
    if len(passed) > streak and not passed[streak]:
        return  # the streak was told when it reached the count
    record(
        q,
        conn,
        kind="gates_failing",
        issue_id=issue.id,
        number=issue.number,
        actor=actor,
        now=q.now(),
        after={"failed_runs": streak, "gates": gates, "holder": issue.claimed_by},
    )


def _word(result: GateResult) -> str:
    if result.skipped:
        return "skipped"
    if result.timed_out:
        return "timed out"
    return "passed" if result.passed else "failed"


def _files(root: Path, given: Sequence[str]) -> list[str]:
    """The named files, checked to be files inside the checkout."""
    base = root.resolve()
    out: list[str] = []
    for value in given:
        name = rules.relative_file(value)
        path = root / name
        if not path.is_file():
            raise InvalidInput(
                f"file {name!r} is not in the checkout {root}", field="files", file=name
            )
        if not path.resolve().is_relative_to(base):
            raise InvalidInput(f"file {name!r} leads out of the checkout", field="files")
        if name not in out:
            out.append(name)
    return out


def all_files(root: Path) -> list[str]:
    return [f for f in git.work_files(root) if (root / f).is_file()]


def report(
    number: int,
    commit: str,
    dirty: bool,
    root: Path,
    source: str,
    ran: Sequence[Ran],
    stored: Sequence[GateResult],
) -> GateReport:
    results = sorted([*stored, *(r.result for r in ran)], key=lambda g: g.gate_number)
    return GateReport(
        overall_pass=all(g.passed for g in results),
        gates=results,
        test_results=_test_results(ran),
        number=number,
        commit=commit,
        dirty=dirty,
        checkout=str(root),
        config=source,
        from_evidence=not ran,
    )


def latest(conn: Connection, issue_id: str, commit: str) -> dict[str, Any]:
    """The newest run of each gate over the whole checkout, clean, at ``commit``."""
    rows = conn.execute(
        select(gate_runs)
        .where(
            gate_runs.c.issue_id == issue_id,
            gate_runs.c.commit_sha == commit,
            gate_runs.c.dirty.is_(False),
            gate_runs.c.whole_checkout.is_(True),
        )
        .order_by(gate_runs.c.id.desc())
    ).all()
    found: dict[str, Any] = {}
    for row in rows:
        found.setdefault(row.gate, row)
    return found


def run(
    q: Queue,
    number: int,
    checkout: Path,
    *,
    by: Authority,
    files: Sequence[str] | None = None,
    include_tests: bool = True,
    gates: Sequence[int | str] | None = None,
    actor: str | None = None,
    action: Action = Action.GATES,
) -> GateReport:
    """Run the gates in effect (the owner's) on ``checkout`` for issue ``number`` and store
    the runs as evidence, on the authority of ``by`` (its holder: ``action`` of the
    decision table, asked before they run and again in the transaction that stores them).
    With ``files`` (relative to the checkout), the gates take those files only, and the
    runs are not evidence for the commit; without, they take every file of the checkout.

    Raises:
        InvalidInput: a bad file (absolute, ``..``, not in the checkout) or gate, or a
            malformed gate table (GateEnvRefused: one whose env names a secret).
        NotFound: no issue ``number``.
        WorkqError: the table's refusal (NotHolder, StaleClaim, LeaseLapsed, ...).
    """
    door.ask(q, action, number, by)
    root = git.toplevel(checkout)
    config = in_effect(q, root)
    chosen = rules.choose(config.gates, gates)
    if not include_tests:
        chosen = [s for s in chosen if not s.tests]
    full = not files
    candidates = all_files(root) if full else _files(root, files or ())
    commit = git.head(root)
    dirty = bool(git.dirty_paths(root))
    ran = [run_gate(q, spec, root, candidates, config.source) for spec in chosen]
    store(q, number, commit, dirty, full, ran, by=by, action=action, actor=actor)
    answer = report(number, commit, dirty, root, config.source, ran, [])
    if full and not dirty and len(chosen) == len(config.gates):
        return answer
    with q.db.read() as conn:  # not evidence: say what a merge will find for the commit
        found = latest(conn, load(conn, number).id, commit)
    stored = [found.get(spec.name) for spec in config.gates]
    evidence = (
        "none"
        if None in stored
        else "stored, passed"
        if all(row.passed for row in stored if row is not None)
        else "stored, failed"
    )
    return answer.model_copy(update={"evidence": evidence})
