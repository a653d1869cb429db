"""claim_next writes what every mutation writes, on both engines: the claim, its event (as
``record`` words it) and the outbox row, in the claim's own transaction."""

from __future__ import annotations

import json

from sqlalchemy import select

from tests.conftest import FakeClock
from workq.db.tables import events
from workq.domain.authority import Authority
from workq.schemas import ReadyFilter
from workq.services.handle import Queue
from workq.services.queue import claims, issues, notes
from workq.services.sync import mirror_target, outbox, outbox_rows


def _raw_events(queue: Queue, number: int) -> list[tuple[str, str | None, str | None]]:
    with queue.db.read() as conn:
        rows = conn.execute(
            select(events.c.kind, events.c.before, events.c.after)
            .where(events.c.number == number)
            .order_by(events.c.id)
        )
        return [(r.kind, r.before, r.after) for r in rows]


def test_claim_and_takeover_events_are_written_as_record_writes_them(
    queue: Queue, clock: FakeClock
) -> None:
    issues.create(queue, title="one")
    first = claims.claim_next(queue, Authority.of({"run-a"}))
    assert first is not None and first.previous_holder is None
    clock.advance(queue.lease_seconds + 1)
    taken = claims.claim_next(queue, Authority.of({"run-b"}))
    assert taken is not None and taken.number == 1 and taken.previous_holder == "run-a"
    assert taken.claimed_at == clock.now
    assert taken.lease_expires_at == queue.lease_until(clock.now)
    kinds = [(e.kind, e.actor) for e in notes.history(queue, 1)]
    assert kinds == [("created", None), ("claimed", "run-a"), ("claim_takeover", "run-b")]
    _, before, after = _raw_events(queue, 1)[-1]
    assert before == json.dumps({"claimed_by": "run-a", "status": "in_progress"}, sort_keys=True)
    until = queue.lease_until(clock.now).isoformat()
    assert after == json.dumps({"claimed_by": "run-b", "lease_expires_at": until}, sort_keys=True)


def test_claim_next_feeds_the_outbox_when_a_mirror_is_configured(queue: Queue) -> None:
    outbox.install(queue)
    made = issues.create(queue, title="one")
    assert outbox_rows.get(queue, made.id) is None  # no mirror yet: nothing queued
    mirror_target.configure(queue, "acme/widgets")
    created = outbox_rows.get(queue, made.id)
    assert created is not None
    got = claims.claim_next(queue, Authority.of({"run-a"}))
    assert got is not None and got.number == made.number
    queued = outbox_rows.get(queue, made.id)
    assert queued is not None
    assert (queued.kind, queued.version, queued.state) == (
        "claimed",
        created.version + 1,
        "pending",
    )


def test_claim_next_filters_by_type_agent_and_label(queue: Queue) -> None:
    issues.create(queue, title="bug", issue_type="bug", labels=["ui"])
    issues.create(queue, title="task", issue_type="task", agent="other")
    issues.create(queue, title="feature", issue_type="feature", labels=["ui", "db"])
    wanted = ReadyFilter.model_validate({"exclude_types": ["bug"], "labels": ["ui"]})
    got = claims.claim_next(queue, Authority.of({"run-a"}), wanted)
    assert got is not None and got.title == "feature"
    wanted = ReadyFilter.model_validate({"include_types": ["bug", "task"], "agent": "other"})
    got = claims.claim_next(queue, Authority.of({"run-a"}), wanted)
    assert got is not None and got.title == "task"
    assert claims.claim_next(queue, Authority.of({"run-a"}), wanted) is None
