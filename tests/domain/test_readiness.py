"""The readiness rules as plain functions (services/queue/predicates.py asks the same in SQL;
tests/services/queue/test_readiness.py holds the two to one answer)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from workq.domain import readiness

NOW = datetime(2026, 1, 1, tzinfo=UTC)


class Row(NamedTuple):
    status: str = "in_progress"
    claimed_by: str | None = "run-a"
    lease_expires_at: datetime | None = NOW + timedelta(seconds=1)
    is_blocked: bool = False
    open_blockers: int = 0


def test_a_claim_is_live_while_held_with_a_lease_past_now() -> None:
    assert readiness.claim_live(Row(), NOW)
    assert not readiness.claim_lapsed(Row(), NOW)


def test_a_claim_past_its_lease_has_lapsed() -> None:
    assert not readiness.claim_live(Row(lease_expires_at=NOW), NOW)
    assert readiness.claim_lapsed(Row(lease_expires_at=NOW), NOW)


def test_only_an_issue_in_progress_has_a_claim_live_or_lapsed() -> None:
    for status in ("open", "done"):
        assert not readiness.claim_live(Row(status=status), NOW)
        assert not readiness.claim_lapsed(Row(status=status), NOW)


def test_ready_is_open_or_lapsed_and_unblocked() -> None:
    assert readiness.ready(Row(status="open"), NOW)
    assert readiness.ready(Row(lease_expires_at=NOW), NOW)
    assert not readiness.ready(Row(), NOW)  # a live claim
    assert not readiness.ready(Row(status="done"), NOW)
    assert not readiness.ready(Row(status="open", is_blocked=True), NOW)
    assert not readiness.ready(Row(status="open", open_blockers=1), NOW)
