"""The change feed: a counter that moves when the queue may have changed, and a way to
sleep until it moves, shared by every waiting call of one process.

Every change that can make an issue ready writes an event (an issue created, completed,
unblocked, released ...), so "the events table grew" is the signal:

- SQLite: one thread polls ``max(events.id)`` (an index lookup) every ``POLL_SECONDS``
  while anyone waits, in an autocommit read that holds no lock between polls.
- PostgreSQL: one connection LISTENs on ``CHANNEL``; a row trigger on ``events``
  (revision 0006_wait_fence) NOTIFYs at each commit that wrote events.

The thread runs only while somebody watches; it stops by itself after the last one left.
(Writes of this process are seen the same way: a write that found nothing to do, such as
a waiter's own fruitless claim attempt, must not wake the other waiters.)
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

log = logging.getLogger("workq.changes")

CHANNEL = "workq_changes"
POLL_SECONDS = 0.025
# How long a PostgreSQL listener blocks before it checks whether to stop.
LISTEN_SLICE_SECONDS = 0.5
# How long a failed source waits before it tries again (waiters are woken meanwhile, so
# their next attempt reports the failure).
RETRY_SECONDS = 1.0
START_TIMEOUT_SECONDS = 10.0
LATEST = "SELECT max(id) FROM events"


class Source(Protocol):
    """What the feed reads of its Database (engine.py, which owns one feed each)."""

    @property
    def is_sqlite(self) -> bool: ...

    def own_connection(self) -> Any: ...


class ChangeFeed:
    """One per Database. Thread-safe."""

    def __init__(self, db: Source) -> None:
        self._db = db
        self._cond = threading.Condition()
        self._version = 0
        self._watchers = 0
        self._stop: threading.Event | None = None
        self._started = threading.Event()
        self._listeners: list[Callable[[], None]] = []

    # -- the counter -------------------------------------------------------------------

    def version(self) -> int:
        with self._cond:
            return self._version

    def wait_past(self, seen: int, timeout: float) -> bool:
        """Sleep until the counter passes ``seen`` or ``timeout`` seconds went by; whether
        it moved."""
        with self._cond:
            return self._cond.wait_for(lambda: self._version != seen, timeout=max(0.0, timeout))

    # -- watching ----------------------------------------------------------------------

    @contextmanager
    def watching(self) -> Iterator[ChangeFeed]:
        """While inside, the counter follows the database. The source is listening (or has
        read its starting point) before this returns, so a change committed after it is
        never missed."""
        with self._cond:
            self._watchers += 1
            if self._stop is None:
                self._stop = threading.Event()
                self._started = threading.Event()
                threading.Thread(
                    target=self._follow,
                    args=(self._stop, self._started),
                    name="workq-changes",
                    daemon=True,
                ).start()
            started = self._started
        started.wait(START_TIMEOUT_SECONDS)
        try:
            yield self
        finally:
            with self._cond:
                self._watchers -= 1
                if not self._watchers and self._stop is not None:
                    self._stop.set()
                    self._stop = None

    def listen(self, ring: Callable[[], None]) -> Callable[[], None]:
        """Call ``ring`` (from the feed's thread; it must not block) each time the counter
        moves, until the function returned is called: how an event loop wakes its waiting
        coroutines without a thread each."""
        with self._cond:
            self._listeners.append(ring)

        def stop() -> None:
            with self._cond:
                if ring in self._listeners:
                    self._listeners.remove(ring)

        return stop

    def _moved(self) -> None:
        with self._cond:
            self._version += 1
            self._cond.notify_all()
            listeners = list(self._listeners)
        for ring in listeners:
            try:
                ring()
            except Exception:  # a loop that closed meanwhile: its waiters are gone too
                log.debug("workq: a change listener failed", exc_info=True)

    def _follow(self, stop: threading.Event, started: threading.Event) -> None:
        follow = self._poll if self._db.is_sqlite else self._listen
        while not stop.is_set():
            try:
                follow(stop, started)
            except Exception as exc:  # the database went away: wake waiters, retry
                log.warning("workq: change feed failed (will retry): %s", exc)
                started.set()
                self._moved()
                stop.wait(RETRY_SECONDS)

    def _poll(self, stop: threading.Event, started: threading.Event) -> None:
        raw = self._db.own_connection()
        try:
            sqlite: Any = raw.dbapi_connection  # autocommit: no transaction between polls
            last = sqlite.execute(LATEST).fetchone()[0]
            started.set()
            while not stop.wait(POLL_SECONDS):
                now = sqlite.execute(LATEST).fetchone()[0]
                if now != last:
                    last = now
                    self._moved()
        finally:
            raw.close()

    def _listen(self, stop: threading.Event, started: threading.Event) -> None:
        raw = self._db.own_connection()
        try:
            pg: Any = raw.dbapi_connection
            pg.rollback()
            pg.autocommit = True
            pg.execute(f"LISTEN {CHANNEL}")
            started.set()
            while not stop.is_set():
                for _ in pg.notifies(timeout=LISTEN_SLICE_SECONDS, stop_after=1):
                    self._moved()
        finally:
            raw.close()
