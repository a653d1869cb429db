"""docs/mcp.md documents every tool, toolset, profile and error code the server can give
(what they cost is tests/server/test_tool_bytes.py's)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mcp import Client

from tests.server.conftest import EVERYTHING, make_server
from workq import errors
from workq.server import app, toolsets

DOC = (Path(__file__).resolve().parents[2] / "docs" / "mcp.md").read_text()


def _codes() -> set[str]:
    found = set()
    for module in (errors, app):
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, errors.WorkqError):
                found.add(value.code)
    return found


@pytest.mark.anyio
async def test_every_tool_is_documented(db: Path) -> None:
    async with Client(make_server(db, toolsets=EVERYTHING)) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
    for name in names:
        assert re.search(rf"`{name}\(", DOC), f"{name} is not in the tool table of docs/mcp.md"


def test_every_toolset_and_error_code_is_documented() -> None:
    for name in toolsets.GROUPS:
        assert f"`{name}`" in DOC
    for code in _codes():
        assert f"`{code}`" in DOC, f"error code {code} is not in docs/mcp.md"
