"""Fencing tokens: a claim that lapsed and was taken over cannot act any more, even under
the same run id; calls without a token behave as before."""

from __future__ import annotations

import pytest

from tests.conftest import FakeClock
from workq.domain.authority import Authority
from workq.errors import InvalidInput, LeaseLapsed, PathsReserved, StaleClaim
from workq.schemas import Status
from workq.services.handle import Queue
from workq.services.queue import blocking, claims, issues


def _lapse(queue: Queue, clock: FakeClock) -> None:
    clock.advance(queue.lease_seconds + 1)


def test_every_claim_of_an_issue_gets_a_larger_token(queue: Queue, clock: FakeClock) -> None:
    issues.create(queue, title="one")
    first = claims.claim(queue, 1, Authority.of({"run-a"}))
    assert first.fence == 1
    assert (
        claims.claim(queue, 1, Authority.of({"run-a"})).fence == 1
    )  # a live renewal: the same claim
    assert claims.heartbeat(queue, 1, Authority.of({"run-a"}, fence=1)).fence == 1
    claims.release(queue, 1, Authority.of({"run-a"}, fence=1))
    again = claims.claim_next(queue, Authority.of({"run-b"}))
    assert again is not None and again.fence == 2
    _lapse(queue, clock)
    taken = claims.claim(queue, 1, Authority.of({"run-c"}))
    assert taken.fence == 3 and taken.previous_holder == "run-b"


@pytest.mark.parametrize("how", ["claim", "claim_next"])
def test_a_takeover_under_the_same_run_id_fences_out_the_old_holder(
    queue: Queue, clock: FakeClock, how: str
) -> None:
    issues.create(queue, title="one")
    old = claims.claim_next(queue, Authority.of({"agent-7"}))
    assert old is not None and old.fence == 1
    _lapse(queue, clock)
    # A restarted agent with the same run id takes its lapsed claim again.
    if how == "claim":
        new_fence = claims.claim(queue, 1, Authority.of({"agent-7"})).fence
    else:
        again = claims.claim_next(queue, Authority.of({"agent-7"}))
        assert again is not None and again.already_held
        new_fence = again.fence
    assert new_fence == 2
    for act in (
        lambda: claims.complete(queue, 1, Authority.of({"agent-7"}, fence=1)),
        lambda: claims.heartbeat(queue, 1, Authority.of({"agent-7"}, fence=1)),
        lambda: claims.release(queue, 1, Authority.of({"agent-7"}, fence=1)),
        lambda: blocking.block(queue, 1, "stuck", by=Authority.of({"agent-7"}, fence=1)),
    ):
        with pytest.raises(StaleClaim) as refused:
            act()
        assert refused.value.facts["latest_fence"] == 2
        assert refused.value.facts["holder"] == "agent-7"
        assert "claim 2, held by agent-7" in refused.value.message
    assert issues.get(queue, 1).status == Status.IN_PROGRESS  # nothing changed
    done = claims.complete(queue, 1, Authority.of({"agent-7"}, fence=2))
    assert not done.already_done
    # Its own completion again is still idempotent; the old claim's is still stale.
    assert claims.complete(queue, 1, Authority.of({"agent-7"}, fence=2)).already_done
    with pytest.raises(StaleClaim, match="since ended"):
        claims.complete(queue, 1, Authority.of({"agent-7"}, fence=1))


def test_a_takeover_by_another_run_refuses_the_first_holder(queue: Queue, clock: FakeClock) -> None:
    issues.create(queue, title="one")
    claims.claim(queue, 1, Authority.of({"run-a"}))
    _lapse(queue, clock)
    taken = claims.claim_next(queue, Authority.of({"run-b"}))
    assert taken is not None and taken.fence == 2 and taken.previous_holder == "run-a"
    with pytest.raises(StaleClaim) as refused:
        claims.complete(queue, 1, Authority.of({"run-a"}, fence=1))
    assert refused.value.facts["holder"] == "run-b"
    assert claims.complete(queue, 1, Authority.of({"run-b"}, fence=2)).number == 1


def test_calls_without_a_token_work_as_before(queue: Queue, clock: FakeClock) -> None:
    issues.create(queue, title="one")
    claims.claim(queue, 1, Authority.of({"run-a"}))
    _lapse(queue, clock)
    claims.claim(queue, 1, Authority.of({"run-a"}))
    claims.heartbeat(queue, 1, Authority.of({"run-a"}))
    assert not claims.complete(queue, 1, Authority.of({"run-a"})).already_done


def test_a_token_no_claim_had_is_bad_input_and_changes_nothing(queue: Queue) -> None:
    issues.create(queue, title="one")
    claims.claim(queue, 1, Authority.of({"run-a"}))
    with pytest.raises(InvalidInput, match="no claim with fencing token 5"):
        claims.complete(queue, 1, Authority.of({"run-a"}, fence=5))
    with pytest.raises(InvalidInput, match="positive integer"):
        claims.release(queue, 1, Authority.of({"run-a"}, fence=0))
    assert issues.get(queue, 1).status == Status.IN_PROGRESS


def test_a_lapsed_lease_is_not_revived_by_a_heartbeat_or_the_renewal(
    queue: Queue, clock: FakeClock
) -> None:
    """runA's lease lapses and runB claims work on paths inside runA's: runA's heartbeat is
    refused (claim again), the server's background renewal leaves the lapsed lease alone,
    and claiming again is checked against runB's reservation like any claim."""
    issues.create(queue, title="wide", touches=["src/**"])
    issues.create(queue, title="narrow", touches=["src/auth/**"])
    claims.claim(queue, 1, Authority.of({"run-a"}))
    _lapse(queue, clock)
    assert claims.claim(queue, 2, Authority.of({"run-b"})).fence == 1
    before = issues.get(queue, 1)
    with pytest.raises(LeaseLapsed) as refused:
        claims.heartbeat(queue, 1, Authority.of({"run-a"}))
    assert "claim it again" in (refused.value.hint_for() or "")
    assert claims.renew_leases(queue, {"run-a"}) == 0
    assert claims.renew_leases(queue, {"run-b"}) == 1  # a live lease is renewed
    assert issues.get(queue, 1) == before  # refused: nothing changed
    with pytest.raises(PathsReserved):
        claims.claim(queue, 1, Authority.of({"run-a"}))
    assert issues.get(queue, 1) == before
    claims.release(queue, 2, Authority.of({"run-b"}))
    again = claims.claim(queue, 1, Authority.of({"run-a"}))
    assert again.fence == 2 and again.already_held
    assert claims.heartbeat(queue, 1, Authority.of({"run-a"}, fence=2)).fence == 2
