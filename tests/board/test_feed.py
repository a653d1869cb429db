"""The change feed: one look at the events table serves every client; a change made by the
CLI reaches an open board; under 8 agents' loops no change is missed."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.board.conftest import board_server, cli
from workq.board import feed as feed_module
from workq.board.feed import ChangeFeed, Signal
from workq.services.handle import Queue
from workq.services.queue import issues, overview

WAIT = 60.0


def test_one_poll_serves_every_listener(q: Queue) -> None:
    async def scenario() -> None:
        feed = ChangeFeed(lambda: overview.last_change(q), lambda after: overview.changes(q, after))
        listeners = [feed.listen() for _ in range(10)]
        await feed.stop()  # the test drives the polls itself
        for queue in listeners:
            feed._listeners.add(queue)
        await feed.poll()
        assert feed.queries == 1 and all(queue.empty() for queue in listeners)
        await asyncio.to_thread(issues.create, q, title="one")
        await asyncio.to_thread(issues.create, q, title="two")
        await feed.poll()
        assert feed.queries == 3  # the newest id, then the new events once, for all ten
        batches = [queue.get_nowait() for queue in listeners]
        assert {tuple((c.number, c.kind) for c in b) for b in batches} == {
            ((1, "created"), (2, "created"))
        }
        await feed.poll()
        assert feed.queries == 4

    asyncio.run(scenario())


class WatchedSignal:
    """The database's change signal, passed through, with a record of how the feed waits on
    it: each wait's timeout, and whether the signal (not the timeout) ended it."""

    def __init__(self, signal: Signal) -> None:
        self._signal = signal
        self.timeouts: list[float] = []
        self.moved: list[bool] = []
        self.changed = threading.Condition()

    def version(self) -> int:
        return self._signal.version()

    def watching(self) -> AbstractContextManager[Any]:
        return self._signal.watching()

    def wait_past(self, seen: int, timeout: float) -> bool:
        with self.changed:
            self.timeouts.append(timeout)
            self.changed.notify_all()
        moved = self._signal.wait_past(seen, timeout)
        with self.changed:
            self.moved.append(moved)
            self.changed.notify_all()
        return moved

    def until(self, begun: int, ended: int = 0) -> None:
        """Until the feed has begun ``begun`` waits on the signal and ``ended`` have ended."""
        with self.changed:
            assert self.changed.wait_for(
                lambda: len(self.timeouts) >= begun and len(self.moved) >= ended, WAIT
            ), (self.timeouts, self.moved)


def test_with_the_database_signal_an_idle_feed_does_not_ask(
    q: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The look a feed with a signal takes anyway, pushed beyond the test: only a write wakes it.
    monkeypatch.setattr(feed_module, "SIGNAL_TIMEOUT", WAIT)
    signal = WatchedSignal(q.db.changes)

    async def scenario() -> None:
        feed = ChangeFeed(
            lambda: overview.last_change(q),
            lambda after: overview.changes(q, after),
            signal=signal,
            tick=0.01,  # the timer a feed without a signal would poll on
        )
        listener = feed.listen()
        await asyncio.wait_for(feed.started.wait(), WAIT)
        await asyncio.to_thread(signal.until, 1)
        asked = feed.queries
        # Idle, it sleeps on the signal, not on its tick: no look until something is written.
        assert (signal.timeouts, signal.moved) == ([WAIT], [])
        await asyncio.to_thread(issues.create, q, title="wakes the feed")
        batch = await asyncio.wait_for(listener.get(), WAIT)
        assert [(c.number, c.kind) for c in batch] == [(1, "created")]
        await asyncio.to_thread(signal.until, 2, 1)
        assert signal.moved == [True]  # woken by the write
        assert feed.queries == asked + 2  # one look: the newest id, then the new event
        await feed.stop()
        # Its last wait goes on in a thread of its own, which a write ends.
        await asyncio.to_thread(issues.create, q, title="ends the last wait")
        await asyncio.to_thread(signal.until, 2, 2)

    with q.db.changes.watching():  # the signal follows the database after the feed stopped
        asyncio.run(scenario())


class Listener(threading.Thread):
    """An SSE client of the board: every event id it was told about."""

    def __init__(self, url: str, after: int = 0) -> None:
        super().__init__(daemon=True)
        self.url = f"{url}/events?after={after}"
        self.seen: set[int] = set()
        self.numbers: set[int] = set()
        self.changed = threading.Condition()
        self.connected = threading.Event()
        self.stop = threading.Event()

    def run(self) -> None:
        # Ends when the board closes the stream (the test stops the board) or on stop.
        with (
            httpx2.Client(timeout=WAIT) as client,
            client.stream("GET", self.url) as response,
        ):
            assert response.status_code == 200
            self.connected.set()
            try:
                for line in response.iter_lines():
                    if self.stop.is_set():
                        return
                    if line.startswith("data: "):
                        with self.changed:
                            for change in json.loads(line[6:]):
                                self.seen.add(change["id"])
                                self.numbers.add(change["number"])
                            self.changed.notify_all()
            except httpx2.RemoteProtocolError:  # the board stopped, its stream cut short
                return

    def wait_for(self, test: object) -> bool:
        with self.changed:
            return self.changed.wait_for(test, timeout=WAIT)  # type: ignore[arg-type]


def test_a_cli_change_reaches_an_open_board(db: Path, q: Queue) -> None:
    issues.create(q, title="already there")
    with board_server(db) as url:
        listener = Listener(url, after=overview.last_change(q))
        listener.start()
        assert listener.connected.wait(WAIT)
        cli(db, "create", "made by the CLI")
        try:
            assert listener.wait_for(lambda: 2 in listener.numbers)
        finally:
            listener.stop.set()
    listener.join(WAIT)
    assert 1 not in listener.numbers  # only what happened after the page was drawn


AGENT = """
import sys
from workq.config import Settings
from workq.domain.authority import Authority
from workq.services.queue import claims, issues
from workq.services.runtime import open_queue
q = open_queue(Settings(db_path=sys.argv[1]))
me = sys.argv[2]
for i in range(int(sys.argv[3])):
    issues.create(q, title=f"{me} task {i}", actor=me)
    got = claims.claim_next(q, Authority.of({me}))
    if got is not None:
        claims.complete(q, got.number, Authority.of({me}))
q.db.dispose()
"""


@pytest.mark.slow
def test_eight_agents_and_no_missed_change(db: Path, q: Queue) -> None:
    with board_server(db) as url:
        listeners = [Listener(url) for _ in range(3)]
        for listener in listeners:
            listener.start()
            assert listener.connected.wait(WAIT)
        agents = [
            subprocess.Popen(
                [sys.executable, "-c", AGENT, str(db), f"agent-{i}", "15"],
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(8)
        ]
        for agent in agents:
            _, err = agent.communicate(timeout=300)
            assert agent.returncode == 0, err
        every: set[int] = set()
        after = 0
        while batch := overview.changes(q, after):
            every.update(c.id for c in batch)
            after = batch[-1].id
        try:
            for listener in listeners:
                assert listener.wait_for(lambda lst=listener: every <= lst.seen)
        finally:
            for listener in listeners:
                listener.stop.set()
        page = httpx2.get(f"{url}/", timeout=WAIT)
    for listener in listeners:
        listener.join(WAIT)
    assert len(every) >= 8 * 15 * 3  # created, claimed, completed
    for listener in listeners:
        assert listener.seen == every
    assert page.status_code == 200
    assert 'data-count="done">120<' in page.text
