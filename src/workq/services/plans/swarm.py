"""``launchSwarm``: a plan's open tasks become queue issues, inside the transaction that
exits plan mode.

Each task becomes one issue (type task, priority medium) for the agent ``assign_agents``
dealt it, labelled ``plan:<slug>`` when that fits in a label, and linked to the plan in
``plan_issues``. A task that waits for earlier tasks waits for their issues: the
dependencies are real queue dependencies, so ``issue_ready`` hands the tasks out in the
plan's order.

Launching the same slug again (a plan re-entered and revised) does not duplicate work: a
task whose title matches an issue an earlier plan of that slug launched reuses that issue,
as it is (its own dependencies are left alone); new tasks may wait for it. New issues only
ever wait for earlier tasks, so no cycle can form.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, insert, select

from workq.db.tables import dependencies as deps
from workq.db.tables import issues, plan_issues, plans
from workq.domain import fields
from workq.domain.plan import PlanTask
from workq.plan_schemas import PlanIssue
from workq.schemas import LABEL_MAX, IssueType, Priority, Status
from workq.services.handle import Queue
from workq.services.queue import dependencies
from workq.services.queue.issues import insert_issue

__all__ = ["PlanIssue", "blocker_numbers", "launch", "plan_label"]


def plan_label(slug: str) -> str | None:
    """``plan:<slug>``, or None when the slug is too long for a label."""
    label = f"plan:{slug}"
    return label if len(label) <= LABEL_MAX else None


def _launched_before(conn: Connection, slug: str) -> dict[str, Any]:
    """Issues earlier plans of ``slug`` launched, by title (the newest wins)."""
    rows = conn.execute(
        select(issues.c.id, issues.c.number, issues.c.title, issues.c.agent, issues.c.status)
        .join(plan_issues, plan_issues.c.issue_id == issues.c.id)
        .join(plans, plans.c.id == plan_issues.c.plan_id)
        .where(plans.c.slug == slug)
        .order_by(plans.c.created_at, issues.c.number)
    )
    return {row.title: row for row in rows}


def blocker_numbers(conn: Connection, issue_id: str) -> list[int]:
    """The numbers of the issues ``issue_id`` waits for."""
    blocker = issues.alias("blocker")
    return list(
        conn.execute(
            select(blocker.c.number)
            .join(deps, deps.c.blocker_id == blocker.c.id)
            .where(deps.c.blocked_id == issue_id)
            .order_by(blocker.c.number)
        ).scalars()
    )


def _description(slug: str, goal: str, shown_path: str, task: PlanTask) -> str:
    quoted = "\n".join(f"> {line}" if line else ">" for line in goal.split("\n"))
    return (
        f"Task {task.index} of plan `{slug}` ({shown_path}).\n\n"
        f"Goal of the plan:\n\n{quoted}\n\n"
        "Read the plan file for the findings, the approach and the risks before you start.\n"
    )


def launch(
    q: Queue,
    conn: Connection,
    plan: Any,
    tasks: Sequence[PlanTask],
    agents: Sequence[str],
    *,
    shown_path: str,
    now: datetime,
    actor: str,
) -> list[PlanIssue]:
    """Create (or reuse) the issues of ``tasks`` for ``plan`` (a ``plans`` row), in the
    caller's transaction, with an event for every issue and every dependency."""
    assert len(tasks) == len(agents)
    earlier = _launched_before(conn, plan.slug)
    label = plan_label(plan.slug)
    made: dict[int, tuple[str, int, str]] = {}  # task -> (issue id, number, status)
    result: list[PlanIssue] = []
    for task, agent in zip(tasks, agents, strict=True):
        blockers = [made[d] for d in task.depends_on if d in made]
        found = earlier.get(task.title)
        if found is not None:
            issue_id, number, status = found.id, found.number, found.status
            agent = found.agent
        else:
            issue_id, number = insert_issue(
                q,
                conn,
                title=fields.title(task.title),
                description=_description(plan.slug, plan.goal, shown_path, task),
                priority=Priority.MEDIUM,
                issue_type=IssueType.TASK,
                agent=fields.agent(agent),
                labels=[label] if label else [],
                actor=actor,
                now=now,
                touches=task.touches,
                about={"plan": plan.slug, "task": task.index},
            )
            status = Status.OPEN.value
            for blocker_id, blocker_number, blocker_status in blockers:
                dependencies.add_edge(
                    q,
                    conn,
                    blocker_id=blocker_id,
                    blocker_status=blocker_status,
                    blocked_id=issue_id,
                    now=now,
                    actor=actor,
                    numbers=(blocker_number, number),
                )
        conn.execute(
            insert(plan_issues).values(plan_id=plan.id, task=task.index, issue_id=issue_id)
        )
        made[task.index] = (issue_id, number, status)
        result.append(
            PlanIssue(
                task=task.index,
                number=number,
                title=task.title,
                agent=agent,
                status=Status(status),
                waits_for=(
                    blocker_numbers(conn, issue_id)
                    if found is not None
                    else [n for _, n, _ in blockers]
                ),
                reused=found is not None,
            )
        )
    return result
