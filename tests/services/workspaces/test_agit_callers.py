"""agit's callers through a real ``workq serve --profile agit`` over stdio (issue 40): one
server acts for several agents (the agent ids it bound), and an agent restarted behind a
new server with its run id registers again and acts on its own claims.

- Two agents registered on one server, each claiming a task with its worktree: merging the
  first lands it and completes its task (it answered INTERNAL with main changed, the plan
  gate checking "at most two run ids" against the server's three).
- An agent restarted with its server's run id gets its agent id back by registering, and
  its merge of its own task succeeds (it was refused NOT_HOLDER: "held by agent-..., not by
  you (agent-4)").
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.server.conftest import call_ok, serve_argv, text
from tests.services.workspaces.gitrepo import commit, log, make_repo
from workq.config import Settings
from workq.domain.authority import Authority
from workq.services.queue import issues, notes
from workq.services.runtime import open_queue
from workq.services.workspaces import repositories
from workq.vcs import git

pytestmark = pytest.mark.anyio


def body(result: Any) -> Any:
    return json.loads(text(result))


@asynccontextmanager
async def agit(db: Path, *args: str) -> AsyncIterator[Client]:
    """``workq serve --profile agit`` in its own process, the merges trusted."""
    argv = serve_argv("--profile", "agit", "--tests-gate", "trust", *args, db=db)
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKQ_")}
    params = StdioServerParameters(command=sys.executable, args=argv, cwd=db.parent, env=env)
    with (db.parent / "server.log").open("a") as errlog:
        async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=120) as c:
            yield c


def _setup(tmp_path: Path, titles: list[str]) -> tuple[Path, Path, list[int]]:
    db, repo = tmp_path / "q.db", make_repo(tmp_path / "app")
    q = open_queue(Settings(db_path=db), migrate=True)
    try:
        repositories.add(q, "app", repo)
        numbers = [issues.create(q, title=t).number for t in titles]
        for n in numbers:
            repositories.assign(q, n, "app", by=Authority.of(()))
    finally:
        q.db.dispose()
    return db, repo, numbers


def _issue(db: Path, number: int) -> tuple[str, str | None, list[str]]:
    q = open_queue(Settings(db_path=db))
    try:
        found = issues.get(q, number)
        kinds = [e.kind for e in notes.history(q, number)]
        return found.status.value, found.claimed_by, kinds
    finally:
        q.db.dispose()


async def test_two_agents_of_one_server_each_merge_their_task(tmp_path: Path) -> None:
    db, repo, (first, second) = _setup(tmp_path, ["the parser", "the printer"])
    async with agit(db) as server:
        a = body(await call_ok(server, "agit_register_agent", name="a1", type="claude"))
        b = body(await call_ok(server, "agit_register_agent", name="a2", type="claude"))
        trees = {}
        for agent, n in ((a, first), (b, second)):
            claimed = body(
                await call_ok(
                    server,
                    "agit_claim_task",
                    task_id=f"t-{n}",
                    agent_id=agent["agent_id"],
                    worktree=True,
                )
            )
            assert claimed["claimed"] is True and claimed["agent_id"] == agent["agent_id"]
            commit(Path(claimed["path"]), {f"src/{n}.py": f"n = {n}\n"}, f"work on #{n}")
            status = body(await call_ok(server, "agit_repo_status", repo="app"))
            (tree,) = [w for w in status["worktrees"] if w["path"] == claimed["path"]]
            trees[n] = tree["id"]
        main = git.head(repo)

        merged = await server.call_tool(
            "agit_merge_worktree", {"repo": "app", "worktree_id": trees[first]}
        )
        assert not merged.is_error, text(merged)  # not INTERNAL with main moved
        answer = body(merged)
        assert answer["merged"] is True and answer["already_merged"] is False
        assert git.head(repo) != main and git.head(repo) == answer["commit"]
        status, holder, kinds = _issue(db, first)
        assert (status, holder) == ("done", None)  # the merge completed its task
        assert kinds.count("completed") == 1 and "worktree_merged" in kinds
        assert _issue(db, second)[:2] == ("in_progress", b["agent_id"])  # the other's stays

        again = body(
            await call_ok(server, "agit_merge_worktree", repo="app", worktree_id=trees[first])
        )
        assert again["already_merged"] is True and git.head(repo) == answer["commit"]
        done = body(
            await call_ok(server, "agit_merge_worktree", repo="app", worktree_id=trees[second])
        )
        assert done["merged"] is True
        tasks = body(await call_ok(server, "agit_list_tasks", repo="app", status="completed"))
        assert sorted(t["id"] for t in tasks) == [f"t-{first}", f"t-{second}"]
    assert log(repo).count(f"work on #{first}") == 1
    assert git.run(["branch", "--format=%(refname:short)"], cwd=repo).lines == ["main"]


async def test_an_agent_restarted_with_its_run_id_merges_its_own_task(tmp_path: Path) -> None:
    db, repo, (number,) = _setup(tmp_path, ["fix the login"])
    async with agit(db, "--run-id", "agent-4") as before:
        me = body(await call_ok(before, "agit_register_agent", name="claude-1", type="claude"))
        agent = me["agent_id"]
        claimed = body(
            await call_ok(
                before, "agit_claim_task", task_id=f"t-{number}", agent_id=agent, worktree=True
            )
        )
        commit(Path(claimed["path"]), {"src/login.py": "ok = True\n"}, "fix the login")
        status = body(await call_ok(before, "agit_repo_status", repo="app"))
        (tree,) = status["worktrees"]
    main = git.head(repo)

    # The agent restarts behind a new server with the same run id (agent-4): its claim is
    # held by its agent id, which it gets back by registering again.
    async with agit(db, "--run-id", "agent-4") as after:
        back = body(await call_ok(after, "agit_register_agent", name="claude-1", type="claude"))
        assert back["agent_id"] == agent
        merged = await after.call_tool(
            "agit_merge_worktree", {"repo": "app", "worktree_id": tree["id"]}
        )
        assert not merged.is_error, text(merged)  # not NOT_HOLDER "not by you (agent-4)"
        assert body(merged)["merged"] is True
    assert git.head(repo) != main
    status_, holder, kinds = _issue(db, number)
    assert (status_, holder) == ("done", None) and "worktree_merged" in kinds


async def test_an_agent_id_another_live_server_acts_as_is_refused(tmp_path: Path) -> None:
    """Naming a live caller's run id does not make you that caller: the agent id another
    server bound (registered, claimed under) is refused RUN_ID_IN_USE by a second server,
    which binds nothing and changes nothing."""
    db, _, (number, other) = _setup(tmp_path, ["mine", "another"])
    async with (
        agit(db, "--run-id", "server-1") as first,
        agit(db, "--run-id", "server-2") as second,
    ):
        me = body(await call_ok(first, "agit_register_agent", name="claude-1", type="claude"))
        agent = me["agent_id"]
        await call_ok(first, "agit_claim_task", task_id=f"t-{number}", agent_id=agent)
        for tool, arguments in (
            ("agit_claim_task", {"task_id": f"t-{other}", "agent_id": agent}),
            ("agit_heartbeat", {"agent_id": agent}),
            ("agit_register_agent", {"name": "claude-1", "type": "claude"}),
        ):
            refused = await second.call_tool(tool, arguments)
            assert refused.is_error, (tool, text(refused))
            assert body(refused)["code"] == "RUN_ID_IN_USE", (tool, text(refused))
        assert _issue(db, other)[:2] == ("open", None)
        assert _issue(db, number)[:2] == ("in_progress", agent)
