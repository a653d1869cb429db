"""Calls that arrive while the queue opens run one at a time, in the order they arrived.

The queue opens on a background thread (``ServerState``), so a client that pipelines
``issue_create`` then ``issue_get(1)`` on a cold server has both calls waiting for it; once
it opened, the worker threads raced and ``issue_get`` could run first. Here each early
call waits for the one before it (the first waits for the queue), so the backlog drains in
arrival order; after that, calls run concurrently as usual. A call that is about to wait
for work (``wait_seconds``) gives its turn up first (``let_others_go``): a wait of minutes
must not hold up the calls behind it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar

import anyio

# The end of the running call's turn, if it holds one (set per call task).
_turn: ContextVar[anyio.Event | None] = ContextVar("workq_turn", default=None)


def let_others_go() -> None:
    """End the running call's turn early: the calls after it may start (call it from the
    call's own task, before a long wait)."""
    mine = _turn.get()
    if mine is not None:
        mine.set()


class Opening:
    """``async with opening.turn():`` around a call that needs the queue.

    Calls enter in arrival order: the SDK starts one task per request in the order read,
    and nothing before ``turn()`` suspends a task, so entering order is arrival order.
    """

    def __init__(self, wait_open: Callable[[], object], is_open: Callable[[], bool]) -> None:
        # ``wait_open`` blocks (on a worker thread) until the queue opened or failed to.
        self._wait_open = wait_open
        self._is_open = is_open
        self._last: anyio.Event | None = None
        self._settled = False

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        if self._settled:
            yield
            return
        before, mine = self._last, anyio.Event()
        self._last = mine
        token = _turn.set(mine)
        try:
            if before is None:
                await anyio.to_thread.run_sync(self._wait_open)
            else:
                await before.wait()
            yield
        finally:
            _turn.reset(token)
            mine.set()
            # The backlog drained with the queue open: later calls need no turn.
            if self._last is mine and self._is_open():
                self._settled = True
