"""One run id, one live server, through two real ``workq serve`` processes on one database
(issue 23, item 10): both pass seed 002's literal ``run_id="autopilot_main"``. The second is
refused with the first named, and changes nothing; once the first exits (or is killed) the
run id and its claims pass to whoever names it next. On SQLite and PostgreSQL."""

from __future__ import annotations

import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.server.conftest import CALL_TIMEOUT, call_ok, error_of, serve_argv, text
from tests.storage import assert_intact_at
from tests.torture.servers import RawServer
from workq.config import Settings
from workq.db import sqlite
from workq.services.queue import issues, listing, run_ids
from workq.services.runtime import open_queue

pytestmark = pytest.mark.anyio
RUN = "autopilot_main"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def serve(settings: Settings, where: Path) -> AsyncIterator[Client]:
    params = StdioServerParameters(command=sys.executable, args=_argv(settings), cwd=where)
    with (where / "serve.stderr").open("a") as log:
        async with Client(stdio_client(params, errlog=log), read_timeout_seconds=CALL_TIMEOUT) as c:
            yield c


def _state(settings: Settings) -> list[tuple[int, str, str | None]]:
    q = open_queue(settings)
    try:
        page = listing.list_issues(q, limit=10)
        return [(i.number, i.status.value, i.claimed_by) for i in page.items]
    finally:
        q.db.dispose()


async def test_two_live_servers_cannot_both_act_under_one_run_id(
    settings: Settings, tmp_path: Path
) -> None:
    q = open_queue(settings)
    for title in ("first", "second"):
        issues.create(q, title=title)
    q.db.dispose()
    with anyio.fail_after(120):
        async with serve(settings, tmp_path) as a, serve(settings, tmp_path) as b:
            assert text(await call_ok(a, "issue_claim", number=1, run_id=RUN)) == (
                "Claimed issue #1"
            )
            before = _state(settings)
            for tool, arguments in (
                ("issue_claim", {"number": 2, "run_id": RUN}),
                ("issue_complete", {"number": 1, "run_id": RUN}),
                ("issue_release", {"number": 1, "run_id": RUN}),
            ):
                refused = await b.call_tool(tool, arguments)
                error = error_of(refused)
                assert error["code"] == "RUN_ID_IN_USE", text(refused)
                assert f"run id '{RUN}' is in use by another live caller" in error["error"]
            assert _state(settings) == before  # nothing changed
            await call_ok(b, "issue_claim", number=2, run_id="autopilot_b")  # its own: fine
            assert text(await call_ok(a, "issue_complete", number=1, run_id=RUN)) == (
                "Completed issue #1"
            )
        # a exited and gave the run id up: the next server acts under it at once.
        async with serve(settings, tmp_path) as c:
            await call_ok(c, "issue_release", number=2, run_id="autopilot_b")
            assert text(await call_ok(c, "issue_claim", number=2, run_id=RUN)) == (
                "Claimed issue #2"
            )


async def test_a_killed_servers_run_id_passes_to_the_next_server_at_once(
    settings: Settings, tmp_path: Path
) -> None:
    q = open_queue(settings)
    issues.create(q, title="left behind")
    q.db.dispose()
    killed = _raw(settings, tmp_path)
    try:
        killed.initialize()
        assert "Claimed issue #1" in _text(killed.call("issue_claim", number=1, run_id=RUN))
    finally:
        killed.kill()
    with anyio.fail_after(120):
        async with serve(settings, tmp_path) as next_server:
            done = await call_ok(next_server, "issue_complete", number=1, run_id=RUN)
            assert text(done) == "Completed issue #1"
    assert_intact_at(settings.url)


async def test_a_server_stopped_past_its_lease_finds_its_run_id_taken(
    settings: Settings, tmp_path: Path
) -> None:
    """A server is stopped (SIGSTOP) past its 5 s lease and another server takes its run
    id meanwhile: resumed, it refuses to act under the run id (and stops renewing its
    claims) instead of completing what is now the other server's."""
    q = open_queue(settings)
    issues.create(q, title="x")
    q.db.dispose()
    server = _raw(settings, tmp_path, WORKQ_LEASE_SECONDS="5", WORKQ_RUN_ID="shared")
    try:
        server.initialize()
        assert "Claimed issue #1" in _text(server.call("issue_claim", number=1))
        await _stop_between_writes(server, settings)
        try:
            await anyio.sleep(6)  # past its lease: its hold on "shared" lapsed
            q = open_queue(settings)
            try:
                run_ids.bind(q, "shared", "elsewhere.example:1:other")
            finally:
                q.db.dispose()
        finally:
            server.process.send_signal(signal.SIGCONT)
        answer = _text(server.call("issue_complete", number=1))
        assert "RUN_ID_IN_USE" in answer, answer
    finally:
        server.kill()
    q = open_queue(settings)
    try:
        assert issues.get(q, 1).status.value == "in_progress"
    finally:
        q.db.dispose()
    assert_intact_at(settings.url)


async def _stop_between_writes(server: RawServer, settings: Settings) -> None:
    """SIGSTOP the server at a moment it holds no write lock on the SQLite file: stopped in
    the middle of a background write (its lease renewal), it would keep every other writer
    out until resumed, which is SQLite's one writer, not what the test is about."""
    for _ in range(100):
        server.process.send_signal(signal.SIGSTOP)
        if settings.database_url:  # PostgreSQL: no file lock to hold
            return
        probe = sqlite.connect(settings.db_path, timeout=0, isolation_level=None)
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.execute("ROLLBACK")
            return
        except sqlite.dbapi.OperationalError:
            server.process.send_signal(signal.SIGCONT)
            await anyio.sleep(0.05)
        finally:
            probe.close()
    raise AssertionError("the server kept the database's write lock for 5 s")


def _argv(settings: Settings) -> list[str]:
    url = settings.database_url
    return serve_argv(db=None if url else settings.db_path, url=url)


def _raw(settings: Settings, where: Path, **env: str) -> RawServer:
    """A server on plain pipes (its pid to signal), on the test's database."""
    anchor = settings.db_path if not settings.database_url else where / "pg.db"
    return RawServer(anchor, url=settings.database_url, **env)


def _text(reply: dict[str, Any]) -> str:
    return str(reply["result"]["content"][0]["text"])
