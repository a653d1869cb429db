"""Fixtures for the MCP server: in-process clients and real ``workq serve``
subprocesses, each on its own SQLite file."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult

from tests.conftest import migrated_sqlite
from workq.config import Settings
from workq.server import toolsets
from workq.server.app import WorkqServer, build_server
from workq.server.results import ERROR_META, OBJECT_FAILURES

CALL_TIMEOUT = 30.0
# Every toolset and every profile: what the tests of one server with every tool serve.
# A ``workq serve`` process leaves the GitHub tools out (without a token they refuse to
# start; tests/github starts them against the fake GitHub).
EVERYTHING = ",".join(["all", *toolsets.PROFILES])
EVERYTHING_LOCAL = ",".join(["all", *(p for p in toolsets.PROFILES if p != "github-tools")])


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def serve_argv(*args: str, db: Path | None = None, url: str | None = None) -> list[str]:
    """``python -m workq.cli.main [--db DB | --database-url URL] serve ARGS`` (``workq serve``
    command), without the interpreter."""
    where = ["--db", str(db)] if db is not None else []
    where += ["--database-url", url] if url is not None else []
    return ["-m", "workq.cli.main", *where, "serve", *args]


def server_params(
    db: Path, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> StdioServerParameters:
    """A server in the database's folder, so that nothing (plan files) lands in the repo."""
    return StdioServerParameters(
        command=sys.executable,
        args=serve_argv(*args, db=db),
        env=env,
        cwd=cwd or db.parent,
    )


@asynccontextmanager
async def stdio_server(
    db: Path,
    *args: str,
    mode: Any = "auto",
    env: dict[str, str] | None = None,
    errlog: Path | None = None,
    cwd: Path | None = None,
) -> AsyncIterator[Client]:
    """A client of a real server subprocess; its stderr goes to ``errlog``."""
    log_path = errlog or db.with_suffix(".stderr")
    with log_path.open("a") as log:
        transport = stdio_client(server_params(db, *args, env=env, cwd=cwd), errlog=log)
        async with Client(transport, mode=mode, read_timeout_seconds=CALL_TIMEOUT) as client:
            yield client


def make_server(db: Path, toolsets: str = EVERYTHING, **settings: Any) -> WorkqServer:
    return build_server(
        Settings(db_path=db, toolsets=toolsets, plans_dir=db.parent / "plans", **settings)
    )


@pytest.fixture
def db(tmp_path: Path, sqlite_template: Path) -> Path:
    """A new queue already at head (a copy of the migrated template): a server migrates a
    new file as soon as it runs (~0.4 s of a `workq serve` process's start); the tests of
    migrating at start make their own."""
    return migrated_sqlite(sqlite_template, tmp_path / "queue.db")


@pytest.fixture(params=["auto", "legacy"])
async def client(
    settings: Settings, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[Client]:
    """An in-process client of a server with every toolset and profile, lease 60 s, in both protocol
    eras (the default dispatches directly; legacy runs the JSON-RPC stream loop), on SQLite
    and, when WORKQ_TEST_PG_URL is set, on PostgreSQL (``settings`` of tests/conftest.py)."""
    own = settings.model_copy(update={"toolsets": EVERYTHING, "plans_dir": tmp_path / "plans"})
    server = build_server(own, migrate=True)
    async with Client(server, mode=request.param) as connected:
        yield connected


def text(result: CallToolResult) -> str:
    assert result.content and result.content[0].type == "text"
    return result.content[0].text


async def call_ok(client: Client, tool: str, **arguments: Any) -> CallToolResult:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, text(result)
    return result


async def call_error(client: Client, tool: str, **arguments: Any) -> CallToolResult:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, text(result)
    if tool in OBJECT_FAILURES:  # the contract's failure object: the text and the data
        assert result.structured_content == json.loads(text(result)) == error_of(result)
    else:  # the output schema describes success; an error carries no structured content
        assert result.structured_content is None
    return result


def error_of(result: CallToolResult) -> dict[str, Any]:
    """Contract B's error object that an error result carries in its _meta."""
    assert result.is_error and result.meta is not None
    error: dict[str, Any] = result.meta[ERROR_META]
    assert error["success"] is False
    return error
