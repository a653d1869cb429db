"""Plan commands: list, show, enter, advance, exit (contract A's plan mode, for a run id)."""

from __future__ import annotations

from typing import Annotated

import typer

from workq.cli import output
from workq.cli.state import State, state
from workq.domain.plan import COMMAND_STEPS, MAX_TEAMMATES, guidance
from workq.plan_schemas import Plan, PlanIssue
from workq.services.plans import plan_mode

plan_app = typer.Typer(
    help="Plan mode: explore, design, review and write tasks before implementing.",
    no_args_is_help=True,
)

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
RunId = Annotated[
    str | None,
    typer.Option("--run-id", help="Whose plan (default: WORKQ_RUN_ID, else --as)."),
]


def run_id_of(s: State, given: str | None) -> str:
    """The run id a command acts for: the flag, else WORKQ_RUN_ID, else who you are."""
    return given or s.settings().run_id or s.actor


def _issues(launched: list[PlanIssue]) -> None:
    output.table(
        ["task", "#", "title", "agent", "status", "waits for"],
        [
            (
                i.task,
                i.number,
                i.title,
                i.agent,
                i.status.value,
                ", ".join(f"#{n}" for n in i.waits_for) or "-",
            )
            for i in launched
        ],
    )


@plan_app.command("list")
def list_(
    ctx: typer.Context,
    run_id: Annotated[str | None, typer.Option("--run-id", help="Only this run's plans.")] = None,
    active: Annotated[bool, typer.Option("--active", help="Only plans in progress.")] = False,
    limit: Annotated[int, typer.Option(min=1, max=200)] = 20,
    json_: JsonFlag = False,
) -> None:
    """List plans, newest first."""
    found = plan_mode.list_plans(
        state(ctx).queue(existing=True), run_id=run_id, active_only=active, limit=limit
    )
    if json_:
        output.emit_json(found)
        return
    if not found:
        output.line("No plans")
        return
    output.table(
        ["slug", "run id", "status", "phase", "file", "created"],
        [
            (
                p.slug,
                p.run_id,
                p.status.value,
                p.phase.display,
                p.shown_path,
                output.when(p.created_at),
            )
            for p in found
        ],
    )


@plan_app.command()
def show(
    ctx: typer.Context,
    slug: Annotated[
        str | None, typer.Argument(help="A plan's slug (default: the run's active plan).")
    ] = None,
    run_id: RunId = None,
    json_: JsonFlag = False,
) -> None:
    """Show a plan: phase, file, empty sections and the issues it launched."""
    s = state(ctx)
    who = run_id_of(s, run_id) if slug is None else run_id
    detail = plan_mode.show(s.queue(existing=True), run_id=who, slug=slug)
    if json_:
        output.emit_json(detail)
        return
    plan = detail.plan
    if not detail.file_exists:
        sections = "the file is missing"
    elif detail.empty_sections is None:
        sections = "the file cannot be read"
    else:
        sections = ", ".join(detail.empty_sections) or "none"
    output.fields(
        [
            ("slug", plan.slug),
            ("run id", plan.run_id),
            ("status", plan.status.value),
            ("phase", plan.phase.display),
            ("file", plan.shown_path),
            ("still empty", sections),
            ("created", plan.created_at),
            ("updated", plan.updated_at),
            ("closed", plan.closed_at),
        ]
    )
    output.line("")
    output.line(plan.goal)
    if detail.issues:
        output.line("")
        _issues(detail.issues)


def _phase(plan: Plan, head: str) -> None:
    output.line(head)
    output.line(f"Plan file: {plan.shown_path}")
    output.line("")
    output.line(guidance(plan.phase, COMMAND_STEPS))


@plan_app.command()
def enter(
    ctx: typer.Context,
    slug: Annotated[str, typer.Argument(help="The plan's name: lowercase letters, digits, -.")],
    goal: Annotated[str, typer.Argument(help="What the plan is for.")],
    run_id: RunId = None,
    json_: JsonFlag = False,
) -> None:
    """Put a run in plan mode: create plans/SLUG.md beside the database (WORKQ_PLANS_DIR to
    choose another folder) at phase Explore."""
    s = state(ctx)
    entered = plan_mode.enter(
        s.queue(), run_id_of(s, run_id), slug, goal, s.settings().plans_folder
    )
    if json_:
        output.emit_json(entered)
        return
    plan = entered.plan
    head = f"Entered plan mode: {plan.slug} (run {plan.run_id}, phase {plan.phase.display})"
    if entered.resumed:
        head += "; it was already in progress"
    elif not entered.created_file:
        head += "; the existing plan file was kept"
    _phase(plan, head)


@plan_app.command()
def advance(ctx: typer.Context, run_id: RunId = None, json_: JsonFlag = False) -> None:
    """Move a run's plan to its next phase."""
    s = state(ctx)
    moved = plan_mode.advance(s.queue(), run_id_of(s, run_id))
    if json_:
        output.emit_json(moved)
        return
    _phase(moved.plan, f"Advanced to phase: {moved.plan.phase.display}")
    if moved.empty_sections:
        output.line("")
        output.line(f"Still empty: {', '.join(moved.empty_sections)}")


@plan_app.command("exit")
def exit_(
    ctx: typer.Context,
    launch_swarm: Annotated[
        bool, typer.Option("--launch-swarm", help="Turn the open tasks into issues.")
    ] = False,
    teammates: Annotated[
        int | None,
        typer.Option(min=1, max=MAX_TEAMMATES, help="Agents to spread the tasks over (default 3)."),
    ] = None,
    abandon: Annotated[
        bool, typer.Option("--abandon", help="Leave plan mode without checking the plan.")
    ] = False,
    run_id: RunId = None,
    json_: JsonFlag = False,
) -> None:
    """Take a run out of plan mode once its plan is written (or --abandon it)."""
    s = state(ctx)
    who = run_id_of(s, run_id)
    if abandon:
        if launch_swarm:
            raise typer.BadParameter("--abandon launches nothing; drop --launch-swarm")
        dropped = plan_mode.abandon(s.queue(), who, actor=s.actor)
        if json_:
            output.emit_json(dropped)
        else:
            output.line(f"Abandoned plan {dropped.slug}; its file stays: {dropped.shown_path}")
        return
    done = plan_mode.exit_plan(s.queue(), who, launch_swarm=launch_swarm, teammate_count=teammates)
    if json_:
        output.emit_json(done)
        return
    output.line("Exited plan mode")
    output.line(f"Plan saved: {done.plan.shown_path}")
    if done.empty_sections:
        output.line(f"Warning: left empty: {', '.join(done.empty_sections)}")
    if launch_swarm:
        output.line(
            f"Launched {len(done.launched)} issue(s) for {done.teammate_count} teammate(s):"
        )
        _issues(done.launched)


@plan_app.command("relocate")
def relocate_(ctx: typer.Context, json_: JsonFlag = False) -> None:
    """Copy plan files that earlier releases wrote under the client's working folder into
    this database's plans folder, and point their plans at the copies (nothing is moved
    or overwritten)."""
    from workq.services.plans import relocation

    s = state(ctx)
    folder = s.settings().plans_folder
    found = relocation.relocate(s.queue(existing=True), folder)
    if json_:
        output.emit_json([r._asdict() for r in found])
        return
    if not found:
        output.line(f"Every plan file is in {folder.expanduser().resolve()}")
    for r in found:
        output.line(f"{r.slug}: {r.why}: {r.old}" + (f" -> {r.new}" if r.new else ""))


def register(app: typer.Typer) -> None:
    app.add_typer(plan_app, name="plan")
