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
TOOLS_LIST_BUDGET = 16 * 1024


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
async def test_the_default_tool_list_fits_its_budget(db: Path) -> None:
    async with Client(make_server(db, toolsets="default"), mode="legacy") as client:
        listed = await client.list_tools()
    wire = listed.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert len(listed.tools) == 12
    assert len(json.dumps(wire, separators=(",", ":"))) < TOOLS_LIST_BUDGET
