"""workq's own workspace and coding-loop tools (toolsets ``workspaces`` and ``coding``):
a real ``workq serve`` in a real repository with gates and docs, and two agents on one
queue where only the holder merges. A refused merge changes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.server.conftest import call_error, call_ok, error_of, stdio_server, text
from tests.services.coding.gaterepo import gated_repo
from tests.services.workspaces.gitrepo import commit, log, repository_state
from workq.config import Settings
from workq.server.app import build_server
from workq.services.runtime import open_queue
from workq.services.workspaces import repositories

pytestmark = pytest.mark.anyio
NATIVE = "default,workspaces,coding"


def data(result: Any) -> dict[str, Any]:
    assert result.structured_content is not None
    found: dict[str, Any] = result.structured_content
    return found


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = gated_repo(tmp_path / "app")
    commit(path, {"docs/guide.md": "# Guide\n\nHow to parse the input files.\n"}, "docs")
    return path


def _register(db: Path, repo: Path) -> None:
    q = open_queue(Settings(db_path=db))
    try:
        repositories.add(q, "app", repo)
    finally:
        q.db.dispose()


async def test_the_coding_loop_with_workqs_own_tools(tmp_path: Path, repo: Path) -> None:
    db = tmp_path / "q.db"
    _register(db, repo)
    async with stdio_server(db, "--toolsets", NATIVE, "--run-id", "run-a", cwd=repo) as c:
        listed = data(await call_ok(c, "repo_list"))
        assert [r["name"] for r in listed["repos"]] == ["app"]
        await call_ok(c, "issue_create", title="Parse input", repository="app")
        claimed = data(await call_ok(c, "issue_claim", number=1, worktree=True))
        work = Path(claimed["worktree"]["path"])

        context = data(await call_ok(c, "work_context"))
        assert context["active_issue"]["number"] == 1
        hits = data(await call_ok(c, "docs_search", query="parse input"))
        assert hits["results"][0]["file_path"] == "docs/guide.md"

        commit(work, {"src/app.py": "x = 'FAIL'\n"}, "feat: parse")
        failed = data(await call_ok(c, "issue_gates"))
        assert failed["number"] == 1 and not failed["overall_pass"]
        refused = await call_error(c, "issue_merge", number=1)
        assert error_of(refused)["code"] == "ERR_TESTS_FAILING"
        assert log(repo) == ["docs", "first"]

        commit(work, {"src/app.py": "x = 2\n"}, "fix: parse")
        status = data(await call_ok(c, "repo_status", repo="app"))
        assert [w["number"] for w in status["worktrees"]] == [1]
        merged = await call_ok(c, "issue_merge", number=1)
        assert data(merged)["merged"] and text(merged).startswith("Merged issue #1: ")
        assert "fix: parse" in log(repo)
        again = data(await call_ok(c, "issue_merge", number=1))
        assert again["already_merged"] is True
        shown = data(await call_ok(c, "issue_get", number=1))
        assert shown["status"] == "done"


async def test_only_the_holder_merges_and_a_refusal_changes_nothing(
    tmp_path: Path, repo: Path
) -> None:
    db = tmp_path / "q.db"
    _register(db, repo)

    def agent(run_id: str) -> Client:
        settings = Settings(db_path=db, toolsets=NATIVE, run_id=run_id, tests_gate="trust")
        return Client(build_server(settings))

    async with agent("agent-a") as a, agent("agent-b") as b:
        await call_ok(a, "issue_create", title="A's work", repository="app")
        await call_ok(a, "issue_create", title="No worktree")
        work = Path(
            data(await call_ok(a, "issue_claim", number=1, worktree=True))["worktree"]["path"]
        )
        commit(work, {"src/app.py": "x = 3\n"}, "a's change")
        before = repository_state(repo)

        refused = await call_error(b, "issue_merge", number=1)
        assert error_of(refused)["code"] == "NOT_HOLDER"
        unknown = await call_error(a, "issue_merge", number=1, fence=999)
        assert error_of(unknown)["code"] == "INVALID_INPUT"  # no claim had that token
        assert repository_state(repo) == before
        assert data(await call_ok(a, "issue_get", number=1))["status"] == "in_progress"

        await call_ok(b, "issue_claim", number=2)
        missing = await call_error(b, "issue_merge", number=2)
        assert error_of(missing)["code"] == "NOT_FOUND"
        assert "issue_claim with worktree=true" in error_of(missing)["hint"]

        assert data(await call_ok(a, "issue_merge", number=1))["merged"]


async def test_a_block_says_where_the_worktree_stays_and_can_remove_it(
    tmp_path: Path, repo: Path
) -> None:
    db = tmp_path / "q.db"
    _register(db, repo)

    def agent(toolsets: str, run_id: str) -> Client:
        return Client(build_server(Settings(db_path=db, toolsets=toolsets, run_id=run_id)))

    async with agent(NATIVE, "agent-a") as a, agent("default", "agent-b") as plain:
        tools = {t.name: t for t in (await plain.list_tools()).tools}
        assert "remove_worktree" not in tools["issue_block"].input_schema["properties"]
        for title in ("Kept, then removed", "Dirty"):
            await call_ok(a, "issue_create", title=title, repository="app")
        claimed = data(await call_ok(a, "issue_claim", number=1, worktree=True))["worktree"]
        work, wid = Path(claimed["path"]), claimed["worktree_id"]

        kept = await call_ok(a, "issue_block", number=1, reason="waits for a decision")
        assert text(kept).splitlines() == [
            "Blocked issue #1: waits for a decision",
            f"Its worktree {wid} at {work} (branch {claimed['branch']}) stays for whoever "
            "takes it up; remove it with issue_block with remove_worktree=true",
        ]
        assert data(kept)["worktree"]["removed"] is False and work.is_dir()
        # A server without the workspaces toolset has no tool for it: the command.
        said = text(await call_ok(plain, "issue_block", number=1, reason="still waits"))
        assert f"remove it with 'workq worktree remove app {wid}' in a terminal" in said

        removed = await call_ok(
            a, "issue_block", number=1, reason="still waits", remove_worktree=True
        )
        assert f"Removed its worktree {wid} at {work}" in text(removed)
        assert data(removed)["worktree"]["removed"] is True and not work.exists()

        dirty = Path(
            data(await call_ok(a, "issue_claim", number=2, worktree=True))["worktree"]["path"]
        )
        (dirty / "notes.txt").write_text("not committed\n")
        refused = await call_error(a, "issue_block", number=2, reason="stuck", remove_worktree=True)
        assert error_of(refused)["code"] == "WORKTREE_DIRTY"
        issue = data(await call_ok(a, "issue_get", number=2))
        assert issue["status"] == "in_progress" and not issue["is_blocked"]  # nothing done
        assert dirty.is_dir()
