"""Waiting for work: waiters sleep on an empty queue, a change wakes every one of them, and
claim_next still hands each issue to exactly one; a wait ends at its bound."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from workq.config import Settings
from workq.domain.authority import Authority
from workq.errors import InvalidInput
from workq.schemas import ClaimedIssue, ReadyFilter
from workq.services.handle import Queue
from workq.services.queue import claims, dependencies, issues, ready_queue, waiting

WAITERS = 4
LONG = 120  # never reached: each waiter is woken by a change


class Waiters:
    """``count`` threads, each in ``until_found(claim_next)``; counts their finished
    attempts."""

    def __init__(self, queue: Queue, count: int) -> None:
        self.queue = queue
        self.attempts: Counter[int] = Counter()
        self.got: dict[int, ClaimedIssue | None] = {}
        self.failed: list[BaseException] = []
        self.threads = [
            threading.Thread(target=self._wait, args=(i,), daemon=True) for i in range(count)
        ]
        for thread in self.threads:
            thread.start()

    def _wait(self, i: int) -> None:
        def attempt() -> ClaimedIssue | None:
            got = claims.claim_next(self.queue, Authority.of({f"waiter-{i}"}))
            self.attempts[i] += 1  # counted once done: a waiter with a count is asleep or
            return got  # about to be, and tries again only when woken

        try:
            self.got[i] = waiting.until_found(self.queue, attempt, LONG)
        except BaseException as exc:
            self.failed.append(exc)
            raise

    def settle(self, check: Callable[[], bool]) -> None:
        """Until ``check()`` holds (what the test waits for; the bound only ends a hang)."""
        deadline = time.monotonic() + LONG
        while not check():
            assert not self.failed, self.failed
            assert time.monotonic() < deadline, (
                f"the waiters never got there: attempts {dict(self.attempts)}, "
                f"got {self.got}, feed at {self.queue.db.changes.version()}"
            )
            time.sleep(0.01)

    def join(self) -> None:
        for thread in self.threads:
            thread.join(timeout=LONG)
            assert not thread.is_alive()


def test_one_new_issue_wakes_every_waiter_and_one_claims_it(queue: Queue) -> None:
    group = Waiters(queue, WAITERS)
    group.settle(lambda: len(group.attempts) == WAITERS)
    before = dict(group.attempts)
    issues.create(queue, title="the only one")
    group.settle(lambda: len(group.got) == 1)
    # Every waiter tried again after the change (all woke), and only one got it.
    group.settle(lambda: all(group.attempts[i] > before[i] for i in range(WAITERS)))
    assert sum(1 for g in group.got.values() if g is not None) == 1
    assert [g.number for g in group.got.values() if g is not None] == [1]
    for n in range(WAITERS - 1):
        issues.create(queue, title=f"more {n}")
    group.join()
    numbers = sorted(g.number for g in group.got.values() if g is not None)
    assert numbers == list(range(1, WAITERS + 1))  # each issue to exactly one


def test_a_woken_waiter_claims_again_only_when_something_is_there_for_it(queue: Queue) -> None:
    """A change that brings nothing this waiter may claim (here, an issue for another
    agent) wakes it, but it only reads: the claim, a write, is tried again when it would
    find something."""
    attempts: list[ClaimedIssue | None] = []
    looked = threading.Event()
    wanted = ReadyFilter(agent="codex")

    def attempt() -> ClaimedIssue | None:
        attempts.append(claims.claim_next(queue, Authority.of({"waiter"}), wanted))
        return attempts[-1]

    def worth_trying() -> bool:
        looked.set()
        return bool(ready_queue.ready(queue, wanted, holder="waiter"))

    got: list[ClaimedIssue | None] = []
    thread = threading.Thread(
        target=lambda: got.append(waiting.until_found(queue, attempt, LONG, worth_trying))
    )
    thread.start()
    deadline = time.monotonic() + LONG
    while not attempts:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    for n in range(3):
        issues.create(queue, title=f"for claude {n}", agent="claude")
    while not looked.is_set():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert attempts == [None]  # woken, looked, did not try to claim
    issues.create(queue, title="for codex", agent="codex")
    thread.join(timeout=LONG)
    assert got[0] is not None and got[0].title == "for codex"
    assert len(attempts) == 2


def test_a_completed_blocker_wakes_a_waiter(queue: Queue) -> None:
    issues.create(queue, title="blocker")
    issues.create(queue, title="waits")
    dependencies.depend(queue, blocker=1, blocked=2)
    claims.claim(queue, 1, Authority.of({"worker"}))
    group = Waiters(queue, 1)
    group.settle(lambda: group.attempts[0] >= 1)
    claims.complete(queue, 1, Authority.of({"worker"}))
    group.join()
    got = group.got[0]
    assert got is not None and got.number == 2


def test_a_wait_returns_nothing_at_its_bound(queue: Queue) -> None:
    assert (
        waiting.until_found(queue, lambda: claims.claim_next(queue, Authority.of({"w"})), 1) is None
    )
    assert waiting.until_found(queue, lambda: ready_queue.ready(queue) or None, 0) is None


@pytest.mark.parametrize("bad", [-1, 301, True])
def test_a_wait_out_of_bounds_is_refused(queue: Queue, bad: int) -> None:
    with pytest.raises(InvalidInput, match="wait_seconds"):
        waiting.until_found(queue, lambda: None, bad)


def test_a_change_by_another_process_wakes_a_waiter(queue: Queue, settings: Settings) -> None:
    """No in-process signal here: the poller (SQLite) or LISTEN (PostgreSQL) must see it."""
    group = Waiters(queue, 2)
    group.settle(lambda: len(group.attempts) == 2)
    where = (
        ["--db", str(settings.db_path)]
        if settings.database_url is None
        else ["--database-url", settings.database_url]
    )
    workq = str(Path(sys.executable).with_name("workq"))
    for title in ("from afar", "and another"):
        subprocess.run(
            [workq, *where, "create", title],
            check=True,
            capture_output=True,
            timeout=60,
            env={**os.environ, "WORKQ_ACTOR": "tester"},
        )
    group.join()
    assert sorted(g.number for g in group.got.values() if g is not None) == [1, 2]


def test_a_lapsing_lease_wakes_a_waiter(db_path: Path) -> None:
    """No event marks a lease lapsing: the waiter wakes for its time (real clock, the
    shortest lease the settings allow)."""
    from workq.services.runtime import open_queue

    queue = open_queue(Settings(db_path=db_path, lease_seconds=5), migrate=True)
    try:
        issues.create(queue, title="held by a dead agent")
        claims.claim(queue, 1, Authority.of({"dead"}))
        got = waiting.until_found(
            queue, lambda: claims.claim_next(queue, Authority.of({"alive"})), LONG
        )
        assert got is not None and got.previous_holder == "dead" and got.fence == 2
    finally:
        queue.db.dispose()


def test_a_watcher_of_every_change_wakes_for_a_claim(queue: Queue, settings: Settings) -> None:
    """``workq watch`` prints every change: its waiter wakes for a claim, which a waiter
    for work sleeps through."""
    from workq.services.runtime import open_queue

    other = open_queue(settings)
    try:
        issues.create(other, title="to claim")
        with (
            waiting.Waiter(queue, LONG, every_change=True) as watcher,
            waiting.Waiter(queue, LONG) as for_work,
        ):
            seen, work = watcher.mark(), for_work.mark()
            claims.claim(other, 1, Authority.of({"someone"}))
            assert watcher.sleep(seen, LONG)
            assert not for_work.sleep(work, 1.0)
    finally:
        other.db.dispose()
