"""Quality gates the server runs on an issue's checkout, and the evidence they leave.

The gates come from the checkout: a ``[gates]`` table in ``workq.toml`` at its root, else a
``[tool.workq.gates]`` table in its ``pyproject.toml``, else none (or the preset the server
names, ``--default-gates``): gates are what a repository's owner chose, and ``init``
writes a starter table. Each run of a gate is stored on the issue
(``gate_runs``) with the commit the checkout was at and whether its tree was dirty, and an
event (``gates_run``) says which gates passed on which commit.

Evidence for a commit is a run over the whole checkout (no ``files`` given) from a clean
tree at that commit: a run on named files, on uncommitted changes or on another commit
does not count. ``require_passed`` is what the tests gate (``advance_workflow``) and the
merge steps ask.
"""

from __future__ import annotations

import json
import os
import tempfile
import tomllib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

from sqlalchemy import Connection, insert, select

from workq.db.engine import retry_lost_read
from workq.db.tables import gate_runs, issues, repositories
from workq.domain import gates as rules
from workq.domain.authority import Authority
from workq.domain.gates import GateSpec
from workq.errors import (
    GitFailed,
    InvalidInput,
    NotHolder,
    QualityGateFailed,
    Step,
    TestsFailing,
    UncommittedChanges,
)
from workq.schemas import (
    GateCause,
    GateConfig,
    GateIssue,
    GateReport,
    GateResult,
    GateRun,
    GateSetting,
    GateTestResults,
    Status,
)
from workq.services.coding import commands
from workq.services.handle import Queue, load, record
from workq.services.workspaces import worktrees
from workq.vcs import git

__all__ = [
    "EVENT_KIND",
    "Configuration",
    "MergeCandidate",
    "check_work",
    "checkout_for",
    "configuration",
    "evidence",
    "held_issue",
    "init",
    "locate",
    "merge_gate",
    "require_passed",
    "run",
    "settings",
    "unconfigured",
]

EVENT_KIND = "gates_run"
WORKQ_TOML = "workq.toml"
PYPROJECT = "pyproject.toml"
# What an answer and a stored run keep of a gate's output.
OUTPUT_CHARS = 1500
ISSUES_KEPT = 20
# pytest's exit status when it collected no test.
PYTEST_NO_TESTS = 5
# The modes of the tests gate (Settings.tests_gate, Queue.tests_gate).
TRUST = "trust"
EVIDENCE = "evidence"


NONE = "none"
HOW_TO_ADD = "workq gates init [--preset strict|pytest] writes a starter table"


@dataclass(frozen=True)
class Configuration:
    source: str
    """``workq.toml [gates]``, ``pyproject.toml [tool.workq.gates]``, ``preset NAME`` (the
    server's default) or ``none``."""
    gates: tuple[GateSpec, ...]


