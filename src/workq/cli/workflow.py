"""Workflow commands: show and advance the phases of claimed issues (contract B)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from workq.cli import output
from workq.cli.state import state
from workq.domain.workflow import WorkflowPhase
from workq.services.plans import workflow

workflow_app = typer.Typer(
    help="Workflow phases of claimed issues: selection, research, branch, implementation, "
    "testing, commit, pr, review (or abandoned).",
    no_args_is_help=True,
)

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]


def _tests(value: bool | None) -> str:
    return {True: "passed", False: "failed", None: "-"}[value]


@workflow_app.command()
def show(
    ctx: typer.Context,
    number: Annotated[
        int | None, typer.Argument(help="An issue (default: every claimed issue).", min=1)
    ] = None,
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="Only the claims of this run.")
    ] = None,
    json_: JsonFlag = False,
) -> None:
    """Show the workflow of claimed issues: phase, branch, tests, PR, lock and history."""
    s = state(ctx)
    found = workflow.status(s.queue(existing=True), number, s.acting(run_id) if run_id else None)
    if json_:
        output.emit_json({"workflows": [w.model_dump(mode="json") for w in found]})
        return
    if not found:
        output.line("No claimed issues")
        return
    if number is None:
        output.table(
            ["#", "phase", "branch", "tests", "PR title", "held by", "locked (s)", "title"],
            [
                (
                    w.issue_number,
                    w.current_phase.value,
                    w.branch_name,
                    _tests(w.tests_passed),
                    w.pr_title,
                    w.lock_holder,
                    w.lock_duration,
                    w.title,
                )
                for w in found
            ],
        )
        return
    item = found[0]
    output.fields(
        [
            ("issue", f"#{item.issue_number}: {item.title}"),
            ("phase", item.current_phase.value),
            ("branch", item.branch_name),
            ("tests", _tests(item.tests_passed)),
            ("justification", item.skip_justification),
            ("PR title", item.pr_title),
            ("held by", item.lock_holder),
            ("since", item.lock_acquired_at),
            ("locked (s)", item.lock_duration),
        ]
    )
    for change in item.phase_history:
        output.line(f"  {output.when(change.timestamp)}  {change.from_.value} -> {change.to.value}")


@workflow_app.command()
def advance(
    ctx: typer.Context,
    number: Annotated[int, typer.Argument(help="The claimed issue.", min=1)],
    phase: Annotated[WorkflowPhase, typer.Argument(help="The phase to move to.")],
    tests_passed: Annotated[
        bool | None,
        typer.Option("--tests-passed/--tests-failed", help="The test result, if you ran them."),
    ] = None,
    skip_justification: Annotated[
        str | None,
        typer.Option("--skip-justification", help="Why phases (or the tests) are skipped."),
    ] = None,
    pr_title: Annotated[str | None, typer.Option("--pr-title")] = None,
    pr_body: Annotated[str | None, typer.Option("--pr-body")] = None,
    run_id: Annotated[
        str | None,
        typer.Option("--run-id", help="The claim's holder (default: WORKQ_RUN_ID, else --as)."),
    ] = None,
    json_: JsonFlag = False,
) -> None:
    """Move a claimed issue's workflow; only the claim's holder may."""
    s = state(ctx)
    change = workflow.advance(
        s.queue(),
        number,
        s.acting(run_id),
        phase,
        tests_passed=tests_passed,
        skip_justification=skip_justification,
        pr_title=pr_title,
        pr_body=pr_body,
        here=Path.cwd(),
    )
    if json_:
        output.emit_json({"workflow": change.model_dump(mode="json")})
        return
    output.line(
        f"Issue #{change.issue_number}: {change.previous_phase.value} -> "
        f"{change.current_phase.value}"
    )
    if change.branch_name:
        output.line(f"Branch: {change.branch_name}")
    if change.skipped:
        output.line(f"Skipped: {', '.join(p.value for p in change.skipped)}")
    if change.pr_title:
        output.line(f"PR title: {change.pr_title}")


def register(app: typer.Typer) -> None:
    app.add_typer(workflow_app, name="workflow")
