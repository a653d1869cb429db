"""Reservations through the services: a claim reserves its touches, explicit reserve and
unreserve by the holder, conflicts refused, ready and claim_next skip reserved work, and
every reservation ends with its claim."""

from __future__ import annotations

import pytest

from tests.conftest import FakeClock
from workq.domain.authority import Authority
from workq.errors import NotHolder, PathsReserved
from workq.services.handle import Queue
from workq.services.queue import blocking, claims, issues, ready_queue, reservations


def held(queue: Queue) -> list[tuple[int, str, str, str]]:
    return [(h.number, h.holder, h.glob, h.mode) for h in reservations.list_live(queue)]


def test_a_claim_reserves_its_touches_until_it_ends(queue: Queue) -> None:
    issues.create(queue, title="auth", touches=["src/auth/**"])
    issues.create(queue, title="free")
    assert held(queue) == []
    claims.claim(queue, 1, Authority.of({"run-a"}))
    assert held(queue) == [(1, "run-a", "src/auth/**", "exclusive")]
    claims.release(queue, 1, Authority.of({"run-a"}))
    assert held(queue) == []
    claims.claim(queue, 1, Authority.of({"run-a"}))
    claims.complete(queue, 1, Authority.of({"run-a"}))
    assert held(queue) == []


def test_reservations_lapse_with_the_lease(queue: Queue, clock: FakeClock) -> None:
    issues.create(queue, title="auth", touches=["src/auth/**"])
    issues.create(queue, title="login", touches=["src/auth/login.py"])
    claims.claim(queue, 1, Authority.of({"run-a"}))
    reservations.reserve(queue, 1, Authority.of({"run-a"}), "docs/auth.md")
    with pytest.raises(PathsReserved):
        claims.claim(queue, 2, Authority.of({"run-b"}))
    clock.advance(queue.lease_seconds + 1)
    assert held(queue) == []
    assert claims.claim(queue, 2, Authority.of({"run-b"})).number == 2
    with pytest.raises(PathsReserved) as refused:
        claims.claim(queue, 1, Authority.of({"run-c"}))
    assert "src/auth/login.py by run-b (#2" in str(refused.value)
    claims.release(queue, 2, Authority.of({"run-b"}))
    # Taken over, the old claim's explicit reservation does not come back.
    claims.claim(queue, 1, Authority.of({"run-c"}))
    assert held(queue) == [(1, "run-c", "src/auth/**", "exclusive")]


def test_ready_and_claim_next_skip_issues_whose_paths_are_reserved(queue: Queue) -> None:
    issues.create(queue, title="auth", touches=["src/auth/**"], priority="urgent")
    issues.create(queue, title="auth tests", touches=["src/**/*.py"], priority="high")
    issues.create(queue, title="docs", touches=["docs/**"], priority="medium")
    first = claims.claim_next(queue, Authority.of({"run-a"}))
    assert first is not None and first.number == 1
    assert [r.number for r in ready_queue.ready(queue, limit=5, holder="run-b")] == [3]
    # The holder itself is not held back by its own reservations.
    assert [r.number for r in ready_queue.ready(queue, limit=5, holder="run-a")] == [2, 3]
    second = claims.claim_next(queue, Authority.of({"run-b"}))
    assert second is not None and second.number == 3
    assert claims.claim_next(queue, Authority.of({"run-c"})) is None
    claims.complete(queue, 1, Authority.of({"run-a"}))
    third = claims.claim_next(queue, Authority.of({"run-c"}))
    assert third is not None and third.number == 2


def test_warn_mode_claims_anyway(queue: Queue) -> None:
    queue.reservations = "warn"
    issues.create(queue, title="a", touches=["src/**"])
    issues.create(queue, title="b", touches=["src/x.py"])
    claims.claim(queue, 1, Authority.of({"run-a"}))
    assert [r.number for r in ready_queue.ready(queue, limit=5, holder="run-b")] == [2]
    assert claims.claim(queue, 2, Authority.of({"run-b"})).number == 2


def test_explicit_reserve_and_unreserve_by_the_holder_only(queue: Queue) -> None:
    issues.create(queue, title="a")
    issues.create(queue, title="b")
    claims.claim(queue, 1, Authority.of({"run-a"}))
    claims.claim(queue, 2, Authority.of({"run-b"}))
    with pytest.raises(NotHolder):
        reservations.reserve(queue, 1, Authority.of({"run-b"}), "src/**")
    reservations.reserve(queue, 1, Authority.of({"run-a"}), "src/**", mode="shared")
    # Shared with shared: fine; exclusive over a shared one of another: refused.
    reservations.reserve(queue, 2, Authority.of({"run-b"}), "src/x.py", mode="shared")
    with pytest.raises(PathsReserved) as refused:
        reservations.reserve(queue, 2, Authority.of({"run-b"}), "src/y.py")
    assert refused.value.facts["reserved"] == [
        {"number": 1, "holder": "run-a", "glob": "src/**", "mode": "shared"}
    ]
    left = reservations.unreserve(queue, 1, Authority.of({"run-a"}), "src/**")
    assert left == []
    reservations.reserve(queue, 2, Authority.of({"run-b"}), "src/y.py")
    assert held(queue) == [
        (2, "run-b", "src/x.py", "shared"),
        (2, "run-b", "src/y.py", "exclusive"),
    ]
    blocking.block(queue, 2, "stuck", by=Authority.of({"run-b"}))
    assert held(queue) == []