def _toml(text: str, name: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInput(f"{name} is not valid TOML: {exc}", source=name) from None


def configuration(
    checkout: Path, commit: str | None = None, *, default: str = rules.NO_PRESET
) -> Configuration:
    """The gates in effect in ``checkout``: as its files are now, or as ``commit`` has them;
    with no gate table, the preset ``default`` names (none by default).

    Raises:
        InvalidInput: a gate table that is malformed (naming the file and the gate).
    """

    def read(name: str) -> str | None:
        if commit is not None:
            return git.show_file(checkout, commit, name)
        path = checkout / name
        return path.read_text(encoding="utf-8") if path.is_file() else None

    text = read(WORKQ_TOML)
    if text is not None:
        data = _toml(text, WORKQ_TOML)
        if "gates" in data:
            source = f"{WORKQ_TOML} [gates]"
            return Configuration(source, rules.parse_table(data["gates"], source))
    text = read(PYPROJECT)
    if text is not None:
        tool = _toml(text, PYPROJECT).get("tool", {})
        workq = tool.get("workq", {}) if isinstance(tool, dict) else {}
        if isinstance(workq, dict) and "gates" in workq:
            source = f"{PYPROJECT} [tool.workq.gates]"
            return Configuration(source, rules.parse_table(workq["gates"], source))
    if default == rules.NO_PRESET:
        return Configuration(NONE, ())
    return Configuration(f"preset {default}", rules.preset(default))


def unconfigured(q: Queue, checkout: Path, commit: str) -> str | None:
    """What a merge says once when ``commit`` has no gates: that nothing was checked, and
    how to add them. None when it has gates, or when merges trust the agent's word."""
    if q.tests_gate == TRUST or configuration(checkout, commit, default=q.default_gates).gates:
        return None
    return f"no quality gates are configured, so none ran; {HOW_TO_ADD}"


def init(checkout: Path, preset: str = "pytest") -> tuple[Path, Configuration]:
    """Write preset ``preset``'s gates as the ``[gates]`` table of ``workq.toml`` at the root
    of the work tree ``checkout`` stands in (added to the file if it has no gate table).

    Raises:
        InvalidInput: no such preset, or the checkout already has a gate table (editing it
            is the owner's choice), or its workq.toml is not valid TOML.
    """
    specs = rules.preset(preset)
    if not specs:
        raise InvalidInput("preset 'none' has no gates to write", field="preset")
    root = git.toplevel(checkout)
    found = configuration(root)
    if found.source != NONE:
        raise InvalidInput(
            f"{root} already has gates ({found.source}): edit that table instead",
            field="preset",
            source=found.source,
        )
    path = root / WORKQ_TOML
    before = path.read_text(encoding="utf-8") if path.is_file() else ""
    table = rules.table_text(specs, "gates")
    text = f"{before.rstrip()}\n\n{table}" if before.strip() else table
    source = f"{WORKQ_TOML} [gates]"
    written = Configuration(source, rules.parse_table(_toml(text, WORKQ_TOML)["gates"], source))
    path.write_text(text, encoding="utf-8")
    return path, written


def settings(checkout: Path, default: str = rules.NO_PRESET) -> GateConfig:
    """The configuration in effect in the work tree ``checkout`` stands in, as an answer."""
    root = git.toplevel(checkout)
    found = configuration(root, default=default)
    return GateConfig(
        checkout=str(root),
        source=found.source,
        gates=[
            GateSetting(
                gate_number=s.number,
                name=s.name,
                command=list(s.command),
                files=list(s.files),
                timeout=s.timeout,
                tests=s.tests,
                env=list(s.env),
            )
            for s in found.gates
        ],
    )


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


def _no_checkout(number: int, why: str) -> QualityGateFailed:
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
        raise _no_checkout(number, "so its gates cannot run")
    return found


@retry_lost_read
def held_issue(q: Queue, holders: Collection[str]) -> int:
    """The one issue ``holders`` hold: the default issue of run_quality_gates.

    Raises:
        NotHolder: they hold none.
        InvalidInput: they hold several.
    """
    with q.db.read() as conn:
        numbers = (
            conn.execute(
                select(issues.c.number)
                .where(
                    issues.c.status == Status.IN_PROGRESS.value,
                    issues.c.claimed_by.in_(list(holders)),
                )
                .order_by(issues.c.number)
                .limit(10)
            )
            .scalars()
            .all()
        )
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
    return int(numbers[0])


# --- running -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Ran:
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
# say which test it was in: it writes each test's id to the file its variable names.
_PROBE = "workq_gate_probe"
_PROBE_SOURCE = """\
import os


def pytest_runtest_logstart(nodeid, location):
    with open(os.environ["WORKQ_GATE_PROBE"], "w", encoding="utf-8") as f:
        f.write(nodeid)
"""


def _run_tests_gate(
    spec: GateSpec, argv: Sequence[str], root: Path
) -> tuple[commands.Outcome, str | None]:
    """Run a tests gate with the probe loaded; its outcome and the last test it started."""
    with tempfile.TemporaryDirectory(prefix="workq-gate-") as scratch:
        (Path(scratch) / f"{_PROBE}.py").write_text(_PROBE_SOURCE, encoding="utf-8")
        probe = Path(scratch) / "last-test"
        env = commands.environment(passed=spec.env)
        plugins = [p for p in env.get("PYTEST_PLUGINS", "").split(",") if p]
        paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env.update(
            PYTEST_PLUGINS=",".join([*plugins, _PROBE]),
            PYTHONPATH=os.pathsep.join([scratch, *paths]),
            WORKQ_GATE_PROBE=str(probe),
        )
        outcome = commands.run(argv, cwd=root, timeout=spec.timeout, env=env)
        last = probe.read_text(encoding="utf-8", errors="replace") if probe.is_file() else None
    return outcome, (last or None)


def _run_gate(q: Queue, spec: GateSpec, root: Path, files: Sequence[str], source: str) -> _Ran:
    started = q.now()
    chosen = rules.select(spec, files)
    if not chosen:
        return _Ran(spec, _skipped(spec), None, started, q.now())
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
    return _Ran(spec, result, counts, started, q.now())


def _test_results(ran: Sequence[_Ran]) -> GateTestResults | None:
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


def _summary(r: _Ran) -> str:
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


def _store(
    q: Queue,
    number: int,
    commit: str,
    dirty: bool,
    full: bool,
    ran: Sequence[_Ran],
    actor: str | None,
) -> None:
    if not ran:
        return

    def work(conn: Connection) -> None:
        issue = load(conn, number, for_update=True)
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
            },
        )

    q.db.write(work)


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


