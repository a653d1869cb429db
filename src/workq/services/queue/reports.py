"""Read-only views for people and planners: the backlog with scores, and queue statistics."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from sqlalchemy import and_, func, select

from workq.db.engine import retry_lost_read
from workq.db.tables import issues
from workq.domain import readiness
from workq.errors import InvalidInput
from workq.schemas import Backlog, BacklogItem, IssueType, Priority, Stats, Status
from workq.services.handle import Queue
from workq.services.queue import predicates

# The score orders exactly as ready does (priority first, then age): the age bonus is
# capped below the gap between two priorities, so an old low-priority issue never
# overtakes a new high one, but it is visibly "older" in the score.
PRIORITY_BASE = {
    Priority.URGENT: 100.0,
    Priority.HIGH: 75.0,
    Priority.MEDIUM: 50.0,
    Priority.LOW: 25.0,
}
AGE_BONUS_PER_DAY = 1.0
AGE_BONUS_MAX = 20.0
BACKLOG_MAX = 100


def priority_score(priority: Priority, age_days: float) -> float:
    return PRIORITY_BASE[priority] + min(age_days * AGE_BONUS_PER_DAY, AGE_BONUS_MAX)


@retry_lost_read
def backlog(
    q: Queue,
    *,
    include_types: Sequence[IssueType] | None = None,
    exclude_types: Sequence[IssueType] | None = None,
    limit: int = 20,
) -> Backlog:
    """Issues not done, highest score first, with who holds them."""
    if not 1 <= limit <= BACKLOG_MAX:
        raise InvalidInput(f"limit must be between 1 and {BACKLOG_MAX}", field="limit")
    where = [issues.c.status != Status.DONE.value]
    if include_types:
        where.append(issues.c.issue_type.in_([t.value for t in include_types]))
    if exclude_types:
        where.append(issues.c.issue_type.not_in([t.value for t in exclude_types]))
    now = q.now()
    with q.db.read() as conn:
        total = conn.execute(select(func.count()).select_from(issues).where(*where)).scalar_one()
        rows = conn.execute(
            select(issues)
            .where(*where)
            .order_by(issues.c.priority, issues.c.created_at, issues.c.number)
            .limit(limit)
        ).all()
    items = []
    for r in rows:
        priority = Priority.from_rank(r.priority)
        age = max((now - r.created_at).total_seconds() / 86400, 0.0)
        locked = readiness.claim_live(r, now)
        items.append(
            BacklogItem(
                number=r.number,
                title=r.title,
                priority=priority,
                issue_type=IssueType(r.issue_type),
                priority_score=round(priority_score(priority, age), 2),
                age_in_days=round(age, 2),
                is_locked=locked,
                locked_by=r.claimed_by if locked else None,
                is_blocked=bool(r.is_blocked) or r.open_blockers > 0,
            )
        )
    return Backlog(backlog=items, total=total)


@retry_lost_read
def stats(q: Queue) -> Stats:
    now = q.now()
    unblocked = predicates.unblocked
    with q.db.read() as conn:
        by_status: dict[str, int] = dict(
            conn.execute(select(issues.c.status, func.count()).group_by(issues.c.status)).all()
        )
        by_priority: dict[int, int] = dict(
            conn.execute(
                select(issues.c.priority, func.count())
                .where(issues.c.status != Status.DONE.value)
                .group_by(issues.c.priority)
            ).all()
        )
        ready = conn.execute(
            select(func.count()).select_from(issues).where(predicates.ready(now))
        ).scalar_one()
        blocked = conn.execute(
            select(func.count())
            .select_from(issues)
            .where(issues.c.status != Status.DONE.value, ~unblocked)
        ).scalar_one()
        stale = conn.execute(
            select(func.count()).select_from(issues).where(predicates.claim_lapsed(now))
        ).scalar_one()
    return Stats(
        total=sum(by_status.values()),
        by_status={s.value: by_status.get(s.value, 0) for s in Status},
        by_priority={p.value: by_priority.get(p.rank, 0) for p in Priority},
        ready=ready,
        blocked=blocked,
        claimed=by_status.get(Status.IN_PROGRESS.value, 0),
        stale_claims=stale,
    )


class Availability(NamedTuple):
    """Why nothing was ready: the issues not done, those the filter keeps, and of those how
    many are locked (a live claim) and how many blocked."""

    total: int
    matching: int
    locked: int
    blocked: int


@retry_lost_read
def availability(
    q: Queue,
    *,
    include_types: Sequence[IssueType] | None = None,
    exclude_types: Sequence[IssueType] | None = None,
) -> Availability:
    not_done = issues.c.status != Status.DONE.value
    where = [not_done]
    if include_types:
        where.append(issues.c.issue_type.in_([t.value for t in include_types]))
    if exclude_types:
        where.append(issues.c.issue_type.not_in([t.value for t in exclude_types]))
    now = q.now()
    locked = predicates.claim_live(now)
    blocked = ~predicates.unblocked
    with q.db.read() as conn:
        total = conn.execute(select(func.count()).select_from(issues).where(not_done))
        row = conn.execute(
            select(
                func.count(),
                func.count().filter(locked),
                func.count().filter(and_(blocked, ~locked)),
            )
            .select_from(issues)
            .where(*where)
        ).one()
        return Availability(total.scalar_one(), row[0], row[1], row[2])
