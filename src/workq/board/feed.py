"""The change feed: one watcher reads the events table for every client of the board.

While anyone listens, one task asks for the newest event id (one indexed query, whatever
the number of clients) and, when it moved, reads the new events once and hands them to
every listener. Between looks it sleeps on the database's change signal (the counter the
waiting calls use, ``db/changes.py``: a poll of the events id on SQLite, LISTEN/NOTIFY on
PostgreSQL), so it asks again when something was written, not on a timer; without a
signal it looks every ``tick``. With no listener it stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from workq.errors import WorkqError
from workq.schemas import BoardChange

log = logging.getLogger(__name__)
TICK = 0.25
# With a signal, a look this often anyway (a signal that failed must not freeze the board).
SIGNAL_TIMEOUT = 1.0


class Signal(Protocol):
    """A counter that moves when the database was written (``db.changes.ChangeFeed``)."""

    def version(self) -> int: ...

    def wait_past(self, seen: int, timeout: float) -> bool: ...

    def watching(self) -> AbstractContextManager[Any]: ...


class ChangeFeed:
    def __init__(
        self,
        last_change: Callable[[], int],
        changes: Callable[[int], list[BoardChange]],
        *,
        signal: Signal | None = None,
        tick: float = TICK,
    ) -> None:
        self._last_change = last_change
        self._changes = changes
        self._signal = signal
        self._tick = tick
        self._listeners: set[asyncio.Queue[list[BoardChange]]] = set()
        self._task: asyncio.Task[None] | None = None
        self.last = -1
        # Set once ``last`` is known: from then on every newer event reaches the listeners.
        self.started = asyncio.Event()
        self.queries = 0  # how many times the events table was asked (tests read it)

    def listen(self) -> asyncio.Queue[list[BoardChange]]:
        queue: asyncio.Queue[list[BoardChange]] = asyncio.Queue()
        self._listeners.add(queue)
        if self._task is None or self._task.done():
            self.last = -1  # a fresh start: from now on, not from when it last stopped
            self.started.clear()
            self._task = asyncio.get_running_loop().create_task(self._watch())
        return queue

    def leave(self, queue: asyncio.Queue[list[BoardChange]]) -> None:
        self._listeners.discard(queue)

    async def _watch(self) -> None:
        signal = self._signal
        with contextlib.ExitStack() as stack:
            if signal is not None:  # the signal follows the database while we watch
                await asyncio.to_thread(stack.enter_context, signal.watching())
            while self._listeners:
                seen = signal.version() if signal is not None else 0
                try:
                    await self.poll()
                except WorkqError:  # a lost database must not end the feed for good
                    log.exception("board: reading the events table failed; trying again")
                    await asyncio.sleep(self._tick)
                if signal is None:
                    await asyncio.sleep(self._tick)
                else:
                    await asyncio.to_thread(signal.wait_past, seen, SIGNAL_TIMEOUT)

    async def poll(self) -> None:
        """One look at the events table for every listener: the newest id, and the new
        events once when it moved."""
        newest = await asyncio.to_thread(self._last_change)
        self.queries += 1
        if self.last < 0:  # the first look: only what happens from now on
            self.last = newest
            self.started.set()
        while newest > self.last:
            batch = await asyncio.to_thread(self._changes, self.last)
            self.queries += 1
            if not batch:
                break
            self.last = batch[-1].id
            for queue in list(self._listeners):
                queue.put_nowait(batch)

    async def stop(self) -> None:
        self._listeners.clear()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
