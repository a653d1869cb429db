"""The notice outbox: a row per sink for every audit event that raises a notice, written in
the event's own transaction (a ``Queue.on_event`` hook), so a notice is queued exactly when
its event is recorded. Delivery reads the rows later (delivery.py); the event's row says
what happened, so a row holds only where it goes and how its delivery stands."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import Connection, func, select

from workq.db.tables import events, notices, notify_sinks
from workq.domain.notices import BY_KIND
from workq.services.handle import Queue

PENDING = "pending"
DELIVERED = "delivered"
FAILED = "failed"


def subscribed(conn: Connection, notice: str) -> list[str]:
    """The ids of the sinks that take notice ``notice``."""
    wrapped = "," + notify_sinks.c.events + ","
    return list(
        conn.execute(
            select(notify_sinks.c.id)
            .where(wrapped.like(f"%,{notice},%"))
            .order_by(notify_sinks.c.name)
        ).scalars()
    )


def queue_notices(conn: Connection, kind: str, number: int | None, now: datetime) -> int:
    """Queue the notice event ``kind`` raises (the newest such event of issue ``number``,
    or of the queue when None: the one this transaction just wrote) for every sink that takes
    it; how many rows were written."""
    notice = BY_KIND.get(kind)
    if notice is None:
        return 0
    sinks = subscribed(conn, notice)
    if not sinks:
        return 0
    where = events.c.number.is_(None) if number is None else events.c.number == number
    event_id = conn.execute(
        select(func.max(events.c.id)).where(events.c.kind == kind, where)
    ).scalar_one()
    conn.execute(
        notices.insert(),
        [
            {
                "sink_id": sink,
                "event_id": event_id,
                "event": notice,
                "number": number,
                "delivery_id": str(uuid.uuid4()),
                "state": PENDING,
                "attempts": 0,
                "next_attempt_at": now,
                "created_at": now,
            }
            for sink in sinks
        ],
    )
    return len(sinks)


def install(q: Queue) -> None:
    """Queue notices on ``q``'s events of the kinds that raise one (once)."""

    def follow(conn: Connection, kind: str, number: int | None) -> None:
        queue_notices(conn, kind, number, q.now())

    for kind in BY_KIND:
        hooks = q.on_event.setdefault(kind, [])
        if not any(getattr(h, "__qualname__", "") == follow.__qualname__ for h in hooks):
            hooks.append(follow)
