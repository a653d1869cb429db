"""Two agents (real ``workq serve`` processes over stdio) on one repository that lands
through pull requests, with the real ``workq sync github --watch`` beside them: each agent
claims with a worktree, commits, asks to land, and goes on to its next issue at once; the
worker lands every issue exactly once, one pull request each, through the fake GitHub
whose ``main`` refuses direct pushes."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.github.landing_helpers import make_origin, sync_worker, worker_log
from tests.github.tools_helpers import git, serve_github
from tests.github_fake.server import FakeGitHub
from tests.server.conftest import call_ok
from workq.schemas import Status
from workq.services.handle import Queue
from workq.services.queue import issues, notes
from workq.services.workspaces import landings

pytestmark = pytest.mark.anyio

ISSUES = 4
LIMIT = 180


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _agent(client: Client, landed: list[int]) -> None:
    """Claim, commit, land, next: until nothing is left to claim."""
    while True:
        claimed = await call_ok(client, "issue_claim_next", repository="app", worktree=True)
        data = claimed.structured_content
        if not data or data.get("number") is None:
            return
        number, where = data["number"], Path(data["worktree"]["path"])
        (where / f"feature_{number}.py").write_text(f"N = {number}\n")
        git(where, "add", ".")
        git(where, "commit", "-q", "-m", f"#{number}")
        asked = await call_ok(client, "issue_merge", number=number)
        assert "lands through a pull request" in asked.content[0].text  # type: ignore[union-attr]
        assert asked.structured_content is not None
        assert asked.structured_content["landing"]["state"] in ("queued", "open", "landed")
        landed.append(number)


async def test_two_agents_and_the_worker_land_every_issue_once(
    tmp_path: Path, fake_github: FakeGitHub
) -> None:
    origin = make_origin(tmp_path, fake_github)
    db = tmp_path / "queue.db"
    for n in range(ISSUES):
        issues.create(origin.q, title=f"feature {n}", repository="app")
    worker = sync_worker(db, fake_github, "--watch")
    asked: list[int] = []
    try:
        with anyio.fail_after(LIMIT):
            toolsets = "default,workspaces"
            args = ("--tests-gate", "trust")
            async with (
                serve_github(
                    origin.work, fake_github, *args, run_id="agent-a", toolsets=toolsets, db=db
                ) as a,
                serve_github(
                    origin.work, fake_github, *args, run_id="agent-b", toolsets=toolsets, db=db
                ) as b,
                anyio.create_task_group() as group,
            ):
                group.start_soon(_agent, a, asked)
                group.start_soon(_agent, b, asked)
            while not all(_landed(origin.q, n) for n in range(1, ISSUES + 1)):
                assert worker.poll() is None, worker_log(db)
                await anyio.sleep(0.2)
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=30)

    assert sorted(asked) == list(range(1, ISSUES + 1))
    pulls = fake_github.pulls()
    assert len(pulls) == ISSUES and all(p["merged"] for p in pulls)
    assert len({p["head"]["ref"] for p in pulls}) == ISSUES
    files = git(origin.bare, "ls-tree", "--name-only", "main").split()
    assert {f"feature_{n}.py" for n in range(1, ISSUES + 1)} <= set(files)
    for n in range(1, ISSUES + 1):
        assert issues.get(origin.q, n).status == Status.DONE
        kinds = [e.kind for e in notes.history(origin.q, n)]
        assert kinds.count("completed") == 1, (n, kinds)
    origin.q.db.dispose()


def _landed(q: Queue, number: int) -> bool:
    found = landings.get(q, number)
    return found is not None and found.state == "landed"
