"""Waiting tool calls (``wait_seconds``) without holding a worker thread or the opening
turn: each attempt runs on a worker thread, and the sleeps in between run in short slices
on threads of their own limiter, so any number of waiting calls leaves the SDK's worker
threads (40) to the other calls, and a cancelled call lets its thread go within a slice."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.to_thread

from workq.server.opening import let_others_go
from workq.server.state import ServerState

T = TypeVar("T")

SLICE_SECONDS = 1.0
_sleepers: anyio.CapacityLimiter | None = None


def _limiter() -> anyio.CapacityLimiter:
    global _sleepers
    if _sleepers is None:
        _sleepers = anyio.CapacityLimiter(100_000)
    return _sleepers


async def until_found(
    state: ServerState, attempt: Callable[[], T | None], wait_seconds: int
) -> T | None:
    """``attempt()`` on a worker thread; while it finds nothing, wait for the queue to
    change, up to ``wait_seconds``."""
    if wait_seconds == 0:
        return await anyio.to_thread.run_sync(attempt)
    from workq.services.waiting import Waiter

    queue = await anyio.to_thread.run_sync(state.queue)
    waiter = Waiter(queue, wait_seconds)
    await anyio.to_thread.run_sync(waiter.__enter__)
    try:
        while not state.waits_ended():
            seen = waiter.mark()
            found = await anyio.to_thread.run_sync(attempt)
            if found is not None:
                return found
            pause = await anyio.to_thread.run_sync(waiter.pause)
            if pause <= 0:
                return None
            let_others_go()
            end = time.monotonic() + pause
            while (left := end - time.monotonic()) > 0 and not state.waits_ended():
                changed = await anyio.to_thread.run_sync(
                    waiter.sleep,
                    seen,
                    min(left, SLICE_SECONDS),
                    limiter=_limiter(),
                    abandon_on_cancel=True,
                )
                if changed:
                    break
        return None
    finally:
        waiter.__exit__(None, None, None)
