"""Seed 003's agit through servers on real git repositories: the seed's flows end to end
(a server built in this process), and four agents in four real ``workq serve`` processes
over stdio each claiming with a worktree, committing and merging."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.conftest import PG_URL, drop_pg_database, fresh_pg_database
from tests.server.conftest import call_ok, make_server, serve_argv, text
from tests.services.workspaces.gitrepo import commit, make_repo
from tests.workq_cli import workq
from workq.config import Settings
from workq.domain.authority import Authority
from workq.server.app import build_server
from workq.services.queue import issues
from workq.services.runtime import open_queue
from workq.services.workspaces import repositories
from workq.vcs import git

pytestmark = pytest.mark.anyio


def body(result: Any) -> Any:
    return json.loads(text(result))


async def test_default_toolset_has_no_agit_tools(tmp_path: Path) -> None:
    async with Client(build_server(Settings(db_path=tmp_path / "q.db"))) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        refused = await client.call_tool("issue_claim", {"number": 1, "worktree": True})
    assert tools and not any(n.startswith("agit_") for n in tools)
    # Nor do the issue tools carry the workspace arguments and fields without it.
    assert "worktree" not in tools["issue_claim"].input_schema["properties"]
    assert "repository" not in tools["issue_ready"].input_schema["properties"]
    assert "worktree" not in json.dumps(tools["issue_get"].output_schema)
    assert refused.is_error and "unknown argument(s): worktree" in text(refused)


async def test_pending_tasks_list_the_claimable_first_in_claim_order(tmp_path: Path) -> None:
    """An agent picking from agit_list_tasks(status="pending") picks a task it can claim:
    those first, as claims take them (priority, then age), the others marked."""
    db = tmp_path / "q.db"
    repo = make_repo(tmp_path / "myapp")
    assert workq("--db", db, "repo", "add", "myapp", str(repo)).returncode == 0
    for title, priority in (("low one", "low"), ("urgent one", "urgent"), ("after it", "high")):
        made = workq("--db", db, "create", title, "-p", priority, "--repo", "myapp")
        assert made.returncode == 0, made.stderr
    assert workq("--db", db, "depend", "3", "--on", "2").returncode == 0
    async with Client(make_server(db, "default,agit")) as client:
        pending = body(await call_ok(client, "agit_list_tasks", repo="myapp", status="pending"))
    assert [(t["id"], t["claimable"]) for t in pending] == [
        ("t-2", True),
        ("t-1", True),
        ("t-3", False),
    ]


async def test_the_seed_flows_end_to_end(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    repo = make_repo(tmp_path / "myapp")
    added = workq("--db", db, "repo", "add", "myapp", str(repo))
    assert added.returncode == 0, added.stderr
    # The tests gate trusted: merges without quality gate runs (tests/services/coding has those).
    async with Client(make_server(db, "default,agit", tests_gate="trust")) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        agit = sorted(n for n in tools if n.startswith("agit_"))
        assert agit == sorted(
            [
                "agit_list_repos",
                "agit_repo_status",
                "agit_spawn_worktree",
                "agit_remove_worktree",
                "agit_check_conflicts",
                "agit_list_tasks",
                "agit_claim_task",
                "agit_complete_task",
                "agit_merge_worktree",
                "agit_register_agent",
                "agit_heartbeat",
            ]
        )
        assert all(tools[n].output_schema for n in agit)

        agent = body(await call_ok(client, "agit_register_agent", name="claude-1", type="claude"))
        assert set(agent) == {"agent_id", "name", "type"} and agent["name"] == "claude-1"
        me = agent["agent_id"]
        assert body(await call_ok(client, "agit_heartbeat", agent_id=me)) == {
            "ok": True,
            "agent_id": me,
        }

        (listed,) = body(await call_ok(client, "agit_list_repos"))
        assert listed == {
            "name": "myapp",
            "path": str(repo.resolve()),
            "default_branch": "main",
            "remote_url": None,
            "worktree_count": 0,
            "task_count": 0,
        }

        spawned = body(
            await call_ok(
                client, "agit_spawn_worktree", repo="myapp", task="fix authentication bug", agent=me
            )
        )
        assert spawned["branch"] == "task/1-fix-authentication-bug"
        assert Path(spawned["path"]).parent == repo.resolve() / ".worktrees"
        (task,) = body(await call_ok(client, "agit_list_tasks", repo="myapp"))
        assert task["id"] == spawned["task_id"] == "t-1"
        assert (task["description"], task["status"], task["agent"]) == (
            "fix authentication bug",
            "in_progress",
            me,
        )
        # The task id round-trips: claimed already, so the seed's refusal.
        refused = await client.call_tool("agit_claim_task", {"task_id": "t-1", "agent_id": "x"})
        assert refused.is_error
        assert body(refused)["error"] == 'task "t-1" not found or already claimed'
        assert body(refused)["code"] == "ALREADY_CLAIMED"
        assert body(refused)["why"].startswith("Issue #1 is held by ")

        # A second task, claimed by id with its worktree; both edit one file.
        created = await call_ok(client, "issue_create", title="tune the login form")
        number = created.structured_content["number"]
        assert workq("--db", db, "repo", "assign", str(number), "myapp").returncode == 0
        claimed = body(
            await call_ok(
                client, "agit_claim_task", task_id=f"t-{number}", agent_id=me, worktree=True
            )
        )
        assert claimed["claimed"] is True and claimed["task_id"] == f"t-{number}"
        # the claim as issue_claim answers it, beside the contract's keys
        assert (claimed["number"], claimed["fence"]) == (number, 1)
        assert claimed["lease_expires_at"]
        second = Path(claimed["path"])
        second_id = claimed["worktree_id"]  # what merge and remove take, in the answer
        commit(Path(spawned["path"]), {"src/app.py": "x = 'auth'\n"}, "auth fix")
        commit(second, {"src/app.py": "x = 'form'\n"}, "form tweak")

        scan = body(await call_ok(client, "agit_check_conflicts", repo="myapp"))
        assert scan["scanned_worktrees"] == 2
        (conflict,) = scan["conflicts"]
        assert conflict["file"] == "src/app.py" and len(conflict["worktrees"]) == 2

        status = body(await call_ok(client, "agit_repo_status", repo="myapp"))
        assert {w["task"] for w in status["worktrees"]} == {
            "fix authentication bug",
            "tune the login form",
        }
        assert status["conflicts"][0]["file"] == "src/app.py"
        # The task of each worktree by id too, as claim, complete and merge take it.
        assert {w["id"]: w["task_id"] for w in status["worktrees"]} == {
            spawned["worktree_id"]: "t-1",
            second_id: f"t-{number}",
        }

        merged = body(
            await call_ok(
                client, "agit_merge_worktree", repo="myapp", worktree_id=spawned["worktree_id"]
            )
        )
        assert merged == {
            "merged": True,
            "branch": "task/1-fix-authentication-bug",
            "into": "main",
            "worktree_cleaned": True,
            "commit": git.head(repo),
            "already_merged": False,
        }
        head = git.head(repo)
        conflicted = await client.call_tool(
            "agit_merge_worktree", {"repo": "myapp", "worktree_id": second_id}
        )
        assert conflicted.is_error
        answer = body(conflicted)
        assert answer["error"] == "merge would result in conflicts"
        assert answer["conflicting_files"] == ["src/app.py"]
        assert answer["code"] == "MERGE_CONFLICT"
        assert git.head(repo) == head and git.dirty_paths(repo) == [] and second.is_dir()

        tasks = body(await call_ok(client, "agit_list_tasks", repo="myapp", status="completed"))
        assert [t["id"] for t in tasks] == ["t-1"]
        removed = body(
            await call_ok(
                client,
                "agit_remove_worktree",
                repo="myapp",
                worktree_id=second_id,
            )
        )
        assert removed == {"removed": True, "worktree_id": second_id}
        assert not second.exists()
        # Its branch had commits main lacks: kept.
        assert git.branch_exists(repo, f"task/{number}-tune-the-login-form")
        done = body(
            await call_ok(client, "agit_complete_task", task_id=f"t-{number}", result="abandoned")
        )
        assert done == {"completed": True, "task_id": f"t-{number}"}
        missing = await client.call_tool("agit_repo_status", {"repo": "nope"})
        assert missing.is_error and "not registered" in body(missing)["error"]


AGENTS = 4
TASKS = 12


async def _agent(client: Client, index: int, repo: Path, landed: list[int]) -> None:
    me = body(await call_ok(client, "agit_register_agent", name=f"a{index}", type="custom"))
    agent_id = me["agent_id"]
    while True:
        got = await call_ok(
            client, "issue_claim_next", run_id=agent_id, repository="app", worktree=True
        )
        issue = got.structured_content
        if not issue["claimed"]:
            return
        number, where = issue["number"], issue["worktree"]
        path = Path(where["path"])
        assert git.current_branch(path) == where["branch"]
        files = {f"work/{number}.txt": f"{number}\n"}
        await anyio.to_thread.run_sync(commit, path, files, f"work on #{number}")
        merged = await call_ok(
            client, "agit_merge_worktree", repo="app", worktree_id=where["worktree_id"]
        )
        assert json.loads(text(merged))["merged"] is True
        landed.append(number)


@asynccontextmanager
async def serve(where: Settings, log: Path) -> AsyncIterator[Client]:
    url = where.database_url
    argv = serve_argv(
        "--toolsets",
        "default,agit",
        "--tests-gate",
        "trust",
        db=None if url else where.db_path,
        url=url,
    )
    params = StdioServerParameters(command=sys.executable, args=argv, cwd=log.parent)
    with log.open("a") as errlog:
        async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=120) as c:
            yield c


ENGINES = [
    "sqlite",
    pytest.param(
        "postgresql",
        marks=[
            pytest.mark.postgres,
            pytest.mark.skipif(PG_URL is None, reason="WORKQ_TEST_PG_URL is not set"),
        ],
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
async def test_four_agents_in_four_processes_merge_every_task_exactly_once(
    tmp_path: Path, engine: str
) -> None:
    """The merge lease lives in the database: on PostgreSQL it serialises merges exactly as
    on SQLite."""
    if engine == "postgresql":
        assert PG_URL is not None
        url = fresh_pg_database(PG_URL)
        where = Settings(database_url=url)
    else:
        url = None
        where = Settings(db_path=tmp_path / "q.db")
    try:
        await _four_agents(tmp_path, where)
    finally:
        if url is not None and PG_URL is not None:
            drop_pg_database(PG_URL, url)


async def _four_agents(tmp_path: Path, where: Settings) -> None:
    repo = make_repo(tmp_path / "app")
    queue = open_queue(where, migrate=True)
    try:
        repositories.add(queue, "app", repo)
        for n in range(TASKS):
            number = issues.create(queue, title=f"piece {n}").number
            repositories.assign(queue, number, "app", by=Authority.of(()))
    finally:
        queue.db.dispose()
    landed: list[int] = []
    async with anyio.create_task_group() as group:
        for index in range(AGENTS):

            async def run(index: int = index) -> None:
                async with serve(where, tmp_path / f"server{index}.log") as client:
                    await _agent(client, index, repo, landed)

            group.start_soon(run)
    assert sorted(landed) == list(range(1, TASKS + 1))
    subjects = git.run(["log", "--format=%s", "main"], cwd=repo).lines
    for number in landed:
        assert subjects.count(f"work on #{number}") == 1
        assert (repo / "work" / f"{number}.txt").read_text() == f"{number}\n"
    assert git.dirty_paths(repo) == []
    assert [w.path for w in git.worktrees(repo)] == [repo.resolve()]
    assert git.run(["branch", "--format=%(refname:short)"], cwd=repo).lines == ["main"]
    queue = open_queue(where)
    try:
        assert all(issues.get(queue, n).status.value == "done" for n in landed)
    finally:
        queue.db.dispose()
