"""Stalls through the real faces: a `workq serve` process over stdio whose watch finds the
stalled claim of its own connected agent (whose lease it keeps renewing), shows it in
issue_get and queues the notice; the CLI shows it in `workq show` and `workq agents` and
sets the policies."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from sqlalchemy import select

from tests.conftest import ENGINES, PG_URL, drop_pg_database, fresh_pg_database
from tests.server.conftest import call_ok
from tests.workq_cli import workq
from workq.config import Settings
from workq.db.tables import notices
from workq.services.notices import sinks
from workq.services.runtime import open_queue


def _settings(where: list[str]) -> Settings:
    return (
        Settings(database_url=where[1])
        if where[0] == "--database-url"
        else Settings(db_path=Path(where[1]))
    )


def _subscribe(where: list[str], events: str) -> None:
    q = open_queue(_settings(where))
    try:
        sinks.add(q, "people", command="true", events=events)
    finally:
        q.db.dispose()


def _queued(where: list[str]) -> list[tuple[str, int | None]]:
    q = open_queue(_settings(where))
    try:
        with q.db.read() as conn:
            return [tuple(r) for r in conn.execute(select(notices.c.event, notices.c.number))]
    finally:
        q.db.dispose()


@pytest.fixture(params=ENGINES)
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[str]]:
    """The database option of a new database: a SQLite file, or one on PostgreSQL."""
    if request.param == "sqlite":
        yield ["--db", str(tmp_path / "q.db")]
        return
    assert PG_URL is not None
    url = fresh_pg_database(PG_URL)
    try:
        yield ["--database-url", url]
    finally:
        drop_pg_database(PG_URL, url)


@pytest.mark.anyio
async def test_a_served_agent_that_stops_working_is_found_stalled(
    where: list[str], tmp_path: Path
) -> None:
    assert workq(*where, "db", "upgrade").returncode == 0
    assert workq(*where, "policy", "set", "stall_after", "2s").returncode == 0
    _subscribe(where, "stalled")
    env = {"WORKQ_WATCH_SECONDS": "0.2", "WORKQ_LEASE_SECONDS": "5"}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "workq.cli.main", *where, "serve", "--run-id", "agent-a"],
        env=env,
        cwd=tmp_path,
    )
    with (tmp_path / "err.log").open("w") as errlog, anyio.fail_after(60):
        async with Client(stdio_client(params, errlog=errlog)) as client:
            await call_ok(client, "issue_create", title="Parser")
            await call_ok(client, "issue_claim", number=1)
            got = await call_ok(client, "issue_get", number=1)
            assert "stalled_since" not in (got.structured_content or {})
            deadline = time.monotonic() + 30
            while True:
                got = await call_ok(client, "issue_get", number=1)
                if (got.structured_content or {}).get("stalled_since"):
                    break
                assert time.monotonic() < deadline, "the watch never found the stall"
                await anyio.sleep(0.2)
            # The server renewed the lease all along: the claim is live, and stalled.
            shown = workq(*where, "show", "1")
            assert "stalled" in shown.stdout and "workq release 1 --force" in shown.stdout
            agents = workq(*where, "agents", "--json")
            assert json.loads(agents.stdout)[0]["stalled"] == [1]
            # issue_get computes the stall when asked; the watch records its notice on its
            # next sweep (every 0.2 s here), which may come just after.
            while not _queued(where):
                assert time.monotonic() < deadline, "the watch never recorded the stall"
                await anyio.sleep(0.2)
            assert _queued(where) == [("stalled", 1)]
            # A progress note ends the stall.
            await call_ok(client, "issue_heartbeat", number=1, note="parser half done")
            got = await call_ok(client, "issue_get", number=1)
            assert "stalled_since" not in (got.structured_content or {})


def test_policies_from_the_cli_with_bad_input_changing_nothing(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    workq("--db", db, "init")
    for args, said in [
        (["stall_after", "10x"], "stall_after='10x' is not valid"),
        (["stall_policy", "explode"], "stall_policy takes tell or release"),
        (["max_landing_rounds", "0"], "a whole number from 1 to 100"),
        (["nope", "1"], "no policy 'nope'"),
        (["stall_after", "5m", "--repo", "ghost"], "repository 'ghost' is not registered"),
    ]:
        done = workq("--db", db, "policy", "set", *args)
        assert done.returncode != 0 and said in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
    listed = json.loads(workq("--db", db, "policy", "list", "--json").stdout)
    assert {p["scope"] for p in listed} == {"default"}
    assert workq("--db", db, "policy", "set", "stall_policy", "RELEASE").returncode == 0
    listed = {
        p["name"]: p for p in json.loads(workq("--db", db, "policy", "list", "--json").stdout)
    }
    assert (listed["stall_policy"]["value"], listed["stall_policy"]["scope"]) == (
        "release",
        "queue",
    )
    assert "tell (default)" in workq("--db", db, "policy", "unset", "stall_policy").stdout
