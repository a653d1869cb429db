"""Delivering the notice outbox (outbox.py), at least once.

A deliverer takes a due row (pending, its time come, held by nobody live) by a
compare-and-set that names it the holder until a lease ends, so deliverers in several
processes on one database never send one row at the same time; a killed deliverer's row is
taken again once its lease lapses (at once, when its process is seen gone on this host).
It sends outside any transaction, then marks the row delivered, only if it still holds it;
or, on a failure, counts the attempt and sets the next one after a backoff. After
``MAX_ATTEMPTS``, or at once when trying again cannot help (a 4xx answer), the row is marked
failed with the last error: the board and ``workq notify deliveries`` show it.

A row may be sent twice (a deliverer killed after the receiver took it, before it marked
it): its ``delivery_id`` is the same each time, so a receiver that drops repeats by it sees
each notice once.

Each pass sends to different sinks side by side, one row at a time per sink, and stops
sending to a sink for the rest of the pass at its first failure: a receiver that hangs
delays its own notices by its timeout, nobody else's. Nothing here runs inside a claim or a
completion: the outbox row was written in the event's transaction, and delivery reads it
later.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel
from sqlalchemy import Connection, and_, func, or_, select, update

from workq.db.tables import notices, notify_sinks
from workq.domain import backoff, leases
from workq.services.handle import Queue
from workq.services.notices import payload, senders, sinks
from workq.services.notices.outbox import DELIVERED, FAILED, PENDING
from workq.services.queue import processes

log = logging.getLogger("workq.notices")

MAX_ATTEMPTS = 8
# Longer than any one send (a webhook's 5 s, a command's 30 s): a live holder's lease does
# not lapse under it.
LEASE_SECONDS = 120.0
BACKOFF_BASE = 15.0  # seconds after the first failure, doubled for each one after
BACKOFF_CAP = 3600.0
RETRY_AFTER_CAP = 3600.0
SINKS_AT_ONCE = 4


class DeliveryReport(BaseModel):
    """One pass: how many rows it took, and how each ended."""

    taken: int = 0
    delivered: int = 0
    retrying: int = 0
    failed: int = 0
    lost: int = 0  # its lease lapsed and another deliverer took it meanwhile


class Delivery(BaseModel):
    """A notice of the outbox and how its delivery stands."""

    id: int
    delivery_id: str
    sink: str
    event: str
    number: int | None
    state: str
    attempts: int
    next_attempt_at: datetime | None  # while pending
    last_error: str | None
    created_at: datetime
    delivered_at: datetime | None
    holder: str | None


class DeliveryCounts(BaseModel):
    pending: int = 0
    delivered: int = 0
    failed: int = 0


class TestResult(BaseModel):
    """A test notice sent to one sink, outside the outbox."""

    __test__ = False  # not a pytest test class

    sink: str
    ok: bool
    status: int | None
    seconds: float
    error: str | None


class _Due(BaseModel):
    id: int
    sink_id: str
    holder: str | None
    lease_until: datetime | None
    attempts: int


def deliver_due(q: Queue, holder: str, *, limit: int = 50) -> DeliveryReport:
    """One pass: deliver up to ``limit`` due notices as ``holder`` (a process name,
    ``services/queue/processes.this_process()``)."""
    by_sink: dict[str, list[_Due]] = {}
    for row in _due(q, holder, limit):
        by_sink.setdefault(row.sink_id, []).append(row)
    report = DeliveryReport()
    if not by_sink:
        return report
    if len(by_sink) == 1:
        ends = [_send_all(q, holder, rows) for rows in by_sink.values()]
    else:
        with ThreadPoolExecutor(
            max_workers=min(SINKS_AT_ONCE, len(by_sink)), thread_name_prefix="workq-notice"
        ) as pool:
            ends = list(pool.map(lambda rows: _send_all(q, holder, rows), by_sink.values()))
    for end in (e for sink_ends in ends for e in sink_ends):
        report.taken += 1
        setattr(report, end, getattr(report, end) + 1)
    return report


def run(q: Queue, stop: threading.Event, holder: str, interval: float = 2.0) -> None:
    """Deliver until ``stop`` is set, a pass every ``interval`` seconds (at once again after
    a full one). A receiver's fault or the database's is logged, never raised."""
    limit = 50
    while not stop.is_set():
        report = None
        try:
            report = deliver_due(q, holder, limit=limit)
        except Exception:
            log.exception("delivering notices failed; trying again in %g s", interval)
        if report is not None and report.taken >= limit:
            continue
        stop.wait(interval)


def send_test(q: Queue, name: str) -> TestResult:
    """Send a made-up notice to sink ``name`` now, outside the outbox (NotFound: no such
    sink)."""
    sink = sinks.by_name(q, name)
    outcome = senders.send(sink, payload.made_up(sink.name, q.now()))
    return TestResult(
        sink=sink.name,
        ok=outcome.ok,
        status=outcome.status,
        seconds=round(outcome.seconds, 3),
        error=outcome.error,
    )


def recent(q: Queue, limit: int = 20, *, state: str | None = None) -> list[Delivery]:
    """The newest notices (of ``state`` if given), newest first."""
    n, s = notices.c, notify_sinks.c
    stmt = (
        select(
            n.id,
            n.delivery_id,
            s.name.label("sink"),
            n.event,
            n.number,
            n.state,
            n.attempts,
            n.next_attempt_at,
            n.last_error,
            n.created_at,
            n.delivered_at,
            n.holder,
        )
        .join(notify_sinks, notify_sinks.c.id == n.sink_id)
        .order_by(n.id.desc())
        .limit(limit)
    )
    if state is not None:
        stmt = stmt.where(n.state == state)
    with q.db.read() as conn:
        rows = conn.execute(stmt).all()
    return [
        Delivery.model_validate(
            {
                **r._mapping,
                "next_attempt_at": r.next_attempt_at if r.state == PENDING else None,
            }
        )
        for r in rows
    ]


def counts(q: Queue) -> DeliveryCounts:
    """How many notices are pending, delivered and failed."""
    with q.db.read() as conn:
        rows = conn.execute(select(notices.c.state, func.count()).group_by(notices.c.state)).all()
    found = {str(state): int(count) for state, count in rows}
    return DeliveryCounts(
        pending=found.get(PENDING, 0),
        delivered=found.get(DELIVERED, 0),
        failed=found.get(FAILED, 0),
    )


# A pass.


def _due(q: Queue, holder: str, limit: int) -> list[_Due]:
    """Due rows a deliverer may take now, the longest waiting first: nobody holds them, or
    the lease lapsed, or another holder's process is gone."""
    now = q.now()
    n = notices.c
    stmt = (
        select(n.id, n.sink_id, n.holder, n.lease_until, n.attempts)
        .where(
            n.state == PENDING,
            n.next_attempt_at <= now,
            or_(n.lease_until.is_(None), n.lease_until <= now, n.holder != holder),
        )
        .order_by(n.next_attempt_at, n.id)
        .limit(limit)
    )
    with q.db.read() as conn:
        rows = [_Due.model_validate(dict(r._mapping)) for r in conn.execute(stmt)]
    return [r for r in rows if leases.takeable(r.holder, r.lease_until, now, processes.gone)]


