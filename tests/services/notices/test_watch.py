"""The watch (services/notices/watch.py): stalls by the progress clock, the stall policy,
lapsed leases, a drained queue; each recorded once, each raising the notice a sink asked
for, on SQLite and PostgreSQL."""

from __future__ import annotations

import json

from sqlalchemy import select

from tests.conftest import FakeClock
from workq.db.tables import events, notices
from workq.domain.authority import Authority
from workq.services.handle import Queue
from workq.services.notices import sinks, watch
from workq.services.queue import claims, notes, policies
from workq.services.queue import issues as issue_service

AGENT = Authority.of({"agent-a"})
OTHER = Authority.of({"agent-b"})


def _sink(q: Queue, events: str) -> None:
    sinks.add(q, f"people-{len(sinks.list_sinks(q))}", command="true", events=events)


def _kinds(q: Queue, number: int | None = None) -> list[str]:
    stmt = select(events.c.kind).order_by(events.c.id)
    if number is not None:
        stmt = stmt.where(events.c.number == number)
    with q.db.read() as conn:
        return list(conn.execute(stmt).scalars())


def _queued(q: Queue) -> list[tuple[str, int | None]]:
    with q.db.read() as conn:
        rows = conn.execute(select(notices.c.event, notices.c.number).order_by(notices.c.id))
        return [(r.event, r.number) for r in rows]


def _claimed(q: Queue, title: str = "work") -> int:
    number = issue_service.create(q, title=title).number
    claims.claim(q, number, AGENT)
    return number


def _wait(q: Queue, clock: FakeClock, seconds: int) -> None:
    """Let ``seconds`` pass while the server keeps renewing the claims (a connected agent)."""
    for _ in range(seconds // 30):
        clock.advance(30)
        claims.renew_leases(q, {"agent-a", "agent-b"})


def test_a_claim_without_progress_stalls_once_and_says_so(queue: Queue, clock: FakeClock) -> None:
    _sink(queue, "stalled")
    policies.settle(queue, "stall_after", "10m")
    number = _claimed(queue)
    _wait(queue, clock, 9 * 60)
    assert watch.sweep(queue).stalled == []
    assert issue_service.get(queue, number).stalled_since is None
    _wait(queue, clock, 2 * 60)

    assert watch.sweep(queue).stalled == [number]
    assert watch.sweep(queue).stalled == []  # told once
    shown = issue_service.get(queue, number)
    assert shown.stalled_since is not None
    assert _kinds(queue, number).count("stalled") == 1
    assert _queued(queue) == [("stalled", number)]
    with queue.db.read() as conn:
        after = conn.execute(select(events.c.after).where(events.c.kind == "stalled")).scalar()
    said = json.loads(str(after))
    assert said["holder"] == "agent-a" and said["for_seconds"] >= 600


def test_progress_resets_the_clock_and_a_new_stall_is_told_again(
    queue: Queue, clock: FakeClock
) -> None:
    policies.settle(queue, "stall_after", "10m")
    number = _claimed(queue)
    _wait(queue, clock, 8 * 60)
    notes.comment(queue, number, "halfway", author="agent-a")
    _wait(queue, clock, 8 * 60)
    assert watch.sweep(queue).stalled == []  # 8 minutes since the note
    _wait(queue, clock, 3 * 60)
    assert watch.sweep(queue).stalled == [number]
    claims.heartbeat(queue, number, AGENT, note="still on it: the parser")
    assert issue_service.get(queue, number).stalled_since is None
    _wait(queue, clock, 11 * 60)
    assert watch.sweep(queue).stalled == [number]
    assert _kinds(queue, number).count("stalled") == 2


def test_a_bare_heartbeat_is_not_progress(queue: Queue, clock: FakeClock) -> None:
    policies.settle(queue, "stall_after", "5m")
    number = _claimed(queue)
    for _ in range(12):
        clock.advance(30)
        claims.heartbeat(queue, number, AGENT)
    assert watch.sweep(queue).stalled == [number]


def test_stalls_off_and_per_repository(queue: Queue, clock: FakeClock) -> None:
    policies.settle(queue, "stall_after", "off")
    number = _claimed(queue)
    _wait(queue, clock, 3 * 3600)
    assert watch.sweep(queue).stalled == []
    policies.unset(queue, "stall_after")
    assert watch.sweep(queue).stalled == [number]  # the default, 45m


def test_release_policy_releases_after_the_grace_and_only_that_claim(
    queue: Queue, clock: FakeClock
) -> None:
    policies.settle(queue, "stall_after", "10m")
    policies.settle(queue, "stall_policy", "release")
    policies.settle(queue, "stall_release_after", "5m")
    number = _claimed(queue)
    _wait(queue, clock, 11 * 60)
    found = watch.sweep(queue)
    assert (found.stalled, found.released) == ([number], [])
    _wait(queue, clock, 5 * 60)
    assert watch.sweep(queue).released == [number]
    issue = issue_service.get(queue, number)
    assert issue.claimed_by is None and issue.status.value == "open"
    kinds = _kinds(queue, number)
    assert kinds[-2:] == ["released", "stall_released"]
    # Another agent claims it: its own clock starts now, not stalled.
    claims.claim(queue, number, OTHER)
    assert watch.sweep(queue).released == []
    assert issue_service.get(queue, number).claimed_by == "agent-b"


def test_a_lapsed_lease_is_recorded_once_per_claim(queue: Queue, clock: FakeClock) -> None:
    number = _claimed(queue)
    clock.advance(61)
    assert watch.sweep(queue).lapsed == [number]
    assert watch.sweep(queue).lapsed == []
    claims.claim(queue, number, OTHER)  # takes it over
    clock.advance(61)
    assert watch.sweep(queue).lapsed == [number]  # the new claim lapsed too: its own event
    assert _kinds(queue, number).count("lease_lapsed") == 2


def test_a_drained_queue_is_told_once_per_draining(queue: Queue, clock: FakeClock) -> None:
    _sink(queue, "drained")
    assert watch.sweep(queue).drained is False  # an empty new queue drained nothing
    number = _claimed(queue)
    assert watch.sweep(queue).drained is False  # claimed
    claims.complete(queue, number, AGENT)
    waiting = issue_service.create(queue, title="blocked by a person").number
    from workq.services.queue import blocking

    blocking.block(queue, waiting, "needs a decision", by=AGENT)
    assert watch.sweep(queue).drained is True  # blocked work is not ready
    assert watch.sweep(queue).drained is False
    claims.complete(queue, _claimed(queue, "more"), AGENT)
    assert watch.sweep(queue).drained is True
    assert [e for e, _ in _queued(queue)] == ["drained", "drained"]


def test_a_sink_takes_only_its_events(queue: Queue, clock: FakeClock) -> None:
    _sink(queue, "blocked")
    policies.settle(queue, "stall_after", "1m")
    number = _claimed(queue)
    _wait(queue, clock, 120)
    watch.sweep(queue)
    assert _queued(queue) == []  # a stall, which this sink does not take
    from workq.services.queue import blocking

    blocking.block(queue, number, "a person must choose", by=AGENT)
    assert _queued(queue) == [("blocked", number)]
