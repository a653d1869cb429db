"""A third-party client: the MCP Inspector CLI (npm ``@modelcontextprotocol/inspector``,
pinned in package.json) lists the tools with ``--strict`` and drives the claim loop."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import EVERYTHING_LOCAL, make_server, serve_argv
from tests.server.test_http import http_server

ROOT = Path(__file__).resolve().parents[2]
INSPECTOR = ROOT / "node_modules" / ".bin" / "mcp-inspector"
TIMEOUT = 90

MISSING = not INSPECTOR.exists() or shutil.which("node") is None
if MISSING and os.environ.get("WORKQ_REQUIRE_INSPECTOR"):  # CI ran npm ci: must be there
    raise RuntimeError(
        "the MCP Inspector CLI (node_modules/.bin/mcp-inspector) or node is missing, "
        "and WORKQ_REQUIRE_INSPECTOR is set: run `npm ci` at the repository root"
    )
pytestmark = pytest.mark.skipif(
    MISSING, reason="the MCP Inspector CLI is not installed: run `npm ci` at the repository root"
)


def inspect(home: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    """The Inspector CLI, with its configuration and secrets kept in ``home``."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "MCP_CATALOG_PATH": str(home / "mcp.json"),
        "MCP_CLIENT_CONFIG_PATH": str(home / "client.json"),
        "MCP_INSPECTOR_SECRET_STORE": "memory",
    }
    return subprocess.run(
        [str(INSPECTOR), "--cli", *arguments],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env,
        stdin=subprocess.DEVNULL,
        cwd=home,
    )


class Inspector:
    def __init__(self, db: Path, home: Path, era: str) -> None:
        self.db, self.home, self.era = db, home, era

    def run(self, *arguments: str) -> tuple[int, Any, str]:
        done = inspect(
            self.home,
            sys.executable,
            *serve_argv("--toolsets", EVERYTHING_LOCAL, "--run-id", "inspector", db=self.db),
            "--protocol-era",
            self.era,
            "--format",
            "json",
            *arguments,
        )
        payload = json.loads(done.stdout) if done.stdout.strip() else None
        return done.returncode, payload, done.stderr

    def call(self, tool: str, **arguments: Any) -> tuple[int, dict[str, Any]]:
        code, payload, stderr = self.run(
            "--method", "tools/call", "--tool-name", tool, "--tool-args-json", json.dumps(arguments)
        )
        assert payload is not None, stderr
        return code, payload["result"]


@pytest.fixture(params=["legacy", "modern"])
def inspector(tmp_path: Path, request: pytest.FixtureRequest) -> Inspector:
    home = tmp_path / "home"
    home.mkdir()
    return Inspector(tmp_path / "queue.db", home, request.param)


def test_the_inspector_lists_every_tool_with_strict_schemas(inspector: Inspector) -> None:
    code, payload, stderr = inspector.run("--method", "tools/list", "--strict")
    assert code == 0, stderr
    # --strict reports every portability problem, errors and warnings alike, on stderr.
    assert "Warning" not in stderr and "Issue:" not in stderr, stderr
    names = {tool["name"] for tool in payload["result"]["tools"]}
    expected = {
        tool.name
        for tool in make_server(inspector.db, toolsets=EVERYTHING_LOCAL).workq_tools.values()
    }
    assert names == expected


def test_the_inspector_drives_create_ready_claim_complete(inspector: Inspector) -> None:
    code, result = inspector.call("issue_create", title="from the inspector", priority="high")
    assert code == 0 and result["content"][0]["text"].startswith("Created issue #1")
    code, result = inspector.call("issue_ready", agent="claude")
    assert code == 0 and result["structuredContent"]["issue"]["number"] == 1
    code, result = inspector.call("issue_claim", number=1, run_id="autopilot_main")
    assert code == 0 and result["content"][0]["text"] == "Claimed issue #1"
    # Another process: the holder is named explicitly, as an HTTP agent would.
    code, result = inspector.call("issue_complete", number=1, run_id="autopilot_main")
    assert code == 0 and result["content"][0]["text"] == "Completed issue #1"
    code, result = inspector.call("issue_ready")
    assert code == 0 and result["content"][0]["text"] == "No ready issues available"
    code, result = inspector.call("issue_claim", number=1)
    assert code == 5  # the Inspector's exit status for a tool error
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith("Could not claim issue #1 (already claimed")


def test_the_inspector_over_http_with_a_bearer_token_in_any_case(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    db = tmp_path / "queue.db"
    with http_server(db, "--token", "s3cret") as url:
        done = inspect(
            home,
            url,
            "--header",
            "Authorization: bearer s3cret",
            "--method",
            "tools/list",
            "--format",
            "json",
        )
        assert done.returncode == 0, done.stderr
        assert "issue_claim" in {
            tool["name"] for tool in json.loads(done.stdout)["result"]["tools"]
        }

        # Without the token the Inspector reports the server's hint; it does not start an
        # OAuth flow that workq does not offer.
        refused = inspect(home, url, "--method", "tools/list", "--format", "json")
        assert refused.returncode == 3, refused.stderr  # the Inspector's "auth" status
        assert "Authorization: Bearer <token>" in refused.stderr, refused.stderr
        assert "OAuth" not in refused.stderr and "Registration" not in refused.stderr