def _all_files(root: Path) -> list[str]:
    return [f for f in git.work_files(root) if (root / f).is_file()]


def run(
    q: Queue,
    number: int,
    checkout: Path,
    *,
    files: Sequence[str] | None = None,
    include_tests: bool = True,
    gates: Sequence[int | str] | None = None,
    actor: str | None = None,
) -> GateReport:
    """Run the gates of ``checkout`` for issue ``number`` and store the runs as evidence.
    With ``files`` (relative to the checkout), the gates take those files only, and the runs
    are not evidence for the commit; without, they take every file of the checkout.

    Raises:
        InvalidInput: a bad file (absolute, ``..``, not in the checkout) or gate, or a
            malformed gate table.
        NotFound: no issue ``number``.
    """
    with q.db.read() as conn:
        load(conn, number)
    root = git.toplevel(checkout)
    config = configuration(root, default=q.default_gates)
    chosen = rules.choose(config.gates, gates)
    if not include_tests:
        chosen = [s for s in chosen if not s.tests]
    full = not files
    candidates = _all_files(root) if full else _files(root, files or ())
    commit = git.head(root)
    dirty = bool(git.dirty_paths(root))
    ran = [_run_gate(q, spec, root, candidates, config.source) for spec in chosen]
    _store(q, number, commit, dirty, full, ran, actor)
    report = _report(number, commit, dirty, root, config.source, ran, [])
    if full and not dirty and len(chosen) == len(config.gates):
        return report
    with q.db.read() as conn:  # not evidence: say what a merge will find for the commit
        latest = _latest(conn, load(conn, number).id, commit)
    stored = [latest.get(spec.name) for spec in config.gates]
    found = (
        "none"
        if None in stored
        else "stored, passed"
        if all(row.passed for row in stored if row is not None)
        else "stored, failed"
    )
    return report.model_copy(update={"evidence": found})


