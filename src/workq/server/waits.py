"""Waiting tool calls (``wait_seconds``) as coroutines: each attempt runs on a worker
thread, and the sleeps in between are awaits on a bell that the change feed rings from its
own thread (db/changes.py ``listen``), one bell per event loop. A thousand waiting calls
are a thousand suspended coroutines, not a thousand threads; a cancelled call stops at
once. ``WAITERS_MAX`` bounds them: past it a call is refused (``SERVER_BUSY``) instead of
piling up."""

from __future__ import annotations

import contextlib
import time
import weakref
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread

from workq.errors import ServerBusy
from workq.server.opening import let_others_go
from workq.server.state import ServerState

T = TypeVar("T")

# Waiting calls one server keeps at once; more are refused, saying so.
WAITERS_MAX = 10_000


class _Feed(Protocol):
    """The change feed (db/changes.py), as far as a bell needs it."""

    def listen(self, ring: Callable[[], None]) -> Callable[[], None]: ...


class _Bell:
    """Wakes every coroutine of one event loop sleeping on the change feed: rung from the
    feed's thread (scheduled onto the loop, never blocking it) or from the loop itself."""

    def __init__(self) -> None:
        native: Any = anyio.lowlevel.current_token().native_token
        # asyncio's loop, or trio's token: each takes a callback from any thread.
        schedule = getattr(native, "call_soon_threadsafe", None) or native.run_sync_soon
        self._schedule: Callable[[Callable[[], None]], object] = schedule
        self._event = anyio.Event()
        # Per change feed (a process has one database; tests run several): how to stop
        # listening to it, and how many calls wait on it.
        self._feeds: dict[int, list[Any]] = {}
        self.servers: weakref.WeakSet[ServerState] = weakref.WeakSet()

    @property
    def sleepers(self) -> int:
        """Calls waiting on this loop, on every feed."""
        return sum(count for _, count in self._feeds.values())

    def enter(self, changes: _Feed) -> None:
        """One more call waiting on ``changes``; the first hangs the bell on that feed."""
        hung = self._feeds.get(id(changes))
        if hung is None:
            self._feeds[id(changes)] = [changes.listen(self.ring_soon), 1]
        else:
            hung[1] += 1

    def leave(self, changes: _Feed) -> None:
        """One fewer; the last on a feed takes the bell off it."""
        hung = self._feeds[id(changes)]
        hung[1] -= 1
        if not hung[1]:
            del self._feeds[id(changes)]
            hung[0]()

    def ring_soon(self) -> None:
        with contextlib.suppress(RuntimeError):  # its loop closed: nobody sleeps there
            self._schedule(self.ring)

    def ring(self) -> None:
        self._event.set()
        self._event = anyio.Event()

    async def sleep(self, seconds: float) -> None:
        """Until the bell rings or ``seconds`` pass."""
        event = self._event
        with anyio.move_on_after(seconds):
            await event.wait()


_bell_of_loop: anyio.lowlevel.RunVar[_Bell] = anyio.lowlevel.RunVar("workq_bell")


def _bell(state: ServerState) -> _Bell:
    """This event loop's bell: made on first use; rung by the end of input, and by the
    change feed while a call waits."""
    try:
        bell = _bell_of_loop.get()
    except LookupError:
        bell = _Bell()
        _bell_of_loop.set(bell)
    if state not in bell.servers:  # each server's end of input rings it (tests run several)
        bell.servers.add(state)
        state.on_end_waits(bell.ring_soon)
    return bell


async def until_found(
    state: ServerState,
    attempt: Callable[[], T | None],
    wait_seconds: int,
    worth_trying: Callable[[], bool] | None = None,
) -> T | None:
    """``attempt()`` on a worker thread; while it finds nothing, wait for the queue to
    change, up to ``wait_seconds``, trying again when ``worth_trying()`` (see
    services/queue/waiting.py ``Waiter.try_now``)."""
    if wait_seconds == 0:
        return await anyio.to_thread.run_sync(attempt)
    from workq.services.queue.waiting import Waiter

    queue = await anyio.to_thread.run_sync(state.queue)
    bell = _bell(state)
    if bell.sleepers >= WAITERS_MAX:
        raise ServerBusy(
            f"this server already keeps {WAITERS_MAX} calls waiting for work",
            hint="call again without wait_seconds, or later",
        )
    waiter = Waiter(queue, wait_seconds)
    await anyio.to_thread.run_sync(waiter.__enter__)
    bell.enter(queue.db.changes)
    try:
        while not state.waits_ended():
            seen = waiter.mark()
            found = await anyio.to_thread.run_sync(lambda: waiter.try_now(attempt, worth_trying))
            if found is not None:
                return found
            pause = await anyio.to_thread.run_sync(waiter.pause)
            if pause <= 0:
                return None
            let_others_go()
            end = time.monotonic() + pause
            while (left := end - time.monotonic()) > 0 and not state.waits_ended():
                if waiter.mark() != seen:
                    break
                await bell.sleep(left)
        return None
    finally:
        bell.leave(queue.db.changes)
        waiter.__exit__(None, None, None)
