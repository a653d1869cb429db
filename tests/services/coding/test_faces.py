"""Quality gates through ``workq serve --toolsets default,workflow,quality`` (a real process
over stdio with the SDK's client, and the same server built in this process) and the
``workq gates`` commands (run in this process), on a real repository: the gates fail then
pass, the tests gate follows them, and bad paths are refused."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, chdir
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests import workq_cli
from tests.server.conftest import call_error, call_ok, error_of, stdio_server, text
from tests.services.coding.gaterepo import commit, gated_repo
from workq.config import Settings
from workq.server.app import build_server

LIMIT = 120


def workq(
    cwd: Path, db: Path, *args: str, gate: str = "evidence"
) -> subprocess.CompletedProcess[str]:
    """``workq --db DB ARGS`` in ``cwd`` as the run dev, in this process."""
    env = {"WORKQ_TESTS_GATE": gate, "WORKQ_RUN_ID": "dev"}
    return workq_cli.workq("--db", db, *args, cwd=cwd, env=env)


def _data(result: Any) -> dict[str, Any]:
    assert result.structured_content is not None
    data: dict[str, Any] = result.structured_content
    return data


@asynccontextmanager
async def gates_server(db: Path, repo: Path, backend: str) -> AsyncIterator[Client]:
    """``workq serve --toolsets default,workflow,quality --tests-gate evidence`` working in
    ``repo``: on asyncio the real process over stdio (its flags, its checkout); on trio the
    same server built and run in this process (a server process runs asyncio whatever its
    client does, so this runs the server's tools under trio)."""
    if backend == "asyncio":
        args = ("--toolsets", "default,workflow,quality", "--tests-gate", "evidence")
        async with stdio_server(db, *args, cwd=repo) as client:
            yield client
        return
    with chdir(repo):
        settings = Settings(db_path=db, toolsets="default,workflow,quality", tests_gate="evidence")
        async with Client(build_server(settings)) as client:
            yield client


@pytest.mark.anyio
async def test_run_quality_gates_and_the_tests_gate_through_the_server(
    tmp_path: Path, anyio_backend_name: str
) -> None:
    repo = gated_repo(tmp_path / "app", app="x = 1  # BAD\n")
    db = tmp_path / "q.db"
    with anyio.fail_after(LIMIT):
        async with gates_server(db, repo, anyio_backend_name) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            hints = tools["run_quality_gates"].annotations
            assert hints is not None and hints.idempotent_hint is True
            assert not hints.read_only_hint

            await call_ok(client, "issue_create", title="Gated work")
            unclaimed = await call_error(client, "run_quality_gates", files=[])
            assert error_of(unclaimed)["code"] == "NOT_HOLDER"
            await call_ok(client, "issue_claim", number=1)

            failed = _data(await call_ok(client, "run_quality_gates", files=[]))
            assert failed["overall_pass"] is False and failed["number"] == 1
            lint = failed["gates"][0]
            assert (lint["gate_number"], lint["name"], lint["passed"]) == (1, "lint", False)
            assert lint["issues"][0]["file"] == "src/app.py" and lint["issues"][0]["line"] == 1
            assert failed["test_results"] == {"passed": 3, "failed": 0, "errors": []}

            for bad, says in [
                ("../outside.py", "leaves the checkout"),
                ("/etc/passwd", "absolute"),
                ("src/nothing.py", "not in the checkout"),
            ]:
                refused = await call_error(client, "run_quality_gates", files=[bad])
                assert error_of(refused)["code"] == "INVALID_INPUT" and says in text(refused)

            await call_ok(
                client, "advance_workflow", targetPhase="testing", skipJustification="quick fix"
            )
            gate = await call_error(
                client, "advance_workflow", targetPhase="commit", testsPassed=True
            )
            error = error_of(gate)
            assert error["code"] == "ERR_QUALITY_GATE_FAILED"
            assert error["details"]["failing"][0]["gate"] == "lint"
            assert "run_quality_gates" in error["hint"]

            fixed = await anyio.to_thread.run_sync(commit, repo, {"src/app.py": "x = 1\n"})
            only_lint = _data(
                await call_ok(client, "run_quality_gates", files=["src/app.py"], gates=["lint"])
            )
            assert only_lint["overall_pass"] is True and [
                g["name"] for g in only_lint["gates"]
            ] == ["lint"]
            passed = await call_ok(client, "run_quality_gates", files=[], issue_number=1)
            assert _data(passed)["overall_pass"] is True and _data(passed)["commit"] == fixed
            assert "all gates pass" in text(passed)
            moved = await call_ok(
                client, "advance_workflow", targetPhase="commit", testsPassed=True
            )
            assert "Tests: passed" in text(moved)


def test_the_gates_commands(tmp_path: Path) -> None:
    repo = gated_repo(tmp_path / "app", app="x = 1  # FAIL\n")
    db = tmp_path / "q.db"
    assert workq(repo, db, "create", "Gated work").returncode == 0
    assert workq(repo, db, "claim", "1", "--run-id", "dev").returncode == 0

    listed = workq(repo, db, "gates", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    config = json.loads(listed.stdout)
    assert config["source"] == "workq.toml [gates] on main"
    assert [g["name"] for g in config["gates"]] == ["lint", "tests"]

    failing = workq(repo, db, "gates", "run")  # the issue the run id holds
    assert failing.returncode == 1, failing.stderr
    assert "gates FAIL" in failing.stdout and "tests: 2 passed, 1 failed" in failing.stdout
    assert "FAILED tests/test_app.py::test_app" in failing.stdout

    for phase in ("research", "branch", "implementation", "testing"):
        assert workq(repo, db, "workflow", "advance", "1", phase).returncode == 0
    refused = workq(repo, db, "workflow", "advance", "1", "commit", "--tests-passed")
    assert refused.returncode == 1
    assert "ERR_TESTS_FAILING" in refused.stderr and "'workq gates run 1'" in refused.stderr
    trusted = workq(repo, db, "workflow", "advance", "1", "commit", "--tests-passed", gate="trust")
    assert trusted.returncode == 0, trusted.stderr

    commit(repo, {"src/app.py": "x = 1\n"})
    passing = workq(repo, db, "gates", "run", "1", "src/app.py", "--gate", "lint")
    assert passing.returncode == 0, passing.stderr
    assert "all gates pass" in passing.stdout

    evidence = workq(repo, db, "gates", "evidence", "1", "--json")
    runs = json.loads(evidence.stdout)
    assert [(r["gate"], r["passed"], r["full"]) for r in runs] == [
        ("lint", True, False),  # on named files
        ("tests", False, True),  # the refused advance read it: not run again on its commit
        ("lint", True, True),
    ]
    shown = workq(repo, db, "gates", "evidence", "1")
    assert "files" in shown.stdout and "FAIL" in shown.stdout
    history = workq(repo, db, "history", "1")
    assert "gates_run" in history.stdout

    escape = workq(repo, db, "gates", "run", "1", "../x.py")
    assert escape.returncode == 1 and "INVALID_INPUT" in escape.stderr
