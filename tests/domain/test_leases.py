"""Leases (domain/leases.py): live until their end, takeable once lapsed or their holder gone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from workq.domain import leases

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_lease_runs_until_its_end_and_no_end_is_no_lease() -> None:
    end = leases.until(NOW, 60)
    assert end == NOW + timedelta(seconds=60)
    assert leases.live(end, NOW)
    assert not leases.live(end, end)
    assert not leases.live(None, NOW)


def test_who_may_take_a_lease() -> None:
    end = leases.until(NOW, 60)
    assert leases.takeable(None, None, NOW, gone=lambda _: True)
    assert not leases.takeable("a", end, NOW, gone=lambda _: False)
    assert leases.takeable("a", end, NOW, gone=lambda _: True)  # its process is gone
    assert leases.takeable("a", end, end, gone=lambda _: False)  # lapsed
    assert leases.takeable("a", None, NOW, gone=lambda _: False)


@given(st.floats(min_value=0.001, max_value=1e6))
def test_a_holder_renews_twice_or_more_before_its_lease_lapses(seconds: float) -> None:
    assert 0 < leases.renewal_period(seconds) * 2 < seconds
