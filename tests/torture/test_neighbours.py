"""Every long-running workq process keeps its SQLite locks while its neighbours come and go.

For each mode that runs for a long time (``workq serve`` over stdio and over HTTP, with
``--board``, with ``--sync-github``, with ``--workers 2``, ``workq board`` alone, ``workq
sync github --watch``), one process runs on a SQLite file and writes through its own face;
meanwhile ``workq create`` commands and another ``workq serve`` (real processes) come, write
and exit. After each of them exits, the -wal and -shm files are still the ones the
long-running process had (the same inodes): no neighbour took itself for the file's last
user, checkpointed and deleted them under it. At the end, everything stopped, the file is
whole and holds every issue whose creation was acknowledged.

Issue 39: a process that opened the database file outside SQLite (to read its header, for a
second ``Database`` of the same file: the board's, the mirror's) while its connections were
live lost its POSIX locks. The next neighbour to close its last connection deleted the WAL
under it, and the file was left corrupt.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractContextManager, asynccontextmanager, closing, nullcontext
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client

from tests.board.conftest import board_server
from tests.conftest import migrated_sqlite
from tests.github_fake.server import FakeGitHub
from tests.storage import assert_intact, side_files
from tests.torture.servers import CALL_TIMEOUT, RawServer, http, stdio, text_of
from tests.workq_cli import WORKQ
from workq.config import Settings
from workq.db import sqlite
from workq.services.queue import issues
from workq.services.runtime import open_queue

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

REPO = "acme/widgets"  # the fake GitHub's repository
SEED = "the first issue"
CLI_WRITERS = 3  # `workq create` processes, one after another
BESIDE_WRITES = 3  # issues the other `workq serve` creates before it exits
WAIT = 60.0  # a bound on every wait, never a measure
BOARD_ACT = {"x-workq-board": "1", "x-workq-actor": "neighbours"}

# One write through the long-running process's own face; answers how many issues it
# created (a board or a mirror creates none).
Write = Callable[[str], Awaitable[int]]

MODES = {
    "serve": ("serve",),
    "serve-http": ("serve", "--http"),
    "serve-http-board": ("serve", "--http", "--board"),
    "serve-sync-github": ("serve", "--sync-github", REPO),
    "serve-http-workers-2": ("serve", "--http", "--workers", "2"),
    "board": ("board",),
    "sync-github-watch": ("sync", "github", "--repo", REPO, "--watch"),
}


def _mcp(client: Client) -> Write:
    async def write(title: str) -> int:
        made = await client.call_tool("issue_create", {"title": title})
        assert not made.is_error, text_of(made)
        return 1

    return write


def _board(client: httpx2.AsyncClient, board: str) -> Write:
    """A comment on issue #1 from the board's page."""

    async def write(title: str) -> int:
        said = await client.post(
            f"{board}/api/issues/1/comment", json={"body": title}, headers=BOARD_ACT
        )
        assert said.status_code == 200, said.text
        return 0

    return write


async def on_github(fake: FakeGitHub, title: str) -> None:
    """Once the mirror has pushed the issue ``title`` (it writes down what it pushed)."""
    await _until(lambda: any(i["title"] == title for i in fake.issues()), f"{title} pushed")


def _mirror(fake: FakeGitHub) -> Write:
    """The mirror has no face: its writes are its own, once it has pushed the first issue."""

    async def write(title: str) -> int:
        await on_github(fake, SEED)
        return 0

    return write


async def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, f"not within {WAIT:.0f} s: {what}"
        await anyio.sleep(0.05)


