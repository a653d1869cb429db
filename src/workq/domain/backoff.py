"""How long to wait before trying a failed step again: the sync worker's outbox rows and the
landing queue's steps after a 5xx or a lost answer of GitHub."""

from __future__ import annotations

import random
from collections.abc import Callable

# Each wait is drawn between these parts of the doubled delay, so that steps that failed
# together do not come back together.
JITTER = (0.8, 1.2)


def delay(
    attempts: int,
    base: float,
    cap: float,
    rand: Callable[[float, float], float] = random.uniform,
) -> float:
    """Seconds to wait after ``attempts`` failed attempts: ``base`` doubled per attempt, at
    most ``cap``, then jittered by ``rand(low, high)`` (a factor drawn in ``JITTER``)."""
    doubled = base * 2.0 ** min(attempts, 1000)  # a float power overflows past 1023
    return min(cap, doubled) * rand(*JITTER)
