"""Quality gates on the command line: run them on an issue's checkout, show the gates in
effect, and the evidence stored on an issue (services/coding/gates.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from workq.cli import output
from workq.cli.state import state
from workq.errors import InvalidInput, NoDatabase
from workq.schemas import GateConfig, GateReport
from workq.services.coding import gates

gates_app = typer.Typer(
    help="Quality gates: run them on an issue's checkout, list them, show their evidence.",
    no_args_is_help=True,
)

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]


def _print(report: GateReport) -> None:
    state_word = "uncommitted changes on " if report.dirty else ""
    output.line(
        f"Issue #{report.number}, {state_word}{report.commit[:12]} in {report.checkout} "
        f"({report.config}): {report.verdict()}"
    )
    rows = []
    for g in report.gates:
        first = g.error or (
            f"{g.issues[0].file}:{g.issues[0].line}: {g.issues[0].message}" if g.issues else ""
        )
        word = "skipped" if g.skipped else ("pass" if g.passed else "FAIL")
        rows.append((g.gate_number, g.name, word, g.score, g.issues_total, first[:100]))
    output.table(["#", "gate", "result", "score", "issues", "first"], rows)
    if report.test_results is not None:
        t = report.test_results
        output.line(f"tests: {t.passed} passed, {t.failed} failed")
        for error in t.errors[:10]:
            output.line(f"  {error}")
    note = report.note()
    if note:
        output.line(note)


@gates_app.command("run")
def run_command(
    ctx: typer.Context,
    args: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[N] [FILES...]",
            help="The issue (default: the one your run id holds), then files relative to "
            "its checkout (default: the whole checkout, which is evidence for the commit).",
        ),
    ] = None,
    no_tests: Annotated[bool, typer.Option("--no-tests", help="Leave out the tests gate.")] = False,
    gate: Annotated[
        list[str] | None, typer.Option("--gate", help="Only this gate (number or name).")
    ] = None,
    run_id: Annotated[str | None, typer.Option("--run-id", help="Whose claim.")] = None,
    json_: JsonFlag = False,
) -> None:
    """Run the quality gates on an issue's checkout and store the result as evidence: the
    holder's act (its run id: --run-id, else WORKQ_RUN_ID, else --as). Exits 1 when a gate
    fails."""
    s = state(ctx)
    q = s.queue()
    by = s.acting(run_id)
    words = list(args or [])
    number = int(words.pop(0)) if words and words[0].isdigit() else gates.held_issue(q, by)
    if number < 1:
        raise InvalidInput("the issue number is 1 or more", field="N")
    chosen: list[int | str] | None = [int(g) if g.isdigit() else g for g in gate] if gate else None
    report = gates.run(
        q,
        number,
        gates.locate(q, number, Path.cwd()),
        by=by,
        files=words,
        include_tests=not no_tests,
        gates=chosen,
        actor=s.actor,
    )
    if json_:
        output.emit_json(report.model_dump(mode="json"))
    else:
        _print(report)
    if not report.overall_pass:
        raise typer.Exit(1)


@gates_app.command("list")
def list_command(
    ctx: typer.Context,
    number: Annotated[
        int | None,
        typer.Argument(
            help="An issue: the gates of its checkout (default: this directory's).", min=1
        ),
    ] = None,
    json_: JsonFlag = False,
) -> None:
    """The gates in effect: the table committed on the repository's default branch (never
    a branch's own: a branch's change takes effect once merged), and where it comes from."""
    s = state(ctx)
    preset = s.settings().default_gates
    try:
        q = s.queue(existing=True)
    except NoDatabase:  # a repository no database registers: its own default branch
        if number is not None:
            raise
        q = None
    where = gates.locate(q, number, Path.cwd()) if q is not None and number else Path.cwd()
    found = gates.settings(q, where, preset=preset)
    if json_:
        output.emit_json(found.model_dump(mode="json"))
        return
    if not found.gates:
        output.line(f"No gates in {found.checkout}: merges check nothing. {gates.HOW_TO_ADD}")
    else:
        output.line(f"Gates of {found.checkout} ({found.source}):")
        _gates_table(found)
    changed = gates.pending(q, where, preset=preset)
    if changed is not None:
        output.line(
            f"This checkout's own table ({changed.source}) differs: it takes effect once "
            "merged into the default branch"
        )
        if changed.gates:
            _gates_table(changed)


def _gates_table(found: GateConfig) -> None:
    output.table(
        ["#", "gate", "command", "files", "timeout", "tests"],
        [
            (
                g.gate_number,
                g.name,
                " ".join(g.command),
                ", ".join(g.files) or "all",
                f"{g.timeout:g} s",
                "yes" if g.tests else "",
            )
            for g in found.gates
        ],
    )


@gates_app.command("init")
def init_command(
    repo: Annotated[Path, typer.Option(help="A directory in the repository.")] = Path("."),
    preset: Annotated[
        str,
        typer.Option(
            metavar="strict|pytest",
            help="pytest: one tests gate. strict: whitespace, imports, line length (ruff), "
            "mypy --strict and pytest.",
        ),
    ] = "pytest",
) -> None:
    """Write a starter gate table into the repository's workq.toml (a repository has no
    gates until it has one). Commit it to the default branch: merges read the gates there
    (a branch's own change to them takes effect once merged)."""
    path, written = gates.init(repo, preset)
    names = ", ".join(g.name for g in written.gates)
    count = f"{len(written.gates)} gate{'s' if len(written.gates) > 1 else ''}"
    output.line(f"Wrote {count} to {path}: {names}")
    output.line(
        "Next: commit it to the default branch (gates are read there); `workq gates list` "
        "shows them, `workq gates run N` runs them"
    )


@gates_app.command("evidence")
def evidence_command(
    ctx: typer.Context,
    number: Annotated[int, typer.Argument(help="The issue.", min=1)],
    limit: Annotated[int, typer.Option(help="At most this many runs.", min=1, max=1000)] = 50,
    json_: JsonFlag = False,
) -> None:
    """The gate runs stored on an issue, newest first: which gates passed on which commit."""
    found = gates.evidence(state(ctx).queue(existing=True), number, limit=limit)
    if json_:
        output.emit_json([r.model_dump(mode="json") for r in found])
        return
    if not found:
        output.line(f"No gate runs on issue #{number}")
        return
    output.table(
        ["when", "commit", "tree", "scope", "gate", "result", "score", "by"],
        [
            (
                output.when(r.finished_at),
                r.commit[:12],
                "dirty" if r.dirty else "clean",
                "all" if r.full else "files",
                r.gate,
                "timed out" if r.timed_out else ("pass" if r.passed else "FAIL"),
                r.score,
                r.actor,
            )
            for r in found
        ],
    )


def register(app: typer.Typer) -> None:
    app.add_typer(gates_app, name="gates")
