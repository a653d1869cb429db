"""The same rules over MCP, through a real `workq serve` process (the CLI's own entry point,
its options after the command) and the SDK's stdio client."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.server.conftest import (
    CALL_TIMEOUT,
    EVERYTHING_LOCAL,
    call_error,
    call_ok,
    error_of,
    text,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def workq_serve(folder: Path) -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            *("-m", "workq.cli.main", "serve", "--db", str(folder / "q.db"), "--as", "admin"),
            *("--toolsets", EVERYTHING_LOCAL, "--run-id", "run-1"),
        ],
        cwd=folder,
    )
    with (folder / "serve.log").open("a") as log:
        transport = stdio_client(params, errlog=log)
        async with Client(transport, read_timeout_seconds=CALL_TIMEOUT) as client:
            yield client


async def test_tool_errors_name_tools_and_updates_need_a_field(tmp_path: Path) -> None:
    with anyio.fail_after(90):
        async with workq_serve(tmp_path) as client:
            missing = error_of(await call_error(client, "issue_get", number=9999))
            assert missing["hint"] == "list issues with issue_list to find the right number"
            await call_ok(client, "issue_create", title="first")
            await call_ok(client, "issue_create", title="second")
            refused = await call_error(client, "issue_update", number=1)
            assert error_of(refused)["code"] == "INVALID_INPUT"
            assert "nothing to change" in text(refused)
            await call_ok(client, "issue_depend", blocker=1, blocked=2)
            listed = json.loads(text(await call_ok(client, "issue_list")))
            assert listed[1]["waiting_on"] == [1] and "blocked_reason" not in listed[1]
            await call_ok(client, "issue_block", number=1, reason="needs a key")
            again = json.loads(text(await call_ok(client, "issue_list")))
            assert again[0]["blocked_reason"] == "needs a key"
    assert (tmp_path / "q.db").exists() and not (tmp_path / "autopilot.db").exists()


async def test_plan_exit_over_mcp_refuses_a_template_and_accepts_the_agents_shape(
    tmp_path: Path,
) -> None:
    with anyio.fail_after(90):
        async with workq_serve(tmp_path) as client:
            await call_ok(client, "enter_plan_mode", slug="p", goal="Parse the files")
            refused = error_of(await call_error(client, "exit_plan_mode"))
            assert refused["code"] == "PLAN_EMPTY"
            assert refused["hint"] == "write the plan into its file, then exit_plan_mode again"
            plan = tmp_path / "plans" / "p.md"
            plan.write_text(
                "# Parsing\n\n## Where things are\nThe reader is src/read.py.\n\n"
                "## Steps\n1. a tokenizer\n2. a grammar\n"
            )
            done = await call_ok(client, "exit_plan_mode")
            assert done.structured_content is not None
            assert done.structured_content["empty_sections"] == []
            await call_ok(client, "enter_plan_mode", slug="q", goal="Another")
            second = tmp_path / "plans" / "q.md"
            second.write_text(second.read_text().replace("## Risks\n", "## Risks\n\nNone.\n"))
            warned = await call_ok(client, "exit_plan_mode")
            assert "Warning: left empty: Findings, Approach, Tasks" in text(warned)
            assert warned.structured_content is not None
            assert warned.structured_content["empty_sections"] == ["Findings", "Approach", "Tasks"]


def test_serve_in_a_terminal_says_it_waits_for_json_rpc_on_stdin(tmp_path: Path) -> None:
    """`scripts/serve` typed in a terminal: the server says what it waits for, on stderr."""
    primary, secondary = pty.openpty()
    try:
        os.write(primary, b"\x04")  # Ctrl-D, waiting in the terminal: the end of input
        done = subprocess.run(
            [str(Path(sys.executable).with_name("workq")), "--db", str(tmp_path / "q.db"), "serve"],
            stdin=secondary,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(secondary)
        os.close(primary)
    assert done.returncode == 0, done.stderr
    assert "waiting for an MCP client's JSON-RPC messages on stdin" in done.stderr
    assert done.stdout == ""
