"""The GitHub mirror's outbox rows: one per issue GitHub has not seen in its latest state,
their states, and what the sync worker does with them (the due ones, a create in doubt, a
push done, a retry, a row parked as dead, revived).

The rows are fed by :mod:`workq.services.sync.outbox`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel
from sqlalchemy import Connection, delete, func, insert, literal, or_, select, update

from workq.db.tables import github_links, github_outbox, issues
from workq.services.handle import Queue

PENDING = "pending"
DEAD = "dead"


# The outbox columns a :func:`feed` SELECT fills, in its order.
FED_COLUMNS = [
    "issue_id",
    "number",
    "kind",
    "version",
    "state",
    "attempts",
    "next_attempt_at",
    "changed_at",
]


class OutboxItem(BaseModel):
    issue_id: str
    number: int
    kind: str
    version: int
    state: str
    attempts: int
    next_attempt_at: datetime
    changed_at: datetime
    create_started_at: datetime | None
    last_error: str | None

    @property
    def uncertain(self) -> bool:
        """A create was sent and its outcome is unknown."""
        return self.create_started_at is not None


def _item(row: Any) -> OutboxItem:
    return OutboxItem.model_validate(dict(row._mapping))


def due(q: Queue, *, limit: int = 100) -> list[OutboxItem]:
    """Pending rows whose time has come, oldest wait first."""
    now = q.now()
    with q.db.read() as conn:
        rows = conn.execute(
            select(github_outbox)
            .where(github_outbox.c.state == PENDING, github_outbox.c.next_attempt_at <= now)
            .order_by(github_outbox.c.next_attempt_at, github_outbox.c.number)
            .limit(limit)
        )
        return [_item(r) for r in rows]


def next_due_at(q: Queue) -> datetime | None:
    """When the earliest pending row becomes due (None: nothing pending)."""
    with q.db.read() as conn:
        value = conn.execute(
            select(func.min(github_outbox.c.next_attempt_at)).where(
                github_outbox.c.state == PENDING
            )
        ).scalar()
    return value if isinstance(value, datetime) else None


def get(q: Queue, issue_id: str) -> OutboxItem | None:
    with q.db.read() as conn:
        row = conn.execute(
            select(github_outbox).where(github_outbox.c.issue_id == issue_id)
        ).first()
    return _item(row) if row else None


def _set(q: Queue, issue_id: str, values: Mapping[str, Any]) -> None:
    def work(conn: Connection) -> None:
        conn.execute(
            update(github_outbox).where(github_outbox.c.issue_id == issue_id).values(**values)
        )

    q.db.write(work)


def create_started(q: Queue, issue_id: str) -> None:
    """Durably note that a create is about to be sent (before sending it)."""
    _set(q, issue_id, {"create_started_at": q.now()})


def create_settled(q: Queue, issue_id: str) -> None:
    """The create's outcome is known (done, found, or certainly not applied)."""
    _set(q, issue_id, {"create_started_at": None})


def finish(q: Queue, item: OutboxItem) -> bool:
    """The state read at ``item.version`` is on GitHub. Deletes the row unless it changed
    meanwhile (then it stays pending, due now). True if the row is gone."""

    def work(conn: Connection) -> bool:
        gone = conn.execute(
            delete(github_outbox).where(
                github_outbox.c.issue_id == item.issue_id,
                github_outbox.c.version == item.version,
            )
        ).rowcount
        if not gone:
            conn.execute(
                update(github_outbox)
                .where(github_outbox.c.issue_id == item.issue_id)
                .values(attempts=0, last_error=None, create_started_at=None)
            )
        return bool(gone)

    return q.db.write(work)


def reschedule(
    q: Queue,
    issue_id: str,
    at: datetime,
    error: str,
    *,
    count_attempt: bool,
    max_attempts: int,
) -> OutboxItem | None:
    """Try the row again at ``at``. A counted failure that reaches ``max_attempts`` parks
    the row as dead (a later change of the issue revives it)."""

    def work(conn: Connection) -> OutboxItem | None:
        row = conn.execute(
            select(github_outbox).where(github_outbox.c.issue_id == issue_id)
        ).first()
        if row is None:
            return None
        attempts = row.attempts + (1 if count_attempt else 0)
        state = DEAD if count_attempt and attempts >= max_attempts else PENDING
        conn.execute(
            update(github_outbox)
            .where(github_outbox.c.issue_id == issue_id)
            .values(attempts=attempts, state=state, next_attempt_at=at, last_error=error[:2000])
        )
        found = conn.execute(
            select(github_outbox).where(github_outbox.c.issue_id == issue_id)
        ).one()
        return _item(found)

    return q.db.write(work)


def park(q: Queue, issue_id: str, error: str) -> None:
    """Park the row as dead now: retrying it unchanged cannot succeed."""
    _set(q, issue_id, {"state": DEAD, "last_error": error[:2000]})


def revive(q: Queue, *, waiting: bool = False) -> int:
    """Put every dead row back in the queue, due now; with ``waiting``, also make the rows
    that wait for a retry due now (after an outage is over)."""

    def work(conn: Connection) -> int:
        now = q.now()
        chosen = github_outbox.c.state == DEAD
        if waiting:
            chosen = or_(chosen, github_outbox.c.next_attempt_at > now)
        return int(
            conn.execute(
                update(github_outbox)
                .where(chosen)
                .values(state=PENDING, attempts=0, next_attempt_at=now)
            ).rowcount
            or 0
        )

    return q.db.write(work)


def queue_unlinked(conn: Connection, now: datetime) -> int:
    """Queue every issue without a link that has no outbox row (a first push)."""
    unlinked = (
        select(
            issues.c.id,
            issues.c.number,
            literal("initial"),
            literal(1),
            literal(PENDING),
            literal(0),
            issues.c.created_at,
            issues.c.created_at,
        )
        .where(
            ~select(github_links.c.issue_id).where(github_links.c.issue_id == issues.c.id).exists()
        )
        .where(
            ~select(github_outbox.c.issue_id)
            .where(github_outbox.c.issue_id == issues.c.id)
            .exists()
        )
    )
    stmt = (
        insert(github_outbox)
        .from_select(
            FED_COLUMNS,
            unlinked,
        )
        .returning(github_outbox.c.issue_id)
    )
    return len(conn.execute(stmt).all())
