"""The change feed: counters that move when the queue may have changed, and a way to
sleep until they move, shared by every waiting call of one process.

Every change writes an event (an issue created, claimed, completed, commented ...), so
"the events table grew" is the signal:

- SQLite: one thread polls ``max(events.id)`` (an index lookup) every ``POLL_SECONDS``
  while anyone waits, in an autocommit read that holds no lock between polls; when it
  moved, one more lookup asks whether a new event is of a kind that wakes waiters.
- PostgreSQL: one connection LISTENs on ``CHANNEL``; a row trigger on ``events``
  (revisions 0006_wait_fence, 0014_notify_event_kind) NOTIFYs each kind of event a commit
  wrote.

Two counters: ``version`` moves on every change (the board shows them all), ``work`` only
on a change that may make an issue claimable. Waiting calls sleep on ``work``: a claim,
a comment or a progress note of one agent does not wake every waiting agent to look again.

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
# Kinds of event after which no issue can be claimable that was not before: taking an
# issue, talking about it, recording work on it. Any other kind (or one added later) wakes
# the waiting calls.
QUIET_KINDS = frozenset(
    {
        "claimed",
        "claim_takeover",
        "force_claimed",
        "commented",
        "progress",
        "gates_run",
        "check_run",
        "worktree_created",
        "branch_linked",
        "pull_request_opened",
        "reserved",
        "branch_created",
    }
)
_QUIET_LIST = ", ".join(f"'{kind}'" for kind in sorted(QUIET_KINDS))
# Whether an event after ``?`` (SQLite's writes commit in id order) may wake a waiter.
WAKING_AFTER = f"SELECT 1 FROM events WHERE id > ? AND kind NOT IN ({_QUIET_LIST}) LIMIT 1"


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
        self._work = 0
        self._watchers = 0
        self._stop: threading.Event | None = None
        self._started = threading.Event()
        self._listeners: list[Callable[[], None]] = []

    # -- the counter -------------------------------------------------------------------

    def version(self) -> int:
        """Moves on every change."""
        with self._cond:
            return self._version

    def wait_past(self, seen: int, timeout: float) -> bool:
        """Sleep until ``version`` passes ``seen`` or ``timeout`` seconds went by; whether
        it moved."""
        with self._cond:
            return self._cond.wait_for(lambda: self._version != seen, timeout=max(0.0, timeout))

    def work(self) -> int:
        """Moves on a change that may make an issue claimable (see ``QUIET_KINDS``)."""
        with self._cond:
            return self._work

    def wait_work_past(self, seen: int, timeout: float) -> bool:
        """``wait_past`` for ``work``."""
        with self._cond:
            return self._cond.wait_for(lambda: self._work != seen, timeout=max(0.0, timeout))

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
        """Call ``ring`` (from the feed's thread; it must not block) each time ``work``
        moves, until the function returned is called: how an event loop wakes its waiting
        coroutines without a thread each."""
        with self._cond:
            self._listeners.append(ring)

        def stop() -> None:
            with self._cond:
                if ring in self._listeners:
                    self._listeners.remove(ring)

        return stop

    def _moved(self, work: bool = True) -> None:
        with self._cond:
            self._version += 1
            if work:
                self._work += 1
            self._cond.notify_all()
            listeners = list(self._listeners) if work else []
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
                    waking = last is None or now is None or now < last
                    if not waking:  # (ids only grow, unless the file was replaced)
                        waking = sqlite.execute(WAKING_AFTER, (last,)).fetchone() is not None
                    last = now
                    self._moved(work=waking)
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
                for note in pg.notifies(timeout=LISTEN_SLICE_SECONDS, stop_after=1):
                    # An empty payload: a trigger older than 0014_notify_event_kind.
                    self._moved(work=note.payload not in QUIET_KINDS)
        finally:
            raw.close()
