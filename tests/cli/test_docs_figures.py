"""Figures and promises of the docs that a test can recompute, so they cannot go stale."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.server.conftest import make_server

ROOT = Path(__file__).resolve().parents[2]
FIGURES = re.compile(
    r"`tools/list`, default toolset \| \| (?P<all>\d+\.\d) KB \((?P<n>\d+) tools: "
    r"(?P<issue>\d+\.\d) KB for the (?P<n_issue>\d+) issue tools, "
    r"(?P<plan>\d+\.\d) KB for the (?P<n_plan>\d+) plan-mode tools\)"
)


def _kb(tools: list[Any]) -> str:
    wire = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]
    return f"{len(json.dumps({'tools': wire}, separators=(',', ':')).encode()) / 1000:.1f}"


@pytest.mark.anyio
async def test_the_tools_list_sizes_in_docs_mcp_md_are_measured(tmp_path: Path) -> None:
    async with Client(make_server(tmp_path / "q.db", toolsets="default"), mode="legacy") as c:
        tools = (await c.list_tools()).tools
    issue = [t for t in tools if t.name.startswith("issue_")]
    plan = [t for t in tools if not t.name.startswith("issue_")]
    measured = {
        "all": _kb(tools),
        "n": str(len(tools)),
        "issue": _kb(issue),
        "n_issue": str(len(issue)),
        "plan": _kb(plan),
        "n_plan": str(len(plan)),
    }
    found = FIGURES.search((ROOT / "docs" / "mcp.md").read_text())
    assert found is not None, "the tools/list line of docs/mcp.md's Speed table is gone"
    assert found.groupdict() == measured, f"docs/mcp.md should say {measured}"


OPT_IN = re.compile(r"`tools/list`, opt-in toolsets \| \| (?P<line>[^|]+) \|")


@pytest.mark.anyio
async def test_the_opt_in_toolset_sizes_in_docs_mcp_md_are_measured(tmp_path: Path) -> None:
    parts = []
    for name in ("workflow", "github", "context", "git"):
        async with Client(make_server(tmp_path / "q.db", toolsets=name), mode="legacy") as c:
            tools = (await c.list_tools()).tools
        parts.append(f"`{name}` {_kb(tools)} KB ({len(tools)} tools)")
    found = OPT_IN.search((ROOT / "docs" / "mcp.md").read_text())
    assert found is not None, "the opt-in tools/list line of docs/mcp.md's Speed table is gone"
    assert found.group("line").strip() == ", ".join(parts)


def test_every_source_contract_cited_in_the_code_is_summed_up() -> None:
    contracts = (ROOT / "docs" / "contracts.md").read_text()
    cited: set[str] = set()
    for path in [*(ROOT / "src").rglob("*.py"), *(ROOT / "docs").glob("*.md"), ROOT / "README.md"]:
        text = path.read_text()
        cited |= {m.upper() for m in re.findall(r"\b[Cc]ontract ([A-E])\b", text)}
        cited |= {f"seed {n}" for n in re.findall(r"\b[Ss]eed (\d{3})\b", text)}
    assert cited, "no citation found: the pattern is wrong"
    for name in cited:
        heading = f"## Contract {name}" if len(name) == 1 else f"({name})"
        assert heading in contracts or name in contracts, f"{name} is cited but not summed up"
    assert "../shared" not in (ROOT / "docs" / "architecture.md").read_text()


@pytest.mark.skipif(
    os.geteuid() != 0
    or shutil.which("runuser") is None
    or not list(Path("/usr/lib/postgresql").glob("*/bin/initdb")),
    reason="needs root and an installed PostgreSQL (the script runs initdb as postgres)",
)
def test_pg_start_says_why_postgres_cannot_reach_a_private_folder() -> None:
    with tempfile.TemporaryDirectory() as private:  # 0700, owned by root
        done = subprocess.run(
            ["bash", str(ROOT / "scripts" / "pg_start.sh")],
            env={**os.environ, "WORKQ_PG_DIR": f"{private}/pg"},
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode != 0 and done.stdout.strip() == "false"
    assert "cannot reach" in done.stderr and f"{private} is closed to other users" in done.stderr
