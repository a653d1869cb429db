"""The GitHub mirror's state at a glance (``workq sync status``): the outbox's counts, the
rows that failed most recently, the mirror's last push, import and error, and its worker."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel
from sqlalchemy import and_, func, or_, select

from workq.db.tables import github_links, github_mirror, github_outbox
from workq.services.handle import Queue
from workq.services.sync.outbox_rows import DEAD, PENDING


class RowProblem(BaseModel):
    number: int
    state: str
    uncertain: bool
    attempts: int
    next_attempt_at: datetime
    last_error: str | None


class SyncStatus(BaseModel):
    repo: str | None
    pending: int
    due_now: int
    uncertain: int
    dead: int
    linked: int
    next_attempt_at: datetime | None
    last_push_at: datetime | None
    last_import_at: datetime | None
    last_error: str | None
    worker: str | None
    worker_expires_at: datetime | None
    problems: list[RowProblem]


def status(q: Queue, *, problems: int = 10) -> SyncStatus:
    """Counts of pending, uncertain and dead rows, and the rows that failed most recently."""
    now = q.now()
    o = github_outbox
    with q.db.read() as conn:
        m = conn.execute(select(github_mirror)).first()
        counts = conn.execute(
            select(
                func.count().filter(o.c.state == PENDING),
                func.count().filter(and_(o.c.state == PENDING, o.c.next_attempt_at <= now)),
                func.count().filter(o.c.create_started_at.is_not(None)),
                func.count().filter(o.c.state == DEAD),
                func.min(o.c.next_attempt_at).filter(o.c.state == PENDING),
            )
        ).one()
        linked = conn.execute(select(func.count()).select_from(github_links)).scalar_one()
        failing = conn.execute(
            select(o)
            .where(
                or_(
                    o.c.last_error.is_not(None),
                    o.c.state == DEAD,
                    o.c.create_started_at.is_not(None),
                )
            )
            .order_by(o.c.state, o.c.next_attempt_at)
            .limit(problems)
        )
        listed = [
            RowProblem(
                number=r.number,
                state=r.state,
                uncertain=r.create_started_at is not None,
                attempts=r.attempts,
                next_attempt_at=r.next_attempt_at,
                last_error=r.last_error,
            )
            for r in failing
        ]
    next_at = counts[4]
    return SyncStatus(
        repo=m.repo if m else None,
        pending=counts[0],
        due_now=counts[1],
        uncertain=counts[2],
        dead=counts[3],
        linked=int(linked),
        next_attempt_at=next_at if isinstance(next_at, datetime) else None,
        last_push_at=m.last_push_at if m else None,
        last_import_at=m.last_import_at if m else None,
        last_error=m.last_error if m else None,
        worker=m.worker if m else None,
        worker_expires_at=m.worker_expires_at if m else None,
        problems=listed,
    )
