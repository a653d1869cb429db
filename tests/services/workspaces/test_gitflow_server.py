"""Seed 004's git steps through servers working inside a real git repository: the whole
coding loop through a real ``workq serve`` process over stdio, the refusals an agent meets
on the way through a server built in this process (while this process works in the
repository), the toolset's opt-in, and the start check of git itself (a real ``workq
serve`` that must refuse to start)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.server.conftest import (
    call_error,
    call_ok,
    error_of,
    make_server,
    serve_argv,
    stdio_server,
    text,
)
from tests.services.coding.gaterepo import gated_repo
from tests.services.workspaces.gitrepo import make_repo
from workq.config import Settings
from workq.schemas import Status
from workq.server.app import build_server
from workq.services.queue import issues, notes
from workq.services.runtime import open_queue
from workq.vcs import git

pytestmark = pytest.mark.anyio

GIT_TOOLS = [
    "add_issue_comment",
    "commit_tdd_phase",
    "create_feature_branch",
    "link_issue_to_branch",
    "merge_to_main",
    "start_work_on_issue",
]


def _issue(db: Path, title: str, description: str = "") -> int:
    q = open_queue(Settings(db_path=db), migrate=True)
    try:
        return issues.create(q, title=title, description=description).number
    finally:
        q.db.dispose()


def _read(db: Path, fn: Any) -> Any:
    q = open_queue(Settings(db_path=db))
    try:
        return fn(q)
    finally:
        q.db.dispose()


def _data(result: Any) -> dict[str, Any]:
    assert result.structured_content is not None
    return dict(result.structured_content)


async def test_the_git_steps_are_a_profile(tmp_path: Path) -> None:
    """Neither the default nor ``all`` serves them; the workflow-server profile (or its
    old toolset name ``git``) does, with its discovery and gates tools."""
    for spec in ("default", "all"):
        async with Client(build_server(Settings(db_path=tmp_path / "q.db", toolsets=spec))) as c:
            names = {t.name for t in (await c.list_tools()).tools}
        assert not names & set(GIT_TOOLS)
    async with Client(make_server(tmp_path / "q.db", "git")) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(GIT_TOOLS) <= set(tools)
    assert set(tools) - set(GIT_TOOLS) == {
        "get_work_context",
        "search_documentation",
        "run_quality_gates",
    }
    hints = {n: t.annotations for n, t in tools.items()}
    assert hints["link_issue_to_branch"] is not None
    assert hints["link_issue_to_branch"].idempotent_hint is True
    assert all(
        hints[n] is not None and not hints[n].idempotent_hint  # type: ignore[union-attr]
        for n in GIT_TOOLS
        if n != "link_issue_to_branch"
    )
    assert hints["merge_to_main"].destructive_hint is not False  # type: ignore[union-attr]


async def test_the_coding_loop_end_to_end(tmp_path: Path) -> None:
    """start_work_on_issue, a red commit refused with a non-test file, red, green, the
    gates failing (tests, then lint) and passing, merge_to_main: the issue is done, the
    default branch has the commits, the branch is gone. The repository's gates are small
    scripts (tests/services/coding/gaterepo.py): the tests fail while src/app.py says FAIL, the lint
    while a file under src/ says BAD."""
    repo = gated_repo(tmp_path / "app")
    db = tmp_path / "q.db"
    number = _issue(db, "Parse the input", "Do it.\n\n- [ ] parses\n- [ ] reports errors\n")
    async with stdio_server(db, "--toolsets", "default,git", "--run-id", "run-a", cwd=repo) as c:
        started = _data(await call_ok(c, "start_work_on_issue", issue_number=number))
        branch = f"feature/{number}-parse-the-input"
        assert started["branch_name"] == branch
        assert started["issue"] == {
            "number": number,
            "title": "Parse the input",
            "acceptance_criteria": ["parses", "reports errors"],
        }
        assert Path(started["path"]) == repo and git.current_branch(repo) == branch

        (repo / "tests").mkdir()
        (repo / "tests" / "test_parse.py").write_text("def test_parse(): assert False\n")
        (repo / "src" / "parse.py").write_text("def parse(): ...\n")
        refused = await call_error(c, "commit_tdd_phase", phase="red", component="the parser")
        assert error_of(refused)["code"] == "ERR_RULE_VIOLATION"
        assert "TDD-001" in text(refused) and "src/parse.py" in text(refused)
        assert git.run(["rev-list", "--count", "main.." + branch], cwd=repo).stdout.strip() == "0"

        (repo / "src" / "parse.py").unlink()
        red = _data(
            await call_ok(
                c,
                "commit_tdd_phase",
                phase="red",
                component="the parser",
                details=["a failing test for parse"],
                test_count="0/1",
            )
        )
        assert red["commit_message"].startswith(
            f"test: add failing tests for the parser (#{number})\n"
        )
        (repo / "src" / "parse.py").write_text("def parse(): return 1\n")
        (repo / "src" / "app.py").write_text("x = 'FAIL'\n")
        green = _data(
            await call_ok(
                c, "commit_tdd_phase", phase="green", component="the parser", quality_gates="5/5"
            )
        )
        assert "Status: GREEN" in green["commit_message"]
        failing = await call_error(c, "merge_to_main")
        assert error_of(failing)["code"] == "ERR_TESTS_FAILING", text(failing)
        (repo / "src" / "app.py").write_text("x = 'BAD'\n")
        await call_ok(c, "commit_tdd_phase", phase="green", component="the parser")
        lint = await call_error(c, "merge_to_main")
        assert error_of(lint)["code"] == "ERR_QUALITY_GATE_FAILED", text(lint)
        assert git.current_branch(repo) == branch and not git.is_ancestor(
            repo, green["commit_hash"], "main"
        )
        (repo / "src" / "app.py").write_text("x = 2\n")
        await call_ok(c, "commit_tdd_phase", phase="refactor", component="the parser")

        comment = _data(
            await call_ok(
                c, "add_issue_comment", issue_number=number, body="ready", comment_type="progress"
            )
        )
        assert comment["body"] == "**📝 Progress Update**\n\nready"

        merged = _data(await call_ok(c, "merge_to_main"))
        assert merged["merged_branch"] == branch and merged["target_branch"] == "main"
        assert merged["commit_hash"] == git.head(repo, "main")

    assert git.current_branch(repo) == "main"
    assert git.branch_tip(repo, branch) is None  # deleted
    assert git.is_ancestor(repo, red["commit_hash"], "main")
    assert git.is_ancestor(repo, green["commit_hash"], "main")
    assert (repo / "src" / "parse.py").read_text() == "def parse(): return 1\n"
    issue = _read(db, lambda q: issues.get(q, number))
    assert issue.status == Status.DONE
    kinds = [e.kind for e in _read(db, lambda q: notes.history(q, number))]
    assert kinds.count("tdd_committed") == 4 and "branch_linked" in kinds
    assert "gates_run" in kinds


async def test_refusals_carry_the_seed_codes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "app")
    db = tmp_path / "q.db"
    number = _issue(db, "Refusals")
    monkeypatch.chdir(repo)  # the server's checkout
    async with Client(make_server(db, "git", run_id="run-a")) as c:
        (repo / "README.md").write_text("dirty\n")
        dirty = await call_error(c, "create_feature_branch", branch_type="feature", name="x")
        assert error_of(dirty)["code"] == "ERR_UNCOMMITTED_CHANGES"
        assert text(dirty).startswith("ERR_UNCOMMITTED_CHANGES: ")
        git.run(["checkout", "--", "README.md"], cwd=repo)
        await call_ok(c, "create_feature_branch", branch_type="feature", name="x")
        git.switch(repo, "main")
        exists = await call_error(c, "create_feature_branch", branch_type="feature", name="x")
        assert error_of(exists)["code"] == "ERR_BRANCH_EXISTS"
        bad = await call_error(c, "create_feature_branch", branch_type="feature", name="No Way")
        assert error_of(bad)["code"] == "INVALID_INPUT"
        on_main = await call_error(c, "link_issue_to_branch", issue_number=number)
        assert error_of(on_main)["code"] == "ON_DEFAULT_BRANCH"
        nothing = await call_error(c, "merge_to_main")
        assert error_of(nothing)["code"] == "ON_DEFAULT_BRANCH"


def test_start_fails_fast_without_git(tmp_path: Path) -> None:
    """Contract C's lesson: with the git steps' profile named and no git on PATH, ``workq serve``
    refuses to start with one clear line (and nothing on stdout)."""
    bare_path = tmp_path / "bin"
    bare_path.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PATH"}
    env["PATH"] = str(bare_path)
    done = subprocess.run(
        [sys.executable, *serve_argv("--toolsets", "default,git", db=tmp_path / "q.db")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode != 0
    assert done.stdout == ""
    assert "GIT_UNAVAILABLE" in done.stderr and "git is not installed" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
