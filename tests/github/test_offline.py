"""The queue never waits for GitHub: MCP tools answer while the mirror's GitHub is down or
does not answer, with the sync running in the server's process (``start_background_sync``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.conftest import migrated_sqlite
from tests.github.mirror_helpers import REPO, env_for, markers
from tests.github_fake.server import ControlAPI, FakeGitHub, FakeGitHubProcess
from workq.config import Settings
from workq.github.sync import start_background_sync
from workq.github.worker import Options
from workq.server.app import build_server
from workq.services.runtime import open_queue
from workq.services.sync import sync_status

pytestmark = pytest.mark.anyio
OPTIONS = Options(write_interval=0, backoff_base=0.5, backoff_max=2, poll_interval=0.05)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def settings(tmp_path: Path, sqlite_template: Path) -> Settings:
    # Created and migrated before the server and the sync: a copy of the migrated template.
    db = migrated_sqlite(sqlite_template, tmp_path / "queue.db")
    return Settings(db_path=db, toolsets="all", plans_dir=tmp_path / "p")


def _wait_for(check: Callable[[], bool], seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


async def _call(client: Client, tool: str, **arguments: Any) -> None:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content


def _held(fake: ControlAPI) -> int:
    """How many requests GitHub has held without an answer (a timeout fault)."""
    return sum(1 for request in fake.requests() if request.fault == "timeout")


def _pending(settings: Settings) -> int:
    q = open_queue(settings)
    try:
        return sync_status.status(q).pending
    finally:
        q.db.dispose()


@pytest.fixture
def fake_process() -> Iterator[FakeGitHubProcess]:
    with FakeGitHubProcess() as fake:
        yield fake


async def test_tools_answer_while_github_is_down(
    settings: Settings, fake_process: FakeGitHubProcess
) -> None:
    stop = start_background_sync(
        settings, REPO, env=env_for(fake_process, fake_process.url), options=OPTIONS, timeout=2
    )
    try:
        async with Client(build_server(settings)) as client:
            await _call(client, "issue_create", title="before the outage")
            _wait_for(lambda: len(markers(fake_process)) == 1)
            fake_process.kill()  # GitHub is gone: connections are refused
            for n in range(5):
                await _call(client, "issue_create", title=f"offline {n}")
            await _call(client, "issue_claim", number=2)
            await _call(client, "issue_complete", number=2)
            await _call(client, "issue_update", number=3, title="renamed offline")
            _wait_for(lambda: _pending(settings) == 5)  # waiting for GitHub, none lost
    finally:
        stop()


async def test_tools_answer_while_github_hangs_and_the_mirror_catches_up(
    settings: Settings, fake_github: FakeGitHub
) -> None:
    fake: ControlAPI = fake_github
    stop = start_background_sync(
        settings, REPO, env=env_for(fake_github, fake_github.url), options=OPTIONS, timeout=30
    )
    try:
        # GitHub holds every request without an answer, until the faults are cleared.
        fake.inject_fault("*", "**", kind="timeout", delay=120, count=1000)
        async with Client(build_server(settings)) as client:
            await _call(client, "issue_create", title="n0")
            _wait_for(lambda: _held(fake) == 1)  # the worker is inside that request now
            for n in range(1, 6):
                await _call(client, "issue_create", title=f"n{n}")
            await _call(client, "issue_claim", number=1)
            await _call(client, "issue_claim", number=2)
            await _call(client, "issue_complete", number=1)
            # Every call answered while the worker's one request was still held: GitHub
            # answered nothing, and the worker had not given up on it and tried again.
            assert _held(fake) == 1
            assert fake.issues() == []
            fake.clear_faults()
            _wait_for(lambda: _pending(settings) == 0, seconds=30)
        assert len(fake.issues()) == 6
        assert len(set(markers(fake))) == 6
    finally:
        stop()
