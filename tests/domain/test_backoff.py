"""The wait before a failed step is tried again: doubled per attempt, capped, jittered."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from workq.domain import backoff


def _middle(low: float, high: float) -> float:
    return (low + high) / 2


def test_the_wait_doubles_per_attempt_up_to_the_cap() -> None:
    waits = [backoff.delay(n, 5.0, 600.0, _middle) for n in range(9)]
    assert waits == [5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 600.0, 600.0]


def test_the_jitter_is_drawn_between_its_bounds() -> None:
    drawn: list[tuple[float, float]] = []

    def low(a: float, b: float) -> float:
        drawn.append((a, b))
        return a

    assert backoff.delay(2, 5.0, 600.0, low) == 20.0 * 0.8
    assert backoff.delay(2, 5.0, 600.0, lambda a, b: b) == 20.0 * 1.2
    assert drawn == [backoff.JITTER]


@given(
    st.integers(min_value=0, max_value=5000),
    st.floats(min_value=0.0, max_value=1e6),
    st.floats(min_value=0.0, max_value=1e6),
)
def test_any_wait_lies_within_the_jittered_cap(attempts: int, base: float, cap: float) -> None:
    wait = backoff.delay(attempts, base, cap)
    low, high = backoff.JITTER
    assert 0.0 <= wait <= cap * high
    assert wait >= min(cap, base) * low