@asynccontextmanager
async def long_running(mode: str, db: Path, fake: FakeGitHub | None) -> AsyncIterator[Write]:
    """The long-running process of ``mode`` on ``db``, started; yields its ``Write``."""
    gh = {}
    if fake is not None:
        gh = {"GITHUB_TOKEN": fake.token, "GITHUB_API_URL": fake.url, "WORKQ_GITHUB_PACE": "0"}
    args = MODES[mode]
    if mode in ("serve", "serve-sync-github"):
        async with stdio(db, *args[1:], log=db.with_suffix(".long.log"), **gh) as client:
            yield _mcp(client)
    elif mode.startswith("serve-http"):
        with http(db, *args[2:], **gh) as (url, _):
            async with Client(url, read_timeout_seconds=CALL_TIMEOUT) as client:
                if mode != "serve-http-board":
                    yield _mcp(client)
                    return
                async with httpx2.AsyncClient(timeout=CALL_TIMEOUT) as browser:
                    board = _board(browser, url.removesuffix("/mcp") + "/board")

                    async def both(title: str) -> int:
                        return await _mcp(client)(title) + await board(title)

                    yield both
    elif mode == "board":
        with board_server(db) as url:
            async with httpx2.AsyncClient(timeout=CALL_TIMEOUT) as browser:
                yield _board(browser, url)
    else:
        assert fake is not None
        log = db.with_suffix(".long.log")
        with log.open("ab") as out:
            process = await anyio.open_process(
                [sys.executable, "-m", "workq.cli.main", "--db", str(db), *args],
                stdin=None,
                stdout=out,
                stderr=out,
                env={**os.environ, **gh},
            )
            try:
                yield _mirror(fake)
                assert process.returncode is None, log.read_text()
            finally:
                if process.returncode is None:
                    process.terminate()  # it finishes its pass and stops
                with anyio.fail_after(WAIT):
                    await process.wait()
        assert process.returncode == 0, log.read_text()


async def cli_create(db: Path, title: str) -> int:
    """``workq create`` in a process of its own; 1 once it says it created the issue."""
    done = await anyio.run_process(
        [WORKQ, "--db", str(db), "create", title], check=False, env=os.environ.copy()
    )
    assert done.returncode == 0, done.stderr.decode()
    assert b"Created issue #" in done.stdout, done.stdout.decode()
    return 1


def serve_beside(db: Path) -> int:
    """Another ``workq serve`` over stdio: it creates a few issues, then exits."""
    server = RawServer(db)
    try:
        server.initialize()
        for n in range(BESIDE_WRITES):
            reply = server.call("issue_create", title=f"beside {n}")
            assert not reply["result"].get("isError"), reply
    except BaseException:
        server.kill()
        raise
    assert server.close() == 0, db.with_suffix(".raw.log").read_text()
    return BESIDE_WRITES


def count_issues(db: Path) -> int:
    with closing(sqlite.connect(db)) as conn:
        (count,) = conn.execute("SELECT count(*) FROM issues").fetchone()
    return int(count)


@pytest.mark.parametrize("mode", list(MODES))
async def test_the_wal_files_outlive_every_neighbour(
    mode: str, tmp_path: Path, sqlite_template: Path
) -> None:
    db = migrated_sqlite(sqlite_template, tmp_path / "queue.db")
    seeded = open_queue(Settings(db_path=db), migrate=False)
    try:
        issues.create(seeded, title=SEED)  # something for the board to act on
    finally:
        seeded.db.dispose()  # no connection of this process while the others run
    assert side_files(db) == {}
    acknowledged = 1
    github: AbstractContextManager[FakeGitHub | None] = (
        FakeGitHub() if "github" in mode else nullcontext()
    )
    with github as fake:
        async with long_running(mode, db, fake) as write:
            acknowledged += await write("the long-running process's first")
            held = side_files(db)
            assert set(held) == {"-wal", "-shm"}, f"{mode} has no WAL files open"

            def kept(after: str) -> None:
                assert side_files(db) == held, (
                    f"{after} exited and the -wal/-shm files of `workq {' '.join(MODES[mode])}` "
                    f"went: {held} -> {side_files(db)}"
                )

            for n in range(CLI_WRITERS):
                acknowledged += await cli_create(db, f"from the CLI {n}")
                kept(f"`workq create` number {n + 1}")
                acknowledged += await write(f"the long-running process's, after the CLI {n}")
            acknowledged += await anyio.to_thread.run_sync(serve_beside, db)
            kept("another `workq serve`")
            acknowledged += await write("the long-running process's last")
            if fake is not None:  # the mirror wrote too (`serve` paces it: 1 s a write)
                await on_github(fake, SEED)
    assert_intact(db)
    assert count_issues(db) == acknowledged
