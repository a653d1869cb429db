"""The pace of writes to GitHub: one mirror's worker and its landings share one pacer, so
that their writes together stay under GitHub's limits for content creation."""

from __future__ import annotations

import time
from collections.abc import Callable


class Pacer:
    """At least ``interval`` seconds between writes. A secondary rate limit doubles the
    interval (to at least a second); a run of successful rows brings it back down.

    ``sleep`` and ``clock`` are injectable so that a benchmark can simulate the waits.
    """

    CALM_ROWS = 20  # successful rows before the interval halves again

    def __init__(
        self,
        interval: float,
        sleep: Callable[[float], object],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base = self.interval = interval
        self.sleep = sleep
        self.clock = clock
        self._last = float("-inf")
        self._calm = 0
        self.writes = 0

    def __call__(self) -> None:
        wait = self._last + self.interval - self.clock()
        if wait > 0:
            self.sleep(wait)
        self._last = self.clock()
        self.writes += 1

    def slow_down(self) -> None:
        self.interval = min(60.0, max(1.0, self.interval * 2))
        self._calm = 0

    def calm(self) -> None:
        self._calm += 1
        if self._calm >= self.CALM_ROWS and self.interval > self.base:
            self.interval = max(self.base, self.interval / 2)
            self._calm = 0
