"""Contract A's plan mode tools: enter_plan_mode, get_current_phase, advance_plan_phase and
exit_plan_mode, for this server's run id. (A run in plan mode cannot claim or complete
issues: the claim services refuse it, in their own transaction.)"""

from __future__ import annotations

from typing import Annotated

from mcp.types import CallToolResult
from pydantic import BaseModel, ConfigDict, Field

from workq.domain.plan import MAX_GOAL_CHARS, MAX_TEAMMATES, PHASE_SECTIONS, SLUG_MAX, PlanPhase
from workq.domain.plan import guidance as guidance_of
from workq.errors import NoActivePlan
from workq.plan_schemas import Plan, PlanIssue
from workq.server.params import Flag
from workq.server.registry import READ_ONLY, Registry, writes
from workq.server.results import clip, ok, worded

Slug = Annotated[
    str,
    Field(
        min_length=1,
        max_length=SLUG_MAX,
        description="e.g. auth-refactor ([a-z0-9-])",
    ),
]
Goal = Annotated[str, Field(min_length=1, max_length=MAX_GOAL_CHARS)]
Teammates = Annotated[
    int,
    Field(strict=True, ge=1, le=MAX_TEAMMATES, description="default 3"),
]


class PlanView(BaseModel):
    """Where this run stands in plan mode (the guidance is in the text)."""

    model_config = ConfigDict(frozen=True)

    active: bool
    run_id: str
    slug: str | None = None
    phase: PlanPhase | None = None
    plan_file: str | None = None
    empty_sections: list[str] | None = None


class PlanExit(BaseModel):
    model_config = ConfigDict(frozen=True)

    slug: str
    plan_file: str
    launched: list[PlanIssue] = Field(description="Issues made from the plan's tasks")
    teammate_count: int | None = None
    empty_sections: list[str] = Field(
        default_factory=list, description="Template sections left empty (a warning)"
    )


def _view(plan: Plan, empty: list[str] | None = None) -> PlanView:
    return PlanView(
        active=True,
        run_id=plan.run_id,
        slug=plan.slug,
        phase=plan.phase,
        plan_file=plan.shown_path,
        empty_sections=empty,
    )


def _still_empty(empty: list[str] | None) -> str:
    if empty is None:
        return "\n\nNote: the plan file is missing or cannot be read."
    if not empty:
        return ""
    return f"\n\nStill empty in the plan file: {', '.join(empty)}."


def register(reg: Registry) -> None:
    _register_entry(reg)
    _register_progress(reg)


def _register_entry(reg: Registry) -> None:
    """Entering plan mode, and where the run stands in it."""
    state = reg.state

    @reg.tool(writes(idempotent=True))
    def enter_plan_mode(slug: Slug, goal: Goal) -> CallToolResult:
        """Enter plan mode: creates plans/<slug>.md at phase Explore. Claims and
        completions are refused until exit_plan_mode."""
        from workq.services.plans import plan_mode

        with worded("Could not enter plan mode"):
            entered = plan_mode.enter(
                state.queue(), state.run_id, slug, goal, state.settings.plans_folder
            )
        plan = entered.plan
        text = f"Entered plan mode: {plan.slug}\nPlan file: {plan.shown_path}"
        if entered.resumed:
            text += f"\nAlready planning {plan.slug}: resumed at phase {plan.phase.display}"
        elif not entered.created_file:
            text += "\nThe plan file already existed and was kept as it is"
        text += f"\n\nCurrent phase: {plan.phase.name}\n\n{guidance_of(plan.phase)}"
        return ok(text, _view(plan))

    @reg.tool(READ_ONLY)
    def get_current_phase() -> Annotated[CallToolResult, PlanView]:
        """The plan mode phase and its guidance."""
        from workq.services.plans import plan_mode

        with worded("Could not read the plan mode phase"):
            try:
                detail = plan_mode.show(state.queue(), run_id=state.run_id)
            except NoActivePlan:
                detail = None
        if detail is None:
            return ok(
                f"Not in plan mode (run {state.run_id}); start with enter_plan_mode(slug, goal)",
                PlanView(active=False, run_id=state.run_id),
            )
        plan = detail.plan
        text = f"Current phase: {plan.phase.name}\n\n{guidance_of(plan.phase)}"
        text += f"\n\nPlan: {plan.slug} ({plan.shown_path})"
        text += _still_empty(detail.empty_sections if detail.file_exists else None)
        return ok(text, _view(plan, detail.empty_sections))


def _register_progress(reg: Registry) -> None:
    """Moving to the next phase, and out of plan mode."""
    state = reg.state

    @reg.tool(writes(idempotent=False))
    def advance_plan_phase() -> CallToolResult:
        """Next plan mode phase: Explore, Design, Review, Final, Exit."""
        from workq.services.plans import plan_mode

        with worded("Could not advance the plan phase"):
            moved = plan_mode.advance(state.queue(), state.run_id)
        plan = moved.plan
        text = f"Advanced to phase: {plan.phase.display}\n{guidance_of(plan.phase)}"
        section = PHASE_SECTIONS.get(moved.previous)
        if moved.empty_sections is None:
            text += _still_empty(None)
        elif section in moved.empty_sections:
            text += (
                f"\n\nNote: '## {section}' ({moved.previous.display}) is still empty in "
                f"{plan.shown_path}; exit_plan_mode needs it written."
            )
        return ok(text, _view(plan, moved.empty_sections))

    @reg.tool(writes(idempotent=False))
    def exit_plan_mode(
        launchSwarm: Flag = False,
        teammateCount: Teammates | None = None,
    ) -> Annotated[CallToolResult, PlanExit]:
        """Exit plan mode once the plan file is written. launchSwarm=true queues its
        '- [ ]' tasks as issues, in their (after N) order, over teammateCount agents."""
        from workq.services.plans import plan_mode

        with worded("Could not exit plan mode"):
            done = plan_mode.exit_plan(
                state.queue(),
                state.run_id,
                launch_swarm=launchSwarm,
                teammate_count=teammateCount,
            )
        plan = done.plan
        text = f"Exited plan mode\nPlan saved: {plan.shown_path}"
        if done.empty_sections:
            text += f"\nWarning: left empty: {', '.join(done.empty_sections)}"
        if launchSwarm:
            text += (
                f"\nLaunched {len(done.launched)} issue(s) for {done.teammate_count} teammate(s):"
            )
            for item in done.launched:
                line = f"\n#{item.number} {item.agent}: {clip(item.title)}"
                if item.waits_for:
                    line += " (after " + ", ".join(f"#{n}" for n in item.waits_for) + ")"
                if item.reused:
                    line += " (launched before)"
                text += line
        return ok(
            text,
            PlanExit(
                slug=plan.slug,
                plan_file=plan.shown_path,
                launched=done.launched,
                teammate_count=done.teammate_count,
                empty_sections=done.empty_sections,
            ),
        )
