"""Claims, leases, completion, blocking and release, on a real database."""

from __future__ import annotations

import pytest

from tests.conftest import ADMIN, FakeClock
from workq.domain.authority import Authority
from workq.errors import (
    AlreadyClaimed,
    InvalidConfirmation,
    NotClaimable,
    NotHolder,
)
from workq.schemas import FORCE_CLAIM_CONFIRMATION, IssueType, ReadyFilter, Status
from workq.services.handle import Queue
from workq.services.queue import blocking, claims, issues, notes, ready_queue


def test_ready_order_is_priority_then_age_then_number(queue: Queue, clock: FakeClock) -> None:
    issues.create(queue, title="old low", priority="low")
    clock.advance(1)
    issues.create(queue, title="new urgent", priority="urgent")
    clock.advance(1)
    issues.create(queue, title="old medium", priority="medium")
    clock.advance(1)
    issues.create(queue, title="newer medium", priority="medium")
    assert [i.number for i in ready_queue.ready(queue, limit=10)] == [2, 3, 4, 1]


def test_claim_is_exclusive_and_reclaim_by_holder_is_a_noop(queue: Queue) -> None:
    issues.create(queue, title="one")
    first = claims.claim(queue, 1, Authority.of({"run-a"}))
    assert first.claimed_by == "run-a" and not first.already_held
    again = claims.claim(queue, 1, Authority.of({"run-a"}))
    assert again.already_held
    with pytest.raises(AlreadyClaimed) as err:
        claims.claim(queue, 1, Authority.of({"run-b"}))
    assert err.value.facts["holder"] == "run-a"
    assert issues.get(queue, 1).status == Status.IN_PROGRESS
    assert ready_queue.ready(queue) == []


def test_expired_lease_is_taken_over_and_recorded(queue: Queue, clock: FakeClock) -> None:
    issues.create(queue, title="one")
    claims.claim(queue, 1, Authority.of({"run-a"}))
    clock.advance(queue.lease_seconds - 1)
    with pytest.raises(AlreadyClaimed):
        claims.claim(queue, 1, Authority.of({"run-b"}))
    clock.advance(2)
    assert [i.number for i in ready_queue.ready(queue)] == [1]
    taken = claims.claim_next(queue, Authority.of({"run-b"}))
    assert taken is not None and taken.previous_holder == "run-a"
    kinds = [e.kind for e in notes.history(queue, 1)]
    assert kinds[-1] == "claim_takeover"
    with pytest.raises(NotHolder):
        claims.complete(queue, 1, Authority.of({"run-a"}))


def test_heartbeat_extends_the_lease(queue: Queue, clock: FakeClock) -> None:
    issues.create(queue, title="one")
    claims.claim(queue, 1, Authority.of({"run-a"}))
    clock.advance(queue.lease_seconds - 5)
    claims.heartbeat(queue, 1, Authority.of({"run-a"}))
    clock.advance(queue.lease_seconds - 5)
    with pytest.raises(AlreadyClaimed):
        claims.claim(queue, 1, Authority.of({"run-b"}))
    with pytest.raises(NotHolder):
        claims.heartbeat(queue, 1, Authority.of({"run-b"}))


def test_renew_leases_covers_every_claim_of_the_holders(queue: Queue, clock: FakeClock) -> None:
    for title in ("a", "b", "c"):
        issues.create(queue, title=title)
    claims.claim(queue, 1, Authority.of({"run-a"}))
    claims.claim(queue, 2, Authority.of({"run-a"}))
    claims.claim(queue, 3, Authority.of({"run-b"}))
    clock.advance(queue.lease_seconds - 1)
    assert claims.renew_leases(queue, {"run-a"}) == 2
    clock.advance(2)
    assert [i.number for i in ready_queue.ready(queue, limit=5)] == [3]


def test_complete_and_release_by_a_non_holder_are_refused(queue: Queue) -> None:
    issues.create(queue, title="one")
    with pytest.raises(NotHolder):
        claims.complete(queue, 1, Authority.of({"run-a"}))
    claims.claim(queue, 1, Authority.of({"run-a"}))
    with pytest.raises(NotHolder):
        claims.complete(queue, 1, Authority.of({"run-b"}))
    with pytest.raises(NotHolder):
        claims.release(queue, 1, Authority.of({"run-b"}))
    assert issues.get(queue, 1).claimed_by == "run-a"
    done = claims.complete(queue, 1, Authority.of({"run-a"}))
    assert not done.already_done
    assert claims.complete(queue, 1, Authority.of({"run-a"})).already_done
    issue = issues.get(queue, 1)
    assert issue.status == Status.DONE and issue.claimed_by is None and issue.closed_at


def test_forced_complete_needs_no_claim(queue: Queue) -> None:
    issues.create(queue, title="one")
    claims.claim(queue, 1, Authority.of({"run-a"}))
    claims.complete(queue, 1, Authority.overriding("admin", who="admin"), actor="admin")
    assert issues.get(queue, 1).status == Status.DONE


