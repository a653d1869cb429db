"""One loop per serving process that moves working tasks on: no thread, connection or
coroutine per task.

While any task of a kind that waits for the queue (``Kind.on_change``) is working, the
loop follows the change feed (db/changes.py): after each change that may make work
claimable, it advances the working tasks oldest first (who waited longest is served
first), asking once per question (``Kind.key``) whether anything is there for it
(``Kind.ready``) and trying no further tasks of that question once the answer is no. It
also wakes when the earliest wait ends and when a lease lapses (an expired claim makes
its issue claimable with no event). Tasks of every process are served: each loop reads
them from the database, and the tasks' compare-and-set keeps two processes from completing
one task twice. Kinds with ``every_seconds`` are advanced at least that often.

Now and then (``SWEEP_SECONDS``) it gives back the claims of tasks nobody will read
(lifecycle.sweep).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Hashable
from datetime import datetime

from workq.errors import WorkqError
from workq.services.handle import Queue
from workq.services.queue.waiting import LEASE_RECHECK_SECONDS, next_lapse
from workq.services.tasks import catalog, kicks, lifecycle, store
from workq.services.tasks.store import TaskRecord

log = logging.getLogger("workq.tasks")

# How often an idle loop looks for working tasks (another process may have made some).
IDLE_SECONDS = 2.0
# How long the loop sleeps at most while tasks wait (a task another process made may end
# its wait earlier than any this loop knew of).
WAKE_MAX_SECONDS = 5.0
SWEEP_SECONDS = 5.0
RETRY_SECONDS = 1.0
RETRY_MAX_SECONDS = 30.0
# How long one wait on the feed lasts at most, so that a stop is seen soon.
SLICE_SECONDS = 0.5


class Waker:
    """The loop's state: when it last swept, when each timed kind last advanced."""

    def __init__(self, q: Queue, stop: threading.Event) -> None:
        self.q = q
        self.stop = stop
        self._swept = 0.0
        self._timed: dict[str, float] = {}

    def run(self) -> None:
        delay = RETRY_SECONDS
        while not self.stop.is_set():
            try:
                self._round()
            except WorkqError as exc:
                log.warning("workq: tasks could not advance (will retry): %s", exc.describe())
            except Exception:  # never let the loop die: tasks would wait until polled
                log.exception("workq: tasks could not advance (will retry)")
            else:
                delay = RETRY_SECONDS
                continue
            self.stop.wait(delay)
            delay = min(delay * 2, RETRY_MAX_SECONDS)

    def _round(self) -> None:
        self._chores()
        names = [k.name for k in catalog.every() if k.on_change]
        kicked = kicks.count()
        if not names or not store.any_working(self.q, names):
            self._sleep(IDLE_SECONDS, kicked)
            return
        feed = self.q.db.changes
        with feed.watching():
            while not self.stop.is_set():
                seen, kicked = feed.work(), kicks.count()
                if not advance_all(self.q, names):
                    return
                self._chores()
                end = time.monotonic() + self._pause(names)
                while not self.stop.is_set() and (left := end - time.monotonic()) > 0:
                    if feed.wait_work_past(seen, min(left, SLICE_SECONDS / 10)):
                        break
                    if kicks.count() != kicked:  # a task of this process: its deadline counts
                        break

    def _sleep(self, seconds: float, kicked: int) -> None:
        """Up to ``seconds``, until this process makes a task or the loop is stopped."""
        end = time.monotonic() + seconds
        while not self.stop.is_set() and (left := end - time.monotonic()) > 0:
            if kicks.wait_past(kicked, min(left, SLICE_SECONDS)):
                return

    def _pause(self, names: list[str]) -> float:
        """Until the earliest wait ends or the next live lease lapses, within bounds."""
        now = self.q.now()
        pause = min(WAKE_MAX_SECONDS, LEASE_RECHECK_SECONDS)
        for moment in (store.next_deadline(self.q, names), next_lapse(self.q)):
            if moment is not None:
                pause = min(pause, _seconds_until(moment, now) + 0.01)
        return max(pause, 0.0)

    def _chores(self) -> None:
        """The sweep, and the kinds advanced on a timer, when due."""
        clock = time.monotonic()
        if clock - self._swept >= SWEEP_SECONDS:
            self._swept = clock
            lifecycle.sweep(self.q)
        for kind in catalog.every():
            if kind.every_seconds is None:
                continue
            if clock - self._timed.get(kind.name, 0.0) >= kind.every_seconds:
                self._timed[kind.name] = clock
                for task in store.working(self.q, [kind.name]):
                    kind.advance(self.q, task)


def _seconds_until(moment: datetime, now: datetime) -> float:
    return max(0.0, (moment - now).total_seconds())


def advance_all(q: Queue, names: list[str]) -> int:
    """Advance the working tasks of kinds ``names`` that may move now, oldest first; how
    many were working."""
    working = store.working(q, names)
    there: dict[tuple[str, Hashable], bool] = {}
    now = q.now()
    for task in working:
        kind = catalog.of(task.kind)
        if kind is None:
            continue
        if not _due(task, now):
            key = (kind.name, kind.key(task) if kind.key else task.id)
            if key not in there:
                there[key] = kind.ready(q, task) if kind.ready else True
            if not there[key]:
                continue
            there.pop(key)  # taken (by this task or another): ask again for the next one
        kind.advance(q, task)
    return len(working)


def _due(task: TaskRecord, now: datetime) -> bool:
    """Whether ``task``'s wait is over (it is settled now, whatever is there)."""
    return task.deadline is not None and now >= task.deadline


def run(q: Queue, stop: threading.Event) -> None:
    """The loop, until ``stop`` is set (a serving process's keeper thread)."""
    Waker(q, stop).run()
