"""What each toolset and profile costs an agent's context, in bytes of ``tools/list``: the
default stays within 12,000 bytes, workq's own tools within 1 KB each on average, and
docs/mcp.md's table says what is measured here."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.server.conftest import make_server
from workq.server import toolsets

DOC = Path(__file__).resolve().parents[2] / "docs" / "mcp.md"
DEFAULT_BUDGET = 12_000
NATIVE_AVERAGE_BUDGET = 1_024
ROW = re.compile(
    r"^\| (`?)(?P<name>[a-z,-]+)\1 \|[^|]*\| (?P<n>\d+) \| (?P<kb>\d+\.\d) KB \|", re.M
)
# What a coding agent on a repository turns on: the queue, workspaces and the coding loop.
CODING_AGENT = "default,workspaces,coding"


def wire_bytes(tools: list[Any]) -> int:
    wire = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]
    return len(json.dumps({"tools": wire}, separators=(",", ":")).encode())


async def measure(db: Path, spec: str) -> tuple[int, int]:
    async with Client(make_server(db, toolsets=spec), mode="legacy") as client:
        tools = (await client.list_tools()).tools
    return len(tools), wire_bytes(tools)


@pytest.mark.anyio
async def test_the_byte_table(db: Path) -> None:
    names = ["default", CODING_AGENT, "all", *toolsets.TOOLSETS, *toolsets.PROFILES]
    measured = {name: await measure(db, name) for name in names}
    print("\ngroup                      tools   bytes   per tool")
    for name, (count, size) in measured.items():
        print(f"{name:26} {count:5} {size:7,} {size // count:8,}")

    count, size = measured["default"]
    assert count == 16 and size <= DEFAULT_BUDGET
    count, size = measured["all"]
    assert count == sum(measured[name][0] for name in toolsets.TOOLSETS)
    assert size / count <= NATIVE_AVERAGE_BUDGET

    documented = {m["name"]: (int(m["n"]), m["kb"]) for m in ROW.finditer(DOC.read_text())}
    expected = {name: (n, f"{size / 1000:.1f}") for name, (n, size) in measured.items()}
    assert documented == expected, "docs/mcp.md's table of toolsets and profiles is stale"


@pytest.mark.anyio
async def test_all_is_every_toolset_and_no_profile(db: Path) -> None:
    async with Client(make_server(db, toolsets="all")) as client:
        served = {t.name for t in (await client.list_tools()).tools}
    for profile in toolsets.PROFILES:
        async with Client(make_server(db, toolsets=profile)) as client:
            assert not served & {t.name for t in (await client.list_tools()).tools}


@pytest.mark.anyio
async def test_no_schema_speaks_of_the_documents_by_file(db: Path) -> None:
    async with Client(make_server(db)) as client:
        tools = (await client.list_tools()).tools
    listed = json.dumps([t.model_dump(mode="json", by_alias=True) for t in tools])
    assert "seed" not in listed.lower()
