"""A stale holder's git step: run-a's lease lapsed and run-b claimed the issue again (a new
fence) and works in its worktree. run-a's commit_tdd_phase is refused like its heartbeat or
completion, and neither commits into run-b's worktree nor sweeps up its files (issue 23,
item 4). On SQLite and, with WORKQ_TEST_PG_URL, on PostgreSQL."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from mcp import Client
from sqlalchemy import update

from tests.server.conftest import call_ok, error_of
from tests.services.coding.gaterepo import gated_repo
from tests.services.workspaces.gitrepo import make_repo
from workq.config import Settings
from workq.db.tables import issues as issues_t
from workq.domain.authority import Authority
from workq.server.app import build_server
from workq.services.queue import claims, issues, notes
from workq.services.runtime import open_queue
from workq.services.workspaces import claiming, repositories
from workq.vcs import git

pytestmark = pytest.mark.anyio


async def test_a_stale_holder_cannot_commit_into_the_new_holders_worktree(
    tmp_path: Path, settings: Settings
) -> None:
    repo = make_repo(tmp_path / "app")
    q = open_queue(settings)
    repositories.add(q, "app", repo)
    n = issues.create(q, title="parse the input").number
    repositories.assign(q, n, "app", by=Authority.of(()))
    first = claiming.claim(q, n, Authority.of({"run-a"}), worktree=True)
    assert first.worktree is not None and first.fence == 1
    lapsed = q.now() - timedelta(seconds=1)
    q.db.write(
        lambda conn: conn.execute(
            update(issues_t).where(issues_t.c.number == n).values(lease_expires_at=lapsed)
        )
    )
    second = claims.claim(q, n, Authority.of({"run-b"}))
    assert second.fence == 2
    q.db.dispose()
    work = Path(first.worktree.path)
    (work / "src" / "b.py").write_text("half of run-b's change\n")
    tip = git.head(work)

    def server(run_id: str) -> Client:
        own = {"toolsets": "git", "run_id": run_id, "plans_dir": tmp_path / "plans"}
        return Client(build_server(settings.model_copy(update=own)))

    async with server("run-a") as stale:
        refused = await stale.call_tool(
            "commit_tdd_phase", {"phase": "green", "component": "parser", "issue_number": n}
        )
    assert refused.is_error and error_of(refused)["code"] == "NOT_HOLDER"
    assert git.head(work) == tip  # no commit in run-b's worktree
    assert git.dirty_paths(work) == ["src/b.py"]  # its file neither committed nor staged
    assert git.staged_paths(work) == []

    async with server("run-b") as holder:
        done = await call_ok(
            holder, "commit_tdd_phase", phase="green", component="parser", issue_number=n
        )
    assert done.structured_content and done.structured_content["issue_number"] == n
    assert git.head(work) != tip


async def test_history_names_the_holder_a_git_step_acted_as(
    tmp_path: Path, settings: Settings
) -> None:
    """A server claims as ``agent-b`` (its own run id is another): the commit, the merge and
    the worktree removal it makes are recorded under agent-b, the holder, not under the
    server's run id."""
    repo = gated_repo(tmp_path / "app")
    q = open_queue(settings)
    repositories.add(q, "app", repo)
    n = issues.create(q, title="parse the input").number
    repositories.assign(q, n, "app", by=Authority.of(()))
    m = issues.create(q, title="given up").number
    repositories.assign(q, m, "app", by=Authority.of(()))
    q.db.dispose()
    own = {"toolsets": "default,git,agit", "run_id": "run-srv", "plans_dir": tmp_path / "plans"}
    async with Client(build_server(settings.model_copy(update=own))) as agent:
        claimed = await call_ok(agent, "issue_claim", number=n, run_id="agent-b", worktree=True)
        assert claimed.structured_content is not None
        work = Path(claimed.structured_content["worktree"]["path"])
        (work / "src" / "app.py").write_text("x = 2\n")
        await call_ok(agent, "commit_tdd_phase", phase="green", component="parser", issue_number=n)
        await call_ok(agent, "merge_to_main", issue_number=n)
        dropped = await call_ok(agent, "issue_claim", number=m, run_id="agent-b", worktree=True)
        assert dropped.structured_content is not None
        wid = dropped.structured_content["worktree"]["worktree_id"]
        await call_ok(agent, "agit_remove_worktree", repo="app", worktree_id=wid, force=True)
    q = open_queue(settings)
    try:
        actors = {e.kind: e.actor for e in notes.history(q, n)}
    finally:
        q.db.dispose()
    assert actors["tdd_committed"] == "agent-b"
    assert actors["completed"] == "agent-b"
    assert actors["worktree_merged"] == "agent-b"
    q = open_queue(settings)
    try:
        (removed,) = [e for e in notes.history(q, m) if e.kind == "worktree_removed"]
    finally:
        q.db.dispose()
    assert removed.actor == "agent-b"
