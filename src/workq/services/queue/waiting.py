"""Waiting for work instead of polling: try, and while nothing came of it, sleep until the
queue changes (db/changes.py) or the next lease lapses, then try again, up to a bound.

No transaction or lock is held while asleep. A change between an attempt and the sleep is
never lost: the feed's counter is read before each attempt, and the sleep ends as soon as
the counter has moved past it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from types import TracebackType
from typing import Self, TypeVar

from sqlalchemy import bindparam, func, select

from workq.db.engine import retry_lost_read
from workq.db.tables import events, issues
from workq.errors import InvalidInput
from workq.schemas import Event
from workq.services.handle import Queue
from workq.services.queue import predicates

T = TypeVar("T")

WAIT_MAX = 300
# A lapsing lease is looked for again at least this often (a lease may be renewed or
# shortened by another process without an event).
LEASE_RECHECK_SECONDS = 30.0

_next_lapse = select(func.min(issues.c.lease_expires_at)).where(
    predicates.claim_live(bindparam("now"))
)


def seconds(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= WAIT_MAX:
        raise InvalidInput(f"wait_seconds must be between 0 and {WAIT_MAX}", field="wait_seconds")
    return value


@retry_lost_read
def next_lapse(q: Queue) -> datetime | None:
    """When the next live lease lapses (its issue may then become ready)."""
    with q.db.read() as conn:
        found: datetime | None = conn.execute(_next_lapse, {"now": q.now()}).scalar()
    return found


class Waiter:
    """``with Waiter(q, 60) as w:`` then ``w.run(attempt)``; or drive it step by step
    (``seen = w.mark()``, attempt, ``w.pause()``, ``w.sleep(seen, s)``) from an event loop."""

    def __init__(self, q: Queue, wait_seconds: int, *, every_change: bool = False) -> None:
        """``every_change``: wake for any change (``workq watch``), not only for one that
        may make an issue claimable."""
        self.q = q
        self.every_change = every_change
        self.deadline = time.monotonic() + seconds(wait_seconds)
        self._watch = q.db.changes.watching()
        self._tried = False

    def __enter__(self) -> Self:
        self._watch.__enter__()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._watch.__exit__(kind, error, trace)

    def mark(self) -> int:
        """Read before an attempt: a change after it ends the next sleep at once (one that
        may make an issue claimable, db/changes.py ``work``; any, with ``every_change``)."""
        feed = self.q.db.changes
        return feed.version() if self.every_change else feed.work()

    def remaining(self) -> float:
        """Seconds left of the wait."""
        return max(0.0, self.deadline - time.monotonic())

    def pause(self) -> float:
        """How long to sleep after a fruitless attempt: 0 when the wait is over."""
        if self.remaining() <= 0:
            return 0.0
        return self.pause_until(next_lapse(self.q))

    def pause_until(self, lapse: datetime | None) -> float:
        """``pause``, with when the next live lease lapses already read (None: no live
        lease)."""
        left = self.remaining()
        if left <= 0:
            return 0.0
        pause = min(left, LEASE_RECHECK_SECONDS)
        if lapse is not None:
            # A little past the lapse, so the attempt sees it lapsed.
            pause = min(pause, max(0.0, (lapse - self.q.now()).total_seconds()) + 0.01)
        return pause

    def sleep(self, seen: int, pause: float) -> bool:
        """Sleep up to ``pause`` seconds; True if the queue changed meanwhile."""
        feed = self.q.db.changes
        if self.every_change:
            return feed.wait_past(seen, pause)
        return feed.wait_work_past(seen, pause)

    def try_now(
        self, attempt: Callable[[], T | None], worth_trying: Callable[[], bool] | None = None
    ) -> T | None:
        """``attempt()``, except after the first try when ``worth_trying()`` (a read) says
        nothing is there for it: a change wakes every waiter, and an attempt (a claim) is
        a write, which one new issue then costs each of them."""
        if self._tried and worth_trying is not None and not worth_trying():
            return None
        self._tried = True
        return attempt()

    def run(
        self, attempt: Callable[[], T | None], worth_trying: Callable[[], bool] | None = None
    ) -> T | None:
        """``try_now`` until it finds something or the wait is over."""
        while True:
            seen = self.mark()
            found = self.try_now(attempt, worth_trying)
            if found is not None:
                return found
            pause = self.pause()
            if pause <= 0:
                return None
            self.sleep(seen, pause)


def until_found(
    q: Queue,
    attempt: Callable[[], T | None],
    wait_seconds: int,
    worth_trying: Callable[[], bool] | None = None,
) -> T | None:
    """``attempt()``; while it finds nothing, wait for changes, up to ``wait_seconds``,
    trying again when ``worth_trying()`` (see ``Waiter.run``)."""
    if seconds(wait_seconds) == 0:
        return attempt()
    with Waiter(q, wait_seconds) as waiter:
        return waiter.run(attempt, worth_trying)


@retry_lost_read
def latest_event(q: Queue) -> int:
    with q.db.read() as conn:
        return int(conn.execute(select(func.max(events.c.id))).scalar() or 0)


@retry_lost_read
def events_after(q: Queue, after_id: int, *, limit: int = 100) -> list[Event]:
    """Events of every issue after ``after_id``, oldest first (``workq watch``)."""
    import json

    with q.db.read() as conn:
        rows = conn.execute(
            select(events).where(events.c.id > after_id).order_by(events.c.id).limit(limit)
        )
        return [
            Event(
                id=r.id,
                number=r.number or 0,
                kind=r.kind,
                actor=r.actor,
                before=json.loads(r.before) if r.before else None,
                after=json.loads(r.after) if r.after else None,
                created_at=r.created_at,
            )
            for r in rows
        ]
