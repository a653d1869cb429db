"""docs/mcp.md documents every tool, toolset and error code the server can give, and the
default toolset stays within its context budget."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from mcp import Client

from tests.server.conftest import make_server
from workq import errors
from workq.server import app, toolsets

DOC = (Path(__file__).resolve().parents[2] / "docs" / "mcp.md").read_text()
# 14 KiB, plus what issue 13 added to the claim loop: fence (four arguments, two results)
# and wait_seconds (two arguments), about 0.35 KB together; and file reservations: touches
# (issue_create, issue_update, issue_get's result) and issue_ready's explain (an argument
# and the not_ready result), about 0.6 KB.
ISSUE_TOOLS_BUDGET = 14 * 1024 + 768


def _codes() -> set[str]:
    found = set()
    for module in (errors, app):
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, errors.WorkqError):
                found.add(value.code)
    return found


@pytest.mark.anyio
async def test_every_tool_is_documented(db: Path) -> None:
    async with Client(make_server(db, toolsets="all")) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
    for name in names:
        assert re.search(rf"`{name}\(", DOC), f"{name} is not in the tool table of docs/mcp.md"


def test_every_toolset_and_error_code_is_documented() -> None:
    for name in toolsets.TOOLSETS:
        assert f"`{name}`" in DOC
    for code in _codes():
        assert f"`{code}`" in DOC, f"error code {code} is not in docs/mcp.md"


@pytest.mark.anyio
async def test_the_default_issue_tools_stay_small(db: Path) -> None:
    # Every schema costs agents context. The whole default set (with seed 002's plan-mode
    # tools) aims at 16 KB (scripts/bench_mcp.py reports it); the 12 issue tools of the
    # claim loop must not grow past their share.
    async with Client(make_server(db, toolsets="default"), mode="legacy") as client:
        listed = await client.list_tools()
    issue_tools = [tool for tool in listed.tools if tool.name.startswith("issue_")]
    wire = [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in issue_tools]
    assert len(issue_tools) == 12
    assert len(json.dumps({"tools": wire}, separators=(",", ":"))) < ISSUE_TOOLS_BUDGET
