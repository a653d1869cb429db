"""One claim, one JSON contract: the CLI's --json and the MCP tools' structuredContent agree.

The CLI runs in this process (``tests/workq_cli.py``). The contract test talks to a real
``workq serve`` over stdio (this file's end-to-end test); the plan-mode test to the same
server in this process."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.conftest import migrated_sqlite
from tests.server.conftest import call_ok, make_server
from tests.services.plans.conftest import serve
from tests.workq_cli import workq
from workq.schemas import Claim, ClaimedNext

pytestmark = pytest.mark.anyio
LIMIT = 60


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``workq --db queue.db ARGS --json`` in ``cwd``, run in this process."""
    return workq("--db", "queue.db", *args, "--json", cwd=cwd)


def cli_json(cwd: Path, *args: str, status: int = 0) -> Any:
    done = cli(cwd, *args)
    assert done.returncode == status, done.stderr
    return json.loads(done.stdout)


def shape(value: Any) -> Any:
    """Keys and value kinds, not values."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    return type(value).__name__


async def test_claim_and_claim_next_have_one_json_contract(
    tmp_path: Path, sqlite_template: Path
) -> None:
    # End to end: the MCP side is a real `workq serve` over stdio, so structuredContent is
    # compared as it crosses the wire (JSON), not as the in-process client hands it over.
    migrated_sqlite(sqlite_template, tmp_path / "queue.db")  # a new queue, at head
    with anyio.fail_after(LIMIT):
        async with serve(tmp_path, "run-m") as client:
            for title in ("one", "two", "three", "four"):
                await call_ok(client, "issue_create", title=title, description="d")
            by_cli = cli_json(tmp_path, "claim-next", "--run-id", "run-c")
            by_mcp = (await call_ok(client, "issue_claim_next")).structured_content
            assert by_mcp is not None
            assert shape(by_cli) == shape(by_mcp)
            assert by_cli["number"] == 1 and by_mcp["number"] == 2
            ClaimedNext.model_validate(by_cli)
            ClaimedNext.model_validate(by_mcp)

            next_claim = by_mcp
            by_cli = cli_json(tmp_path, "claim", "3", "--run-id", "run-c")
            by_mcp = (await call_ok(client, "issue_claim", number=4)).structured_content
            assert by_mcp is not None
            assert shape(by_cli) == shape(by_mcp)
            # One claim shape: claim_next's answer is issue_claim's, flat, with the issue's
            # own fields added.
            assert by_mcp["claimed"] is next_claim["claimed"] is True
            assert {k: type(v) for k, v in by_mcp.items()}.items() <= {
                k: type(v) for k, v in next_claim.items()
            }.items()
            assert set(next_claim) - set(by_mcp) == {
                "description",
                "priority",
                "issue_type",
                "agent",
            }
            Claim.model_validate(by_cli)
            Claim.model_validate(by_mcp)

            empty_cli = cli_json(tmp_path, "claim-next", "--run-id", "run-c", status=2)
            empty_mcp = (await call_ok(client, "issue_claim_next")).structured_content
            assert empty_cli == empty_mcp == {"claimed": False}


async def test_a_run_planning_from_the_cli_cannot_claim_over_mcp(tmp_path: Path) -> None:
    with anyio.fail_after(LIMIT):
        async with Client(make_server(tmp_path / "queue.db", "default", run_id="run-m")) as client:
            await call_ok(client, "issue_create", title="one")
            done = workq(
                "--db", "queue.db", "plan", "enter", "p", "goal", "--run-id", "p", cwd=tmp_path
            )
            assert done.returncode == 0, done.stderr
            refused = await client.call_tool("issue_claim_next", {"run_id": "p"})
            assert refused.is_error
            assert "PLAN_MODE_ACTIVE" in refused.content[0].text  # type: ignore[union-attr]
            got = await call_ok(client, "issue_claim_next")
            assert got.structured_content is not None
            assert got.structured_content["number"] == 1