def test_block_releases_the_claim_until_unblocked(queue: Queue) -> None:
    issues.create(queue, title="one")
    claims.claim(queue, 1, Authority.of({"run-a"}))
    with pytest.raises(NotHolder):
        blocking.block(queue, 1, "not mine", by=Authority.of({"run-b"}))
    blocked = blocking.block(queue, 1, "needs a key", by=Authority.of({"run-a"}))
    assert blocked.is_blocked and blocked.claimed_by is None
    assert blocked.status == Status.OPEN and blocked.blocked_reason == "needs a key"
    assert ready_queue.ready(queue) == []
    with pytest.raises(NotClaimable):
        claims.claim(queue, 1, Authority.of({"run-b"}))
    blocking.unblock(queue, 1)
    assert [i.number for i in ready_queue.ready(queue)] == [1]


def test_release_returns_the_issue_to_the_queue(queue: Queue) -> None:
    issues.create(queue, title="one")
    claims.claim(queue, 1, Authority.of({"run-a"}))
    claims.release(queue, 1, Authority.of({"run-a"}), reason="out of time")
    assert issues.get(queue, 1).status == Status.OPEN
    assert claims.claim_next(queue, Authority.of({"run-b"})) is not None


def test_force_claim_needs_the_exact_confirmation(queue: Queue) -> None:
    issues.create(queue, title="one")
    claims.claim(queue, 1, Authority.of({"run-a"}))
    with pytest.raises(InvalidConfirmation):
        claims.force_claim(queue, 1, Authority.of({"run-b"}), "yes")
    taken = claims.force_claim(queue, 1, Authority.of({"run-b"}), FORCE_CLAIM_CONFIRMATION)
    assert taken.previous_holder == "run-a"
    assert notes.history(queue, 1)[-1].kind == "force_claimed"


def test_claim_next_filters_and_empty_queue(queue: Queue) -> None:
    assert claims.claim_next(queue, Authority.of({"run-a"})) is None
    issues.create(queue, title="bug", issue_type="bug", agent="codex")
    issues.create(queue, title="docs", issue_type="docs", labels=["web"])
    only_docs = ReadyFilter(include_types=[IssueType.DOCS])
    assert [i.number for i in ready_queue.ready(queue, only_docs)] == [2]
    assert [i.number for i in ready_queue.ready(queue, ReadyFilter(agent="codex"))] == [1]
    assert [i.number for i in ready_queue.ready(queue, ReadyFilter(labels=["web"]))] == [2]
    no_bugs = ReadyFilter(exclude_types=[IssueType.BUG])
    got = claims.claim_next(queue, Authority.of({"run-a"}), no_bugs)
    assert got is not None and got.number == 2
    assert claims.claim_next(queue, Authority.of({"run-b"}), no_bugs) is None


def test_done_issues_cannot_be_claimed(queue: Queue) -> None:
    issues.create(queue, title="one")
    claims.claim(queue, 1, Authority.of({"run-a"}))
    claims.complete(queue, 1, Authority.of({"run-a"}))
    with pytest.raises(NotClaimable):
        claims.claim(queue, 1, Authority.of({"run-a"}))


def test_every_mutation_writes_an_event(queue: Queue) -> None:
    issues.create(queue, title="one")
    issues.update_issue(queue, 1, title="uno", priority="high", by=ADMIN)
    claims.claim(queue, 1, Authority.of({"run-a"}))
    claims.heartbeat(queue, 1, Authority.of({"run-a"}))
    blocking.block(queue, 1, "wait", by=Authority.overriding("admin", who="admin"))
    blocking.unblock(queue, 1)
    claims.claim(queue, 1, Authority.of({"run-a"}))
    claims.release(queue, 1, Authority.of({"run-a"}))
    claims.claim(queue, 1, Authority.of({"run-a"}))
    claims.complete(queue, 1, Authority.of({"run-a"}))
    issues.reopen(queue, 1)
    notes.comment(queue, 1, "note")
    issues.delete_issue(queue, 1, by=ADMIN)
    kinds = [e.kind for e in notes.history(queue, 1)]
    assert kinds == [
        "created",
        "updated",
        "claimed",
        "blocked",
        "unblocked",
        "claimed",
        "released",
        "claimed",
        "completed",
        "reopened",
        "commented",
        "deleted",
    ]
    update = notes.history(queue, 1)[1]
    assert update.before == {"title": "one", "priority": "medium"}
    assert update.after == {"title": "uno", "priority": "high"}


def test_a_force_claims_note_is_kept_with_it_or_not_at_all(queue: Queue) -> None:
    issues.create(queue, title="stuck")
    claims.claim(queue, 1, Authority.of({"run-a"}))
    claims.force_claim(
        queue, 1, Authority.of({"run-b"}), FORCE_CLAIM_CONFIRMATION, note="taken over"
    )
    (kept,) = notes.comments(queue, 1)
    assert (kept.body, kept.author) == ("taken over", "run-b")
    claims.complete(queue, 1, Authority.of({"run-b"}))
    with pytest.raises(NotClaimable):
        claims.force_claim(
            queue, 1, Authority.of({"run-c"}), FORCE_CLAIM_CONFIRMATION, note="again"
        )
    assert [c.body for c in notes.comments(queue, 1)] == ["taken over"]