def _report(
    number: int,
    commit: str,
    dirty: bool,
    root: Path,
    source: str,
    ran: Sequence[_Ran],
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


# --- evidence ------------------------------------------------------------------------------


def _latest(conn: Connection, issue_id: str, commit: str) -> dict[str, Any]:
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
    latest: dict[str, Any] = {}
    for row in rows:
        latest.setdefault(row.gate, row)
    return latest


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


def _refuse(report: GateReport, number: int, *, when: Mapping[str, datetime] | None = None) -> None:
    """Raise for the failing gates of ``report``. ``when``: the stored runs it was read from
    (gate name -> when it finished), said in the refusal: they are not run again on that
    commit unless asked."""
    failing = [g for g in report.gates if not g.passed]
    if not failing:
        return
    names = ", ".join(f"{g.name} ({_why(g)})" for g in failing)
    facts: dict[str, Any] = {
        "number": number,
        "commit": report.commit,
        "failing": [
            {"gate": g.name, "cause": g.cause, "first_issue": _first_issue(g)} for g in failing
        ],
    }
    if when:
        last = max(when.values())
        names += f", in a run that finished {last:%Y-%m-%d %H:%M:%SZ} (not run again)"
        facts["failed_at"] = {name: f"{at:%Y-%m-%dT%H:%M:%SZ}" for name, at in when.items()}
        facts["hint"] = (
            Step.RUN_GATES,
            " on this commit to run them again (a flaky failure), or fix and commit",
        )
    if any(g.tests for g in failing):
        if report.test_results is not None:
            facts["test_results"] = report.test_results.model_dump()
        raise TestsFailing(
            f"issue #{number}: the tests fail on {report.commit[:12]}: {names}", **facts
        )
    raise QualityGateFailed(
        f"issue #{number}: quality gates failed on {report.commit[:12]}: {names}", **facts
    )


def require_passed(
    q: Queue,
    number: int,
    checkout: Path,
    commit: str,
    *,
    run: bool = True,
    actor: str | None = None,
) -> GateReport:
    """Return when the stored evidence shows every gate of ``commit`` passed there (run over
    the whole checkout from a clean tree). A gate without such evidence (none, another
    commit, or a failure) is run now in ``checkout`` when ``run`` is true, and stored.

    Raises:
        TestsFailing: the tests gate failed (facts: the failing gates, their first issue).
        QualityGateFailed: another gate failed; or, with ``run`` false, evidence is
            missing; or ``checkout`` is not at ``commit``.
        UncommittedChanges: gates must run and ``checkout`` has uncommitted changes.
        NotFound: no issue ``number``.
    """
    root = git.toplevel(checkout)
    config = configuration(root, commit, default=q.default_gates)
    with q.db.read() as conn:
        issue = load(conn, number)
        latest = _latest(conn, issue.id, commit)
    stored = [_stored_result(latest[s.name]) for s in config.gates if s.name in latest]
    good = [g for g in stored if g.passed]
    todo = [s for s in config.gates if s.name not in {g.name for g in good}]
    if not todo:
        return _report(number, commit, False, root, config.source, [], good)
    failed = [g for g in stored if not g.passed]
    if failed:  # a commit's failure stands until someone asks again (run_quality_gates)
        report = _report(number, commit, False, root, config.source, [], stored)
        _refuse(report, number, when={g.name: latest[g.name].finished_at for g in failed})
    if not run:
        report = _report(number, commit, False, root, config.source, [], stored)
        _refuse(report, number)
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
    files = _all_files(root)
    ran = [_run_gate(q, spec, root, files, config.source) for spec in todo]
    _store(q, number, commit, False, True, ran, actor)
    report = _report(number, commit, False, root, config.source, ran, good)
    _refuse(report, number)
    return report


def check_work(
    q: Queue, number: int, checkout: Path | None, *, actor: str | None = None
) -> GateReport:
    """The tests gate of the workflow: the gates on what ``checkout`` holds now. A clean
    tree needs them passed on its HEAD (``require_passed``); uncommitted changes are
    checked by running the gates on them now (stored as runs on a dirty tree).

    Raises:
        QualityGateFailed: no checkout, or a gate failed.
        TestsFailing: the tests gate failed.
    """
    if checkout is None:
        raise _no_checkout(number, "so nothing can show that its tests pass")
    root = git.toplevel(checkout)
    if not git.dirty_paths(root):
        return require_passed(q, number, root, git.head(root), actor=actor)
    report = run(q, number, root, actor=actor)
    _refuse(report, number)
    return report


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
    """What a merge is about to land, for the checks in ``merges.GATES``."""

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
    """Refuse a merge whose branch tip has not passed its gates (unless trusted)."""
    if q.tests_gate == TRUST or candidate.number is None:
        return
    require_passed(q, candidate.number, candidate.worktree, candidate.tip, actor=candidate.actor)
