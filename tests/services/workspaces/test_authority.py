"""Who may act on a claim, through agit's tools and `workq merge`: two agents (servers with
their own run ids) on one queue and one real git repository. Only the holder completes,
merges or removes its work; a refused call changes nothing (issue 23, items 1-3 and 7-9).
On SQLite and, with WORKQ_TEST_PG_URL, on PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from sqlalchemy import func, select

from tests.server.conftest import call_ok, text
from tests.services.workspaces.gitrepo import commit, make_repo
from tests.workq_cli import workq
from workq.config import Settings
from workq.db.tables import comments, events
from workq.db.tables import issues as issues_t
from workq.domain.authority import Authority
from workq.server.app import build_server
from workq.services.queue import dependencies, issues, notes
from workq.services.runtime import open_queue
from workq.services.workspaces import claiming, repositories
from workq.vcs import git

pytestmark = pytest.mark.anyio


def body(result: Any) -> Any:
    return json.loads(text(result))


@pytest.fixture
def db(settings: Settings, tmp_path: Path) -> Settings:
    """The queue's settings (a new database on each engine)."""
    return settings.model_copy(update={"plans_dir": tmp_path / "plans"})


def _where(db: Settings) -> list[str]:
    """The CLI's options naming that database."""
    if db.database_url:
        return ["--database-url", db.database_url]
    return ["--db", str(db.db_path)]


@pytest.fixture
def repo(db: Settings, tmp_path: Path) -> Path:
    path = make_repo(tmp_path / "app")
    q = open_queue(db)
    repositories.add(q, "app", path)
    q.db.dispose()
    return path


def _agent(db: Settings, run_id: str) -> Client:
    own = {"toolsets": "default,agit", "run_id": run_id, "tests_gate": "trust"}
    return Client(build_server(db.model_copy(update=own)))


def _state(db: Settings, number: int) -> tuple[str, str | None, int, list[str]]:
    q = open_queue(db)
    try:
        issue = issues.get(q, number)
        with q.db.read() as conn:
            stored = conn.execute(select(func.count()).select_from(comments)).scalar_one()
        kinds = [e.kind for e in notes.history(q, number)]
        return issue.status.value, issue.claimed_by, stored, kinds
    finally:
        q.db.dispose()


async def test_another_agent_cannot_complete_merge_or_remove_what_it_does_not_hold(
    db: Settings, repo: Path
) -> None:
    async with _agent(db, "agent-b") as b, _agent(db, "agent-a") as a:
        spawned = body(await call_ok(b, "agit_spawn_worktree", repo="app", task="login form"))
        path, wid = Path(spawned["path"]), spawned["worktree_id"]
        commit(path, {"src/app.py": "x = 'b'\n"}, "b's work")
        (path / "notes.txt").write_text("not committed yet\n")
        main, before = git.head(repo), _state(db, 1)
        assert before[:2] == ("in_progress", "agent-b")

        refusals = [
            await a.call_tool("agit_complete_task", {"task_id": "t-1", "result": "mine now"}),
            await a.call_tool("agit_merge_worktree", {"repo": "app", "worktree_id": wid}),
            await a.call_tool(
                "agit_remove_worktree", {"repo": "app", "worktree_id": wid, "force": True}
            ),
        ]
        for refused in refusals:
            assert refused.is_error, text(refused)
            assert body(refused)["code"] == "NOT_HOLDER", text(refused)
            assert "agent-b" in body(refused)["error"]
        # Nothing moved: the claim, the comments, the history, main, the worktree and its
        # uncommitted file.
        assert _state(db, 1) == before
        assert git.head(repo) == main
        assert (path / "notes.txt").read_text() == "not committed yet\n"

        (path / "notes.txt").unlink()
        merged = body(await call_ok(b, "agit_merge_worktree", repo="app", worktree_id=wid))
        assert merged["merged"] is True and git.head(repo) != main
    status, holder, _, kinds = _state(db, 1)
    assert (status, holder) == ("done", None) and "completed" in kinds
    q = open_queue(db)
    history = {e.kind: e for e in notes.history(q, 1)}
    q.db.dispose()
    assert history["completed"].actor == "agent-b"  # the holder, not the server's run id
    landed = history["worktree_merged"].after
    assert landed is not None and landed["commit"] == git.head(repo)


async def test_a_refused_completion_keeps_no_comment(db: Settings, repo: Path) -> None:
    async with _agent(db, "agent-b") as b:
        await call_ok(b, "agit_spawn_worktree", repo="app", task="needs the schema first")
        await call_ok(b, "issue_create", title="the schema")
        q = open_queue(db)
        dependencies.depend(q, blocker=2, blocked=1)
        q.db.dispose()
        before = _state(db, 1)
        refused = await b.call_tool("agit_complete_task", {"task_id": "t-1", "result": "done!"})
        assert refused.is_error and body(refused)["code"] == "OPEN_BLOCKERS"
        assert _state(db, 1) == before  # no comment stored for a completion that did not happen


