"""Seed 002's "Example Session", run as written against a real server subprocess: the
seed's words as an agent reads them off ``workq serve``'s stdout (kept end to end; the
same tools in process are tests/server/test_tools.py's)."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.server.conftest import call_ok, stdio_server, text

pytestmark = pytest.mark.anyio


# Verbatim from seed 002 (shell comments and the agent's own work left out).
SESSION = """
issue_ready(agent="claude")
→ Issue #10: Add integration tests for issues database

issue_claim(number=10, run_id="autopilot_main")
→ Claimed issue #10

issue_complete(number=10)
→ Completed issue #10

issue_ready(agent="claude")
→ Issue #11: Add comprehensive README for desktop crate

issue_claim(number=11, run_id="autopilot_main")
→ Claimed issue #11
"""


def parse(session: str) -> list[tuple[str, dict[str, Any], str]]:
    """(tool, arguments, expected first line) for each call of the transcript."""
    steps = []
    lines = [line for line in session.strip().splitlines() if line.strip()]
    for call, answer in zip(lines[::2], lines[1::2], strict=True):
        node = ast.parse(call, mode="eval").body
        assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        arguments = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
        steps.append((node.func.id, arguments, answer.removeprefix("→ ")))
    return steps


async def test_seed_002_example_session_runs_as_written(db: Path) -> None:
    with anyio.fail_after(60):
        async with stdio_server(db) as client:
            # Issues 1-9 exist and are done; #10 and #11 are next in line.
            for n in range(1, 10):
                await call_ok(client, "issue_create", title=f"earlier work {n}")
                await call_ok(client, "issue_claim", number=n)
                await call_ok(client, "issue_complete", number=n)
            await call_ok(client, "issue_create", title="Add integration tests for issues database")
            await call_ok(
                client, "issue_create", title="Add comprehensive README for desktop crate"
            )
            for tool, arguments, expected in parse(SESSION):
                result = await call_ok(client, tool, **arguments)
                said = text(result)
                if tool == "issue_ready":  # the tool's section shows JSON; the transcript
                    found = json.loads(said)  # sums it up as "Issue #N: title"
                    said = f"Issue #{found['number']}: {found['title']}"
                assert said.splitlines()[0] == expected, (tool, arguments)
            held = await call_ok(client, "issue_get", number=11)
            assert held.structured_content is not None
            assert held.structured_content["claimed_by"] == "autopilot_main"
