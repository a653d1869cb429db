"""Leases: a hold on something (a mirror, a claim, a worktree) that ends at a moment unless
its holder renews it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

# A holder renews its lease this often, as a part of its length: two renewals may fail
# before it lapses.
RENEWAL_FRACTION = 1 / 3


def live(until: datetime | None, now: datetime) -> bool:
    """Whether a lease that ends at ``until`` runs at ``now`` (no end: no lease)."""
    return until is not None and until > now


def until(now: datetime, seconds: float) -> datetime:
    """The end of a lease of ``seconds`` taken or renewed at ``now``."""
    return now + timedelta(seconds=seconds)


def takeable(
    holder: str | None, until: datetime | None, now: datetime, gone: Callable[[str], bool]
) -> bool:
    """Whether a lease may be taken at ``now``: nobody holds it, it lapsed, or ``gone`` says
    its holder's process no longer runs (asked only of a live lease's holder)."""
    return holder is None or not live(until, now) or gone(holder)


def renewal_period(seconds: float) -> float:
    """Seconds between renewals of a lease of ``seconds``."""
    return seconds * RENEWAL_FRACTION
