"""Through a real ``workq serve`` subprocess with the SDK's stdio client, in
both protocol eras."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.conftest import PG_URL, drop_pg_database, fresh_pg_database
from tests.server.conftest import (
    CALL_TIMEOUT,
    EVERYTHING_LOCAL,
    call_error,
    call_ok,
    error_of,
    serve_argv,
    stdio_server,
    text,
)
from workq.db import sqlite

pytestmark = pytest.mark.anyio

MODES = ["legacy", "auto"]
TEE = Path(__file__).with_name("stdout_tee.py")


@pytest.mark.parametrize("mode", MODES)
async def test_the_claim_loop_over_stdio(db: Path, mode: str) -> None:
    with anyio.fail_after(60):
        async with stdio_server(db, mode=mode) as client:
            modern = client.protocol_version >= "2026"
            assert modern == (mode == "auto"), client.protocol_version
            assert client.server_info is None or client.server_info.name == "workq"
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"issue_create", "issue_ready", "issue_claim_next", "issue_heartbeat"} <= names
            await call_ok(client, "issue_create", title="first", priority="high")
            ready = await call_ok(client, "issue_ready")
            assert json.loads(text(ready))["title"] == "first"
            assert text(await call_ok(client, "issue_claim", number=1)) == "Claimed issue #1"
            refused = await call_error(client, "issue_claim", number=1, run_id="someone-else")
            assert "ALREADY_CLAIMED" in text(refused)
            assert error_of(refused)["code"] == "ALREADY_CLAIMED"
            assert text(await call_ok(client, "issue_complete", number=1)) == "Completed issue #1"
            assert text(await call_ok(client, "issue_ready")) == "No ready issues available"


async def test_the_run_id_is_shown_on_stderr_and_claims_with_it(db: Path, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with anyio.fail_after(60):
        async with stdio_server(db, errlog=log) as client:
            await call_ok(client, "issue_create", title="mine")
            await call_ok(client, "issue_claim", number=1)
            got = await call_ok(client, "issue_get", number=1)
    found = re.search(r"as run id (\S+)", log.read_text())
    assert found, log.read_text()
    assert got.structured_content is not None
    assert got.structured_content["claimed_by"] == found.group(1)

    async with stdio_server(db, "--run-id", "autopilot_main", errlog=log) as client:
        claimed = await call_ok(client, "issue_claim_next")
        assert claimed.structured_content is not None
        assert claimed.structured_content == {"claimed": False}
    assert "as run id autopilot_main" in log.read_text()


@pytest.mark.parametrize("mode", MODES)
async def test_every_line_on_stdout_is_json_rpc(db: Path, tmp_path: Path, mode: str) -> None:
    copy = tmp_path / "stdout.jsonl"
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            str(TEE),
            str(copy),
            sys.executable,
            *serve_argv("--toolsets", EVERYTHING_LOCAL, db=db),
        ],
        cwd=tmp_path,
    )
    with (tmp_path / "stderr.log").open("w") as errlog, anyio.fail_after(60):
        async with Client(stdio_client(params, errlog=errlog), mode=mode) as client:
            await client.list_tools()
            await call_error(client, "issue_create", title="a\nmultiline title is refused")
            await call_ok(client, "issue_create", title="a title")
            await call_error(client, "issue_get", number="x")
            await call_error(client, "issue_get", number=42)
            await call_error(client, "no_such_tool")
            await call_ok(client, "issue_search", query="title")
            await client.read_resource("workq://stats")
            await client.get_prompt("autopilot", {})
    lines = copy.read_bytes().splitlines()
    assert len(lines) >= 8
    for line in lines:
        message = json.loads(line)
        assert message["jsonrpc"] == "2.0", line
        assert {"result", "error", "method"} & set(message), line


async def test_leases_of_claims_made_here_are_renewed_while_the_server_runs(db: Path) -> None:
    env = {"WORKQ_LEASE_SECONDS": "5"}
    with anyio.fail_after(60):
        async with stdio_server(db, "--run-id", "keeper", env=env) as client:
            await call_ok(client, "issue_create", title="long task")
            await call_ok(client, "issue_claim", number=1)
            first = _lease(db)
            # The server renews every lease_seconds / 3: wait for the lease to move.
            with anyio.fail_after(15):
                while _lease(db) == first:
                    await anyio.sleep(0.2)
            assert _lease(db) > first


def _lease(db: Path) -> str:
    with sqlite.connect(f"file:{db}?mode=ro", uri=True) as conn:
        row = conn.execute("SELECT lease_expires_at FROM issues WHERE number = 1").fetchone()
    return str(row[0])


def test_refuses_unknown_toolsets_before_serving(db: Path) -> None:
    done = subprocess.run(
        [sys.executable, *serve_argv("--toolsets", "core,bogus", db=db)],
        capture_output=True,
        text=True,
        timeout=CALL_TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert "unknown toolset or profile 'bogus'" in done.stderr
    assert "profiles: issue-priority, github-tools, agit, workflow-server" in done.stderr


def test_starting_the_server_imports_no_database_or_cli_code(db: Path) -> None:
    probe = (
        "import sys\n"
        "from workq.config import Settings\n"
        "from workq.server.app import build_server\n"
        f"build_server(Settings(db_path={str(db)!r}, toolsets={EVERYTHING_LOCAL!r}))\n"
        "print(sorted(m for m in ('sqlalchemy', 'alembic', 'typer') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=CALL_TIMEOUT
    )
    assert done.stdout.strip() == "[]", done.stderr


async def test_issues_db_and_the_default_file_are_honoured(tmp_path: Path) -> None:
    chosen = tmp_path / "chosen.db"
    for env, expected in (({"ISSUES_DB": str(chosen)}, chosen), ({}, tmp_path / "autopilot.db")):
        params = StdioServerParameters(
            command=sys.executable, args=serve_argv(), env=env, cwd=tmp_path
        )
        with (tmp_path / "err.log").open("a") as errlog, anyio.fail_after(60):
            async with Client(stdio_client(params, errlog=errlog)) as client:
                await call_ok(client, "issue_create", title="where am I")
        assert expected.exists()


@pytest.mark.postgres
@pytest.mark.skipif(PG_URL is None, reason="set WORKQ_TEST_PG_URL to run against PostgreSQL")
async def test_the_claim_loop_over_stdio_on_postgresql(tmp_path: Path) -> None:
    assert PG_URL is not None
    url = fresh_pg_database(PG_URL)
    try:
        params = StdioServerParameters(
            command=sys.executable,
            args=serve_argv("--migrate", url=url),
            cwd=tmp_path,
        )
        with (tmp_path / "err.log").open("w") as errlog, anyio.fail_after(60):
            async with Client(stdio_client(params, errlog=errlog)) as client:
                await call_ok(client, "issue_create", title="on postgres")
                claimed = await call_ok(client, "issue_claim_next")
                assert text(claimed).startswith("Claimed issue #1: on postgres")
                assert text(await call_ok(client, "issue_complete", number=1)) == (
                    "Completed issue #1"
                )
        assert "workq:***@" in (tmp_path / "err.log").read_text()  # the password is hidden
    finally:
        drop_pg_database(PG_URL, url)