@pytest.mark.usefixtures("trusted_tests_gate")
def test_workq_merge_is_for_the_holder_or_forced(db: Settings, repo: Path) -> None:
    q = open_queue(db)
    n = issues.create(q, title="a change").number
    repositories.assign(q, n, "app", by=Authority.of(()))
    info = claiming.claim(q, n, Authority.of({"agent-b"}), worktree=True).worktree
    assert info is not None
    q.db.dispose()
    commit(Path(info.path), {"src/app.py": "x = 2\n"}, "the change")
    main = git.head(repo)

    refused = workq(*_where(db), "merge", str(n), "--run-id", "agent-a")
    assert refused.returncode == 1 and "NOT_HOLDER" in refused.stderr, refused.stderr
    assert git.head(repo) == main and Path(info.path).is_dir()

    forced = workq(*_where(db), "--as", "alice", "merge", str(n), "--force")
    assert forced.returncode == 0, forced.stderr
    assert git.head(repo) != main
    q = open_queue(db)
    (done,) = [e for e in notes.history(q, n) if e.kind == "completed"]
    q.db.dispose()
    assert done.actor == "alice" and done.after and done.after["override"] == "workq merge --force"


def _rows(db: Settings) -> list[tuple[Any, ...]]:
    """Every issue and event, as stored."""
    q = open_queue(db)
    try:
        with q.db.read() as conn:
            found = [tuple(r) for r in conn.execute(select(issues_t).order_by(issues_t.c.number))]
            return found + [tuple(r) for r in conn.execute(select(events).order_by(events.c.id))]
    finally:
        q.db.dispose()


async def test_a_refused_spawn_creates_assigns_and_claims_nothing(
    db: Settings, repo: Path, tmp_path: Path
) -> None:
    other = make_repo(tmp_path / "other")
    q = open_queue(db)
    repositories.add(q, "other", other)
    q.db.dispose()
    async with _agent(db, "agent-b") as b, _agent(db, "agent-a") as a:
        await call_ok(b, "issue_create", title="held elsewhere")
        await call_ok(b, "issue_claim", number=1)
        before = _rows(db)
        refusals = {
            "INVALID_INPUT": {"repo": "app", "task": "b1", "branch": "../../x"},
            "ALREADY_CLAIMED": {"repo": "other", "task": "t-1"},
            "NOT_FOUND": {"repo": "nope", "task": "new work"},
        }
        for code, arguments in refusals.items():
            refused = await a.call_tool("agit_spawn_worktree", arguments)
            assert refused.is_error and body(refused)["code"] == code, text(refused)
        assert _rows(db) == before  # no new issue, no move to "other", no claim, no event
        assert git.worktrees(other)[1:] == [] and git.worktrees(repo)[1:] == []


async def test_the_default_branch_is_never_a_task_branch(db: Settings, repo: Path) -> None:
    git.run(["switch", "-q", "-c", "side"], cwd=repo)
    main = git.branch_tip(repo, "main")
    async with _agent(db, "agent-a") as a:
        before = _rows(db)
        refused = await a.call_tool(
            "agit_spawn_worktree", {"repo": "app", "task": "work", "branch": "main"}
        )
        assert refused.is_error and body(refused)["code"] == "INVALID_INPUT"
        assert "default branch" in body(refused)["error"]
        assert _rows(db) == before
    assert git.branch_tip(repo, "main") == main


async def test_work_in_a_worktree_is_not_dropped_by_completing_or_releasing(
    db: Settings, repo: Path
) -> None:
    async with _agent(db, "agent-a") as a:
        spawned = body(await call_ok(a, "agit_spawn_worktree", repo="app", task="a change"))
        branch = spawned["branch"]
        commit(Path(spawned["path"]), {"src/app.py": "x = 3\n"}, "the change")
        before = _rows(db)
        for tool in ("issue_complete", "issue_release"):
            refused = await a.call_tool(tool, {"number": 1})
            assert refused.is_error, text(refused)
            assert "UNMERGED_WORK" in text(refused) and "1 commit" in text(refused)
            assert branch in text(refused)
        assert _rows(db) == before
        await call_ok(a, "issue_release", number=1, discard=True)
    status, holder, _, _ = _state(db, 1)
    assert (status, holder) == ("open", None)
    assert git.branch_exists(repo, branch)  # the work stays on its branch


async def test_registering_again_gives_an_agent_its_id_back(db: Settings, repo: Path) -> None:
    async with _agent(db, "server-1") as first:
        me = body(await call_ok(first, "agit_register_agent", name="claude-1", type="claude"))
        spawned = body(
            await call_ok(first, "agit_spawn_worktree", repo="app", task="t", agent=me["agent_id"])
        )
    # The agent restarts behind a new server: the same name and type, the same id, so it
    # may act on its own claim; another type is another agent.
    async with _agent(db, "server-2") as again:
        back = body(await call_ok(again, "agit_register_agent", name="claude-1", type="claude"))
        other = body(await call_ok(again, "agit_register_agent", name="claude-1", type="codex"))
        assert back["agent_id"] == me["agent_id"] and other["agent_id"] != me["agent_id"]
        await call_ok(
            again, "agit_claim_task", task_id=spawned["task_id"], agent_id=back["agent_id"]
        )
        done = body(await call_ok(again, "agit_complete_task", task_id=spawned["task_id"]))
    assert done == {"completed": True, "task_id": spawned["task_id"]}
