"""Waiting tool calls (``wait_seconds``) as coroutines: each attempt runs on a worker
thread, and the sleeps in between are awaits on a bell that the change feed rings from its
own thread (db/changes.py ``listen``), one bell per event loop. A thousand waiting calls
are a thousand suspended coroutines, not a thousand threads; a cancelled call stops at
once. ``WAITERS_MAX`` bounds them: past it a call is refused (``SERVER_BUSY``) instead of
piling up.

A change wakes every waiting call of the loop. What they read then is shared (``_Looks``):
calls that wait for the same thing read once whether anything is there for them, and the
next lease lapse once, and one at a time tries to take what is there. So a new issue
costs a server with a hundred waiting calls a few reads and one claim, not a hundred
of each."""

from __future__ import annotations

import contextlib
import time
import weakref
from collections.abc import Callable, Hashable
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeGuard, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread

from workq.errors import ServerBusy
from workq.server.inline import on_loop
from workq.server.opening import let_others_go
from workq.server.state import ServerState

if TYPE_CHECKING:
    from workq.services.handle import Queue

T = TypeVar("T")

# Waiting calls one server keeps at once; more are refused, saying so.
WAITERS_MAX = 10_000
# How long what one waiting call read after a change may stand for the others'.
SHARED_SECONDS = 1.0


class Look(NamedTuple):
    """How a waiting call asks whether its attempt may find something now, so that calls
    asking the same thing share the answer: ``key`` names the question (its filter), and
    ``there()`` reads the queue. False must hold for every call of that key; True may be
    wrong (the attempt then finds nothing)."""

    key: Hashable
    there: Callable[[], bool]


class _Read(NamedTuple):
    """What a waiting call read: at which change counter, when, and the answer."""

    seen: int
    at: float
    value: Any


def _stands(read: _Read | None, seen: int, woken: bool) -> TypeGuard[_Read]:
    """Whether ``read`` may stand for a call at counter ``seen``: that call was woken by
    the change (its own timer may mean a lease lapsed since), the counter has not moved
    since the read, and the read is recent."""
    return (
        woken
        and read is not None
        and read.seen == seen
        and time.monotonic() - read.at < SHARED_SECONDS
    )


class _Looks:
    """What one loop's waiting calls on one database read after a change, shared."""

    def __init__(self) -> None:
        self._there: dict[Hashable, _Read] = {}
        self._turns: dict[Hashable, anyio.Lock] = {}
        self._lapse: _Read | None = None
        self._lapse_turn = anyio.Lock()

    async def attempt(
        self, look: Look, attempt: Callable[[], T | None], seen: int, woken: bool
    ) -> T | None:
        """``attempt()`` if ``look`` says something may be there; one call of a key at a
        time."""
        if _stands(known := self._there.get(look.key), seen, woken) and not known.value:
            return None  # another call looked after this change: nothing there
        turn = self._turns.setdefault(look.key, anyio.Lock())
        async with turn:
            if _stands(known := self._there.get(look.key), seen, woken):
                there = bool(known.value)
            else:
                started = time.monotonic()
                there = await anyio.to_thread.run_sync(look.there)
                self._there[look.key] = _Read(seen, started, there)
            if not there:
                return None
            found = await anyio.to_thread.run_sync(attempt)
            # Taken (by this call, or by someone else meanwhile): the next call looks again.
            self._there.pop(look.key, None)
            return found

    async def next_lapse(self, q: Queue, seen: int, woken: bool) -> datetime | None:
        """When the next live lease lapses (services/queue/waiting.py ``next_lapse``)."""
        from workq.services.queue.waiting import next_lapse

        async with self._lapse_turn:
            if _stands(known := self._lapse, seen, woken):
                lapse: datetime | None = known.value
                return lapse
            started = time.monotonic()
            found = await anyio.to_thread.run_sync(next_lapse, q)
            self._lapse = _Read(seen, started, found)
            return found


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
        # listening to it, how many calls wait on it, and what they read.
        self._feeds: dict[int, list[Any]] = {}
        self.servers: weakref.WeakSet[ServerState] = weakref.WeakSet()

    @property
    def sleepers(self) -> int:
        """Calls waiting on this loop, on every feed."""
        return sum(count for _, count, _ in self._feeds.values())

    def enter(self, changes: _Feed) -> _Looks:
        """One more call waiting on ``changes``; the first hangs the bell on that feed.
        What the calls on that feed read, to share."""
        hung = self._feeds.get(id(changes))
        if hung is None:
            hung = self._feeds[id(changes)] = [changes.listen(self.ring_soon), 0, _Looks()]
        hung[1] += 1
        looks: _Looks = hung[2]
        return looks

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
    look: Look | None = None,
) -> T | None:
    """``attempt()`` (on the loop where it need not wait, inline.py; else on a worker
    thread); while it finds nothing, wait for the queue to change, up to ``wait_seconds``,
    and try again: after the first try, only when ``look`` says something may be there
    (read once for the loop's waiting calls that ask the same, ``_Looks``)."""
    if wait_seconds == 0:
        return await on_loop(state, attempt)
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
    looks = bell.enter(queue.db.changes)
    try:
        tried = woken = False
        while not state.waits_ended():
            seen = waiter.mark()
            if tried and look is not None:
                found = await looks.attempt(look, attempt, seen, woken)
            else:
                found = await anyio.to_thread.run_sync(attempt)
            tried = True
            if found is not None:
                return found
            if waiter.remaining() <= 0:
                return None
            pause = waiter.pause_until(await looks.next_lapse(queue, seen, woken))
            if pause <= 0:
                return None
            let_others_go()
            end = time.monotonic() + pause
            woken = False
            while (left := end - time.monotonic()) > 0 and not state.waits_ended():
                if waiter.mark() != seen:
                    woken = True
                    break
                await bell.sleep(left)
        return None
    finally:
        bell.leave(queue.db.changes)
        waiter.__exit__(None, None, None)