def _send_all(q: Queue, holder: str, rows: Iterable[_Due]) -> list[str]:
    """Deliver one sink's rows in turn, up to its first failure; how each taken one ended."""
    ends: list[str] = []
    for row in rows:
        end = _deliver(q, holder, row)
        if end is None:
            continue  # another deliverer had it
        ends.append(end)
        if end in ("retrying", "failed"):
            break
    return ends


def _deliver(q: Queue, holder: str, row: _Due) -> str | None:
    until = _take(q, holder, row)
    if until is None:
        return None
    try:
        sink, body = _prepare(q, row.id)
        if sink is None:
            return _settle(q, holder, row.id, until, senders.Outcome(False, "the sink is gone"))
        outcome = senders.send(sink, body)
    except Exception as exc:  # a fault of ours: count it as a failed attempt, keep going
        log.exception("notice %s: could not be sent", row.id)
        outcome = senders.Outcome(False, f"workq could not send it: {type(exc).__name__}")
    return _settle(q, holder, row.id, until, outcome)


def _take(q: Queue, holder: str, row: _Due) -> datetime | None:
    """Hold ``row`` as it was read (compare-and-set); the lease's end, or None if another
    deliverer took it, or it was delivered, meanwhile."""
    n = notices.c

    def write(conn: Connection) -> datetime | None:
        now = q.now()
        until = leases.until(now, LEASE_SECONDS)
        same_holder = n.holder.is_(None) if row.holder is None else n.holder == row.holder
        same_lease = (
            n.lease_until.is_(None) if row.lease_until is None else n.lease_until == row.lease_until
        )
        taken = conn.execute(
            update(notices)
            .where(
                n.id == row.id,
                n.state == PENDING,
                n.attempts == row.attempts,
                n.next_attempt_at <= now,
                and_(same_holder, same_lease),
            )
            .values(holder=holder, lease_until=until)
        ).rowcount
        return until if taken == 1 else None

    return q.db.write(write)


