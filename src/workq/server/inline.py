"""Hot calls on the event loop: a claim or a completion on SQLite costs less than handing
it to a worker thread and back (two thread wake-ups, and caches gone cold on the way), so
``on_loop`` runs it on the loop itself, as work that must not wait (nowait.py). Where it
would wait (the write lock is held by another thread or process, a hook runs git), it
stops before anything is written, and the call runs on a worker thread as any other.

PostgreSQL calls always go to a worker thread: every statement is a network round trip.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import anyio.to_thread

from workq.nowait import WouldWait, no_waiting
from workq.server.state import ServerState

T = TypeVar("T")


async def on_loop(state: ServerState, work: Callable[[], T]) -> T:
    """``work()`` on the loop if it need not wait, else on a worker thread."""
    queue = state.opened()
    if queue is not None and queue.db.is_sqlite:
        try:
            with no_waiting():
                return work()
        except WouldWait:
            pass  # nothing of it was written: run it where it may wait
    return await anyio.to_thread.run_sync(work)
