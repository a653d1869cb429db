"""The change feed: one look at the events table serves every client; a change made by the
CLI reaches an open board; under 8 agents' loops no change is missed."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from pathlib import Path

import httpx2
import pytest

from tests.board.conftest import board_server, cli
from workq.board.feed import ChangeFeed
from workq.services import board, issues
from workq.services.context import Queue

WAIT = 60.0


def test_one_poll_serves_every_listener(q: Queue) -> None:
    async def scenario() -> None:
        feed = ChangeFeed(lambda: board.last_change(q), lambda after: board.changes(q, after))
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


def test_with_the_database_signal_an_idle_feed_does_not_ask(q: Queue) -> None:
    async def scenario() -> None:
        feed = ChangeFeed(
            lambda: board.last_change(q),
            lambda after: board.changes(q, after),
            signal=q.db.changes,
            tick=0.01,  # the timer a feed without a signal would poll on
        )
        listener = feed.listen()
        await asyncio.wait_for(feed.started.wait(), WAIT)
        asked = feed.queries
        await asyncio.sleep(0.5)  # fifty ticks with nothing written
        assert feed.queries == asked
        await asyncio.to_thread(issues.create, q, title="wakes the feed")
        batch = await asyncio.wait_for(listener.get(), WAIT)
        assert [(c.number, c.kind) for c in batch] == [(1, "created")]
        await feed.stop()

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
        listener = Listener(url, after=board.last_change(q))
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
from workq.services import claims, issues
from workq.services.runtime import open_queue
q = open_queue(Settings(db_path=sys.argv[1]))
me = sys.argv[2]
for i in range(int(sys.argv[3])):
    issues.create(q, title=f"{me} task {i}", actor=me)
    got = claims.claim_next(q, me)
    if got is not None:
        claims.complete(q, got.number, [me])
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
        while batch := board.changes(q, after):
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
