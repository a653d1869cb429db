"""A third-party client of the Tasks extension: FastMCP 4's ``Client`` (``fastmcp[tasks]``,
a test dependency) over stdio to real ``workq serve`` processes. It declares the extension
on every request and resolves a task by polling ``tasks/get``, so its caller sees the
tool's answer: the tests read the tasks table to know the server did make a task.

- a claim that waits is a task, completed when another agent creates the work;
- ``call_tool_task(...).cancel()`` of a waiting claim claims nothing, then or later;
- a merge in a repository that lands through pull requests is a task completed when the
  GitHub worker (``workq sync github --watch``) has landed it on the fake GitHub;
- a legacy FastMCP connection (``mode="legacy"``) waits inside the call, as before.

They skip only when fastmcp cannot be imported (``.ci/run`` installs it: requirements/dev.lock).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

try:
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport
    from fastmcp_tasks.client import call_tool_task
except ImportError:  # pragma: no cover - CI installs it
    pytest.skip(
        "fastmcp[tasks] is not installed (a test dependency: pip install 'fastmcp[tasks]==4.1.4')",
        allow_module_level=True,
    )

from mcp.types import TextContent
from sqlalchemy import select

from tests.github.landing_helpers import make_origin, sync_worker, worker_log
from tests.github.tools_helpers import git
from tests.github_fake.server import FakeGitHub
from tests.server.raw_modern import SRC
from workq.config import Settings
from workq.db.tables import tasks
from workq.services.handle import Queue
from workq.services.queue import issues
from workq.services.runtime import open_queue

pytestmark = pytest.mark.anyio
LIMIT = 60.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def where(settings: Settings) -> list[str]:
    if settings.database_url:
        return ["--database-url", settings.database_url]
    return ["--db", str(settings.db_path)]


@pytest.fixture
def queue_of(settings: Settings) -> Iterator[Queue]:
    q = open_queue(settings)
    yield q
    q.db.dispose()


def transport(where: list[str], log: Path, run_id: str, *args: str) -> StdioTransport:
    """``workq serve ARGS`` (this tree's code) as ``run_id``, ended with the client."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", str(log.parent)),
        "PYTHONPATH": SRC,
        "WORKQ_RUN_ID": run_id,
    }
    return StdioTransport(
        sys.executable,
        ["-m", "workq.cli.main", *where, "serve", *args],
        env=env,
        cwd=str(log.parent),
        keep_alive=False,
        log_file=log,
    )


@asynccontextmanager
async def agent(
    where: list[str], tmp_path: Path, run_id: str, *args: str
) -> AsyncIterator[Client[StdioTransport]]:
    client = Client(transport(where, tmp_path / f"{run_id}.log", run_id, *args), timeout=LIMIT)
    async with client:
        yield client


def task_rows(q: Queue) -> list[Any]:
    with q.db.read() as conn:
        return list(conn.execute(select(tasks).order_by(tasks.c.created_at)).all())


async def test_a_fastmcp_client_claims_through_a_task_while_another_agent_creates_work(
    where: list[str], tmp_path: Path, queue_of: Queue
) -> None:
    async with agent(where, tmp_path, "run-a") as a, agent(where, tmp_path, "run-b") as b:

        async def create_later() -> None:
            while not task_rows(queue_of):  # a's call became a task: now the work comes
                await asyncio.sleep(0.05)
            await b.call_tool("issue_create", {"title": "work", "description": "do it"})

        later = asyncio.create_task(create_later())
        started = time.monotonic()
        with anyio.fail_after(LIMIT):
            claimed = await a.call_tool("issue_claim_next", {"wait_seconds": 120})
        await later
        assert time.monotonic() - started < 60  # completed by the work, not the wait's end
        assert not claimed.is_error
        assert claimed.structured_content is not None
        assert claimed.structured_content["number"] == 1
        assert claimed.structured_content["claimed_by"] == "run-a"
        said = claimed.content[0]
        assert isinstance(said, TextContent) and said.text.startswith("Claimed issue #1: work")
    (row,) = task_rows(queue_of)  # the server made a task, and the client read its answer
    assert (row.kind, row.owner, row.status) == ("claim_next", "run-a", "completed")
    assert (row.number, row.fence) == (1, 1) and row.read_at is not None
    assert issues.get(queue_of, 1).claimed_by == "run-a"


async def test_cancelling_a_waiting_claim_through_its_handle_claims_nothing(
    where: list[str], tmp_path: Path, queue_of: Queue
) -> None:
    async with agent(where, tmp_path, "run-a") as a, agent(where, tmp_path, "run-b") as b:
        handle = await call_tool_task(a, "issue_claim_next", {"wait_seconds": 120})
        assert (await handle.status()).status == "working"
        await handle.cancel()
        final = await handle.wait(timeout=LIMIT)
        assert final.status == "cancelled"
        await b.call_tool("issue_create", {"title": "left alone"})
        await asyncio.sleep(3.0)  # longer than the waker's idle round: it would have claimed
        assert (await handle.status()).status == "cancelled"
        shown = await b.call_tool("issue_get", {"number": 1})
        assert shown.structured_content is not None
        assert shown.structured_content["claimed_by"] is None
        # Another agent claims it as usual.
        taken = await b.call_tool("issue_claim_next", {})
        assert taken.structured_content is not None
        assert taken.structured_content["claimed_by"] == "run-b"
    (row,) = task_rows(queue_of)
    assert (row.id, row.status, row.number) == (handle.task_id, "cancelled", None)


async def test_a_fastmcp_client_lands_through_a_pull_request_through_a_task(
    tmp_path: Path,
) -> None:
    with FakeGitHub() as fake:
        origin = make_origin(tmp_path, fake)
        number = origin.issue("Add a feature", "feature.py", "x = 1\n", run_id="run-a")
        db = tmp_path / "queue.db"
        worker = sync_worker(db, fake, "--watch")
        try:
            where = ["--db", str(db)]
            serve = ("--toolsets", "default,workspaces", "--tests-gate", "trust")
            async with agent(where, tmp_path, "run-a", *serve) as a:
                with anyio.fail_after(LIMIT):
                    merged = await a.call_tool("issue_merge", {"number": number})
            assert worker.poll() is None, worker_log(db)
        finally:
            os.killpg(worker.pid, signal.SIGTERM)
            worker.wait(timeout=30)
        main = git(origin.bare, "rev-parse", "main")
        assert not merged.is_error and merged.structured_content is not None
        data = merged.structured_content
        assert data["merged"] is True and data["commit"] == main
        assert data["landing"]["state"] == "landed" and data["landing"]["merge_sha"] == main
        assert "feature.py" in origin.main_files()
        (pull,) = fake.pulls()
        assert pull["merged"]
        (row,) = task_rows(origin.q)
        assert (row.kind, row.owner, row.status) == ("landing", "run-a", "completed")
        assert row.read_at is not None
        origin.q.db.dispose()


async def test_a_legacy_fastmcp_connection_waits_in_the_call_as_before(
    where: list[str], tmp_path: Path, queue_of: Queue
) -> None:
    log = tmp_path / "legacy.log"
    client = Client(transport(where, log, "run-a"), timeout=LIMIT, mode="legacy")
    async with client:
        started = time.monotonic()
        answer = await client.call_tool("issue_claim_next", {"wait_seconds": 1})
        assert time.monotonic() - started >= 0.9
        assert answer.structured_content == {"claimed": False}
        with pytest.raises(Exception, match="did not run as a task"):
            await call_tool_task(client, "issue_claim_next", {"wait_seconds": 1})
    assert task_rows(queue_of) == []
