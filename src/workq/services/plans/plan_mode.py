"""Plan mode (contract A) for a run id: enter, advance, exit (launching the plan's tasks),
abandon; the active plan, which claims and completions check; and views for the CLI.

The state lives in the ``plans`` table, at most one active plan per run id (and per slug):
a server restarted with the same run id resumes its plan, and agents with different run ids
plan at once without seeing each other's plans. ``enter`` creates the plan file from the
template (or keeps one that exists); after that the file is only read, as it is on disk,
since the agent (or a person) writes it between calls.

Whether a run is in plan mode, for the changes plan mode refuses (claiming, completing,
a git step, a merge ...), is the door's to ask (services/queue/door.py, ``planning``).

One function is one write transaction, and every change writes an event: kinds
``plan_entered``, ``plan_advanced``, ``plan_exited`` and ``plan_abandoned``, without an
issue number (a plan is not an issue), ``after`` naming the plan. Issues a launch creates
get their own ``created`` and ``dependency_added`` events.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, bindparam, insert, select, update

from workq.db import dialect
from workq.db.engine import retry_lost_read
from workq.db.tables import issues, plan_issues, plans
from workq.domain import fields
from workq.domain.plan import (
    REQUIRED_SECTIONS,
    PlanPhase,
    assign_agents,
    empty_sections,
    next_phase,
    parse_tasks,
    plan_path,
    render_template,
    require_content,
    validate_goal,
    validate_slug,
)
from workq.errors import (
    Conflict,
    InvalidInput,
    NoActivePlan,
    NotFound,
    PlanEmpty,
    PlanModeActive,
    Step,
    WorkqError,
)
from workq.plan_schemas import (
    Advanced,
    Entered,
    Exited,
    Plan,
    PlanDetail,
    PlanIssue,
    PlanStatus,
    shown,
)
from workq.schemas import PAGE_DEFAULT, PAGE_MAX, Status
from workq.services.handle import Queue, new_id, record
from workq.services.plans import plan_files, swarm

__all__ = [
    "DEFAULT_TEAMMATES",
    "Advanced",
    "Entered",
    "Exited",
    "Plan",
    "PlanDetail",
    "PlanIssue",
    "PlanStatus",
    "abandon",
    "active_plan",
    "advance",
    "enter",
    "exit_plan",
    "list_plans",
    "show",
]

# Contract A's example launches 3 teammates; that is the default when teammateCount is absent.
DEFAULT_TEAMMATES = 3

# --- reading -------------------------------------------------------------------------------

_active_of = select(plans).where(plans.c.active_run.in_(bindparam("runs", expanding=True)))


def _plan(row: Any, **changes: Any) -> Plan:
    values = {
        "id": row.id,
        "slug": row.slug,
        "goal": row.goal,
        "run_id": row.run_id,
        "phase": PlanPhase(row.phase),
        "status": PlanStatus(row.status),
        "path": row.path,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
        "closed_at": row.closed_at,
    }
    values.update(changes)
    return Plan(**values)


def _active_row(conn: Connection, run_id: str) -> Any:
    return conn.execute(_active_of, {"runs": [run_id]}).first()


def _require_active(conn: Connection, run_id: str) -> Any:
    row = _active_row(conn, run_id)
    if row is None:
        raise NoActivePlan(f"Run {run_id} is not in plan mode", run_id=run_id)
    return row


@retry_lost_read
def active_plan(q: Queue, run_id: str) -> Plan | None:
    """The plan ``run_id`` is in, or None."""
    fields.run_id(run_id)
    with q.db.read() as conn:
        row = _active_row(conn, run_id)
    return None if row is None else _plan(row)


def _sections(path: str) -> tuple[bool, list[str] | None]:
    """(whether the file exists, its empty sections or None when unreadable)."""
    try:
        text = plan_files.read(Path(path))
    except WorkqError:
        return True, None
    if text is None:
        return False, None
    try:
        return True, empty_sections(text)
    except WorkqError:
        return True, None


# --- changes -------------------------------------------------------------------------------


def _one_entry_at_a_time(conn: Connection) -> None:
    """Serialise entries into plan mode, so the checks below see every committed plan and
    no losing racer creates a plan file."""
    dialect.lock_plans(conn)


def enter(q: Queue, run_id: str, slug: str, goal: str, plans_dir: Path) -> Entered:
    """Put ``run_id`` in plan mode on ``slug``, at phase Explore, creating the plan file.

    Entering the slug this run is already planning resumes it (nothing changes).

    Raises:
        InvalidInput: a bad slug, goal, run id or plan file path.
        PlanModeActive: the run is planning another slug (named in the error).
        Conflict: another run is planning this slug.
    """
    fields.run_id(run_id)
    name = validate_slug(slug)
    text = render_template(name, goal)
    cleaned = validate_goal(goal)
    plan_path(plans_dir, name)  # refuse a bad target before touching anything
    created = False

    def work(conn: Connection) -> Entered:
        nonlocal created
        _one_entry_at_a_time(conn)
        mine = _active_row(conn, run_id)
        if mine is not None:
            if mine.slug == name:
                return Entered(plan=_plan(mine), created_file=False, resumed=True)
            raise PlanModeActive(
                f"Run {run_id} is already in plan mode: plan {mine.slug}, phase "
                f"{PlanPhase(mine.phase).display} ({shown(mine.path)})",
                hint=(
                    "continue it (",
                    Step.PLAN_PHASE,
                    ") or finish it with ",
                    Step.EXIT_PLAN,
                    " first",
                ),
                slug=mine.slug,
            )
        other = conn.execute(select(plans.c.run_id).where(plans.c.active_slug == name)).first()
        if other is not None:
            raise Conflict(
                f"Plan {name} is being planned by run {other.run_id}",
                hint="choose another slug, or wait until that run exits plan mode",
                slug=name,
                run_id=other.run_id,
            )
        path, made = plan_files.create(plans_dir, name, text)
        created = created or made
        now = q.now()
        plan_id = new_id()
        row = {
            "id": plan_id,
            "run_id": run_id,
            "slug": name,
            "goal": cleaned,
            "phase": PlanPhase.EXPLORE.value,
            "status": PlanStatus.ACTIVE.value,
            "path": str(path),
            "active_run": run_id,
            "active_slug": name,
            "created_at": now,
            "updated_at": now,
            "closed_at": None,
        }
        conn.execute(insert(plans).values(**row))
        record(
            q,
            conn,
            kind="plan_entered",
            issue_id=None,
            number=None,
            actor=run_id,
            now=now,
            after={"plan": plan_id, "slug": name, "phase": "explore", "path": str(path)},
        )
        plan = Plan(
            id=plan_id,
            slug=name,
            goal=cleaned,
            run_id=run_id,
            phase=PlanPhase.EXPLORE,
            status=PlanStatus.ACTIVE,
            path=str(path),
            created_at=now,
            updated_at=now,
        )
        return Entered(plan=plan, created_file=created, resumed=False)

    return q.db.write(work)


def advance(q: Queue, run_id: str) -> Advanced:
    """Move ``run_id``'s plan to its next phase (Explore, Design, Review, Final, Exit).

    Raises:
        NoActivePlan: the run is not in plan mode.
        InvalidTransition: the plan is at Exit already (call exit_plan_mode).
    """
    fields.run_id(run_id)

    def work(conn: Connection) -> tuple[Plan, PlanPhase]:
        row = _require_active(conn, run_id)
        previous = PlanPhase(row.phase)
        following = next_phase(previous)
        now = q.now()
        conn.execute(
            update(plans).where(plans.c.id == row.id).values(phase=following.value, updated_at=now)
        )
        record(
            q,
            conn,
            kind="plan_advanced",
            issue_id=None,
            number=None,
            actor=run_id,
            now=now,
            before={"plan": row.id, "phase": previous.value},
            after={"plan": row.id, "slug": row.slug, "phase": following.value},
        )
        if following is PlanPhase.REVIEW:  # a person reads the plan now: tell who asked
            record(
                q,
                conn,
                kind="plan_waiting",
                issue_id=None,
                number=None,
                actor=run_id,
                now=now,
                after={
                    "plan": row.id,
                    "slug": row.slug,
                    "goal": row.goal,
                    "run_id": run_id,
                    "path": row.path,
                },
            )
        return _plan(row, phase=following, updated_at=now), previous

    plan, previous = q.db.write(work)
    _, empty = _sections(plan.path)
    return Advanced(plan=plan, previous=previous, empty_sections=empty)


def exit_plan(
    q: Queue,
    run_id: str,
    *,
    launch_swarm: bool = False,
    teammate_count: int | None = None,
) -> Exited:
    """Leave plan mode once the plan file is written; with ``launch_swarm``, its open tasks
    become issues spread over ``teammate_count`` agents (default ``DEFAULT_TEAMMATES``).
    ``teammate_count`` is ignored without ``launch_swarm``.

    Raises:
        NoActivePlan: the run is not in plan mode.
        PlanEmpty: the file is missing, a section holds only the template, or (launching)
            there is no open task; ``facts["empty_sections"]`` says which.
        InvalidInput: the task list or ``teammate_count`` is malformed.
    """
    fields.run_id(run_id)
    count = (DEFAULT_TEAMMATES if teammate_count is None else teammate_count) if launch_swarm else 0
    plan = active_plan(q, run_id)
    if plan is None:
        raise NoActivePlan(f"Run {run_id} is not in plan mode", run_id=run_id)
    text = plan_files.read(Path(plan.path))
    if text is None:
        raise PlanEmpty(
            f"The plan file {plan.shown_path} is missing",
            hint=("write it again, then ", Step.EXIT_PLAN),
            empty_sections=list(REQUIRED_SECTIONS),
        )
    empty = require_content(text, render_template(plan.slug, plan.goal), need_tasks=launch_swarm)
    tasks = parse_tasks(text) if launch_swarm else []
    agents = assign_agents(tasks, count) if launch_swarm else []

    def work(conn: Connection) -> Exited:
        row = _require_active(conn, run_id)
        if row.id != plan.id:
            raise Conflict(
                f"Run {run_id} left plan {plan.slug} and entered {row.slug} meanwhile",
                hint=(Step.EXIT_PLAN, " again"),
            )
        now = q.now()
        launched = (
            swarm.launch(
                q,
                conn,
                row,
                tasks,
                agents,
                shown_path=plan.shown_path,
                now=now,
                actor=run_id,
            )
            if launch_swarm
            else []
        )
        _close(conn, row.id, PlanStatus.EXITED, now)
        record(
            q,
            conn,
            kind="plan_exited",
            issue_id=None,
            number=None,
            actor=run_id,
            now=now,
            before={"plan": row.id, "phase": row.phase},
            after={
                "plan": row.id,
                "slug": row.slug,
                "launched": [i.number for i in launched],
                **({"teammates": count} if launch_swarm else {}),
            },
        )
        closed = _plan(row, status=PlanStatus.EXITED, updated_at=now, closed_at=now)
        return Exited(
            plan=closed, launched=launched, teammate_count=count or None, empty_sections=empty
        )

    return q.db.write(work)


def abandon(q: Queue, run_id: str, *, actor: str | None = None) -> Plan:
    """Leave plan mode without checking the plan (an admin's way out); the file stays.

    Raises:
        NoActivePlan: the run is not in plan mode.
    """
    fields.run_id(run_id)

    def work(conn: Connection) -> Plan:
        row = _require_active(conn, run_id)
        now = q.now()
        _close(conn, row.id, PlanStatus.ABANDONED, now)
        record(
            q,
            conn,
            kind="plan_abandoned",
            issue_id=None,
            number=None,
            actor=actor or run_id,
            now=now,
            before={"plan": row.id, "phase": row.phase},
            after={"plan": row.id, "slug": row.slug, "run_id": run_id},
        )
        return _plan(row, status=PlanStatus.ABANDONED, updated_at=now, closed_at=now)

    return q.db.write(work)


def _close(conn: Connection, plan_id: str, status: PlanStatus, now: datetime) -> None:
    conn.execute(
        update(plans)
        .where(plans.c.id == plan_id)
        .values(
            status=status.value,
            active_run=None,
            active_slug=None,
            closed_at=now,
            updated_at=now,
        )
    )


# --- views ---------------------------------------------------------------------------------


@retry_lost_read
def list_plans(
    q: Queue,
    *,
    run_id: str | None = None,
    active_only: bool = False,
    limit: int = PAGE_DEFAULT,
) -> list[Plan]:
    """Plans, newest first."""
    if not 1 <= limit <= PAGE_MAX:
        raise InvalidInput(f"limit must be between 1 and {PAGE_MAX}", field="limit")
    stmt = select(plans).order_by(plans.c.created_at.desc(), plans.c.id).limit(limit)
    if run_id is not None:
        stmt = stmt.where(plans.c.run_id == fields.run_id(run_id))
    if active_only:
        stmt = stmt.where(plans.c.active_run.is_not(None))
    with q.db.read() as conn:
        return [_plan(row) for row in conn.execute(stmt)]


@retry_lost_read
def show(q: Queue, *, run_id: str | None = None, slug: str | None = None) -> PlanDetail:
    """A plan with its file's state and the issues it launched: the newest plan of ``slug``
    (of ``run_id``'s plans, if given too), else the active plan of ``run_id``.

    Raises:
        InvalidInput: neither is given.
        NoActivePlan: only ``run_id`` is given and it is not in plan mode.
        NotFound: no plan ``slug``.
    """
    if run_id is not None:
        fields.run_id(run_id)
    with q.db.read() as conn:
        if slug is not None:
            stmt = select(plans).where(plans.c.slug == validate_slug(slug))
            if run_id is not None:
                stmt = stmt.where(plans.c.run_id == run_id)
            row = conn.execute(stmt.order_by(plans.c.created_at.desc()).limit(1)).first()
            if row is None:
                raise NotFound(
                    f"No plan {slug}" + (f" of run {run_id}" if run_id else ""),
                    hint=("see the plans with ", Step.LIST_PLANS),
                    slug=slug,
                )
        elif run_id is not None:
            row = _require_active(conn, run_id)
        else:
            raise InvalidInput("name a plan slug or a run id", field="slug")
        linked = conn.execute(
            select(plan_issues.c.task, issues)
            .join(issues, issues.c.id == plan_issues.c.issue_id)
            .where(plan_issues.c.plan_id == row.id)
            .order_by(plan_issues.c.task)
        ).all()
        launched = [
            PlanIssue(
                task=r.task,
                number=r.number,
                title=r.title,
                agent=r.agent,
                status=Status(r.status),
                waits_for=swarm.blocker_numbers(conn, r.id),
            )
            for r in linked
        ]
    exists, empty = _sections(row.path)
    return PlanDetail(plan=_plan(row), file_exists=exists, empty_sections=empty, issues=launched)