def _prepare(q: Queue, notice_id: int) -> tuple[sinks.Sink | None, dict[str, Any]]:
    """The sink of a notice and the body it gets, read now."""
    with q.db.read() as conn:
        row = conn.execute(select(notices).where(notices.c.id == notice_id)).one()
        sink = sinks.stored(conn, row.sink_id)
        raised, issue = payload.read(conn, row.event_id, row.number)
    body = payload.compose(
        delivery_id=row.delivery_id,
        notice=row.event,
        number=row.number,
        raised=raised,
        issue=issue,
    )
    return sink, body


def _settle(
    q: Queue, holder: str, notice_id: int, until: datetime, outcome: senders.Outcome
) -> str:
    """Mark the attempt, if ``holder`` still holds the row under the lease it took; how it
    ended (a name of a :class:`DeliveryReport` count)."""
    n = notices.c

    def write(conn: Connection) -> str:
        now = q.now()
        row = conn.execute(
            select(n.attempts, n.delivery_id).where(
                n.id == notice_id,
                n.state == PENDING,
                n.holder == holder,
                n.lease_until == until,
            )
        ).first()
        if row is None:
            return "lost"
        attempts = row.attempts + 1
        values: dict[str, Any] = {"attempts": attempts, "holder": None, "lease_until": None}
        if outcome.ok:
            values.update(state=DELIVERED, delivered_at=now, last_error=None)
            end = "delivered"
        elif outcome.permanent or attempts >= MAX_ATTEMPTS:
            values.update(state=FAILED, last_error=outcome.error)
            end = "failed"
        else:
            values.update(next_attempt_at=_next_attempt(now, attempts, outcome))
            values.update(last_error=outcome.error)
            end = "retrying"
        conn.execute(update(notices).where(n.id == notice_id).values(**values))
        if outcome.ok:
            log.info("notice %s delivered (attempt %d)", row.delivery_id, attempts)
        else:
            log.warning("notice %s, attempt %d: %s", row.delivery_id, attempts, outcome.error)
        return end

    return q.db.write(write)


def _next_attempt(now: datetime, attempts: int, outcome: senders.Outcome) -> datetime:
    wait = backoff.delay(attempts - 1, BACKOFF_BASE, BACKOFF_CAP)
    if outcome.retry_after is not None:
        wait = max(wait, min(outcome.retry_after, RETRY_AFTER_CAP))
    return now + timedelta(seconds=wait)
