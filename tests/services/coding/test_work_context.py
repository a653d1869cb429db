"""get_work_context through ``workq serve`` (a real process over stdio working in a git
repository, and the same server built in this process), ``workq context``, and the
service's own edges (a closure older than 7 days)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, chdir
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.conftest import FakeClock
from tests.server.conftest import call_ok, stdio_server, text
from tests.services.coding.conftest import environment, workq, workq_json
from tests.services.workspaces.gitrepo import make_repo
from workq.config import Settings
from workq.domain.authority import Authority
from workq.server.app import build_server
from workq.services.coding import work_context
from workq.services.handle import Queue
from workq.services.queue import claims, issues
from workq.vcs import git

RUN = "run-ctx"
TOOLSETS = "default,context,deps"


# On asyncio only: here, not in conftest.py, where it would take trio from the gates' tests.
@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _environment(tmp_path: Path) -> dict[str, str]:
    return environment(tmp_path, WORKQ_PLANS_DIR=str(tmp_path / "plans"))


def _served(tmp_path: Path, cwd: Path, toolsets: str = TOOLSETS) -> Any:
    """A real ``workq serve`` process working in ``cwd``."""
    env = _environment(tmp_path)
    return stdio_server(
        tmp_path / "q.db", "--toolsets", toolsets, "--run-id", RUN, cwd=cwd, env=env
    )


@asynccontextmanager
async def _served_here(
    tmp_path: Path, cwd: Path, toolsets: str = TOOLSETS
) -> AsyncIterator[Client]:
    """The server ``_served`` starts, built in this process from the same environment and
    run while this process works in ``cwd`` (its checkout)."""
    with chdir(cwd):
        with pytest.MonkeyPatch.context() as patch:
            for name, value in _environment(tmp_path).items():
                patch.setenv(name, value)
            settings = Settings(db_path=tmp_path / "q.db", toolsets=toolsets, run_id=RUN)
        async with Client(build_server(settings)) as client:
            yield client


async def _context(client: Client, **args: Any) -> dict[str, Any]:
    result = await call_ok(client, "get_work_context", **args)
    assert result.structured_content is not None
    found: dict[str, Any] = result.structured_content
    return found


async def _create(client: Client, title: str, **args: Any) -> int:
    result = await call_ok(client, "issue_create", title=title, **args)
    assert result.structured_content is not None
    number: int = result.structured_content["number"]
    return number


@pytest.mark.anyio
async def test_active_issue_from_the_branch_name_else_the_callers_claim_else_none(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "app")
    async with _served(tmp_path, repo) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        login = await _create(
            client,
            "Add login",
            description="Users sign in.",
            acceptance_criteria=["A form with two fields", "Errors name the field"],
        )
        other = await _create(client, "Fix logout", priority="high")
        nothing = await _context(client)
        git.run(["checkout", "-q", "-b", f"feature/{login}-add-login"], cwd=repo)
        from_branch = await call_ok(client, "get_work_context")
        git.run(["checkout", "-q", "main"], cwd=repo)
        await call_ok(client, "issue_claim", number=other)
        from_claim = await _context(client)
        git.run(["checkout", "-q", "-b", "feature/999-not-in-the-queue"], cwd=repo)
        unknown_branch = await _context(client)
    annotations = tools["get_work_context"].annotations
    assert annotations is not None and annotations.read_only_hint and annotations.idempotent_hint
    assert nothing["active_issue"] is None and nothing["in_progress_issues"] == []

    assert from_branch.structured_content is not None
    active = from_branch.structured_content["active_issue"]
    assert active == {
        "number": login,
        "title": "Add login",
        "body": active["body"],
        "acceptance_criteria": ["A form with two fields", "Errors name the field"],
        "source": "branch",
        "status": "open",
        "priority": "medium",
        "branch": f"feature/{login}-add-login",
    }
    assert "Users sign in." in active["body"]
    assert f"Active issue #{login}: Add login (from branch feature/{login}-add-login)" in text(
        from_branch
    )
    assert "- Errors name the field" in text(from_branch)

    claimed = from_claim["active_issue"]
    assert claimed["number"] == other and claimed["source"] == "claim"
    assert claimed["status"] == "in_progress" and claimed["claimed_by"] == RUN
    assert claimed["acceptance_criteria"] == [] and "lease_expires_at" in claimed
    assert from_claim["in_progress_issues"] == [
        {"number": other, "title": "Fix logout", "priority": "high"}
    ]
    # A branch naming no issue of this queue falls back to the claim.
    assert unknown_branch["active_issue"]["number"] == other


@pytest.mark.anyio
async def test_next_up_in_claim_order_blockers_with_reasons_plan_and_recent_closures(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "work"
    folder.mkdir()
    async with _served_here(tmp_path, folder) as client:
        done = await _create(client, "Shipped already", priority="urgent")
        await _create(client, "Low chore", priority="low")
        labelled = await _create(client, "Tagged", priority="high", labels=["ui", "api"])
        held = await _create(client, "Needs sign-off")
        first = await _create(client, "First step")
        second = await _create(client, "Second step")
        for n in range(3):
            await _create(client, f"Filler {n}")
        await call_ok(client, "issue_claim", number=done)
        await call_ok(client, "issue_complete", number=done)
        await call_ok(client, "issue_block", number=held, reason="needs design sign-off")
        await call_ok(client, "issue_depend", blocker=first, blocked=second)
        plain = await _context(client)
        recent = await _context(client, include_closed_recent=True)
        await call_ok(client, "enter_plan_mode", slug="next-release", goal="Plan the release")
        planning = await call_ok(client, "get_work_context")
    ready = workq_json(tmp_path / "q.db", "ready", "--limit", "5", cwd=folder)
    assert [i["number"] for i in plain["next_up_issues"]] == [i["number"] for i in ready]
    assert len(plain["next_up_issues"]) == work_context.NEXT_UP
    tagged = next(i for i in plain["next_up_issues"] if i["number"] == labelled)
    assert tagged == {"number": labelled, "title": "Tagged", "labels": ["api", "ui"]}
    assert plain["blockers"] == [
        {"number": held, "title": "Needs sign-off", "blocked_by": "needs design sign-off"},
        {"number": second, "title": "Second step", "blocked_by": f"waiting on #{first}"},
    ]
    assert "closed_recent" not in plain and "plan" not in plain
    assert [c["number"] for c in recent["closed_recent"]] == [done]
    assert planning.structured_content is not None
    plan = planning.structured_content["plan"]
    assert plan["slug"] == "next-release" and plan["phase"] == "explore"
    assert plan["goal"] == "Plan the release"
    assert "Plan in progress: next-release (explore): Plan the release" in text(planning)


def test_workq_context_on_the_command_line(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "app")
    db = tmp_path / "q.db"
    body = "Steps:\n- [ ] write it\n- [x] test it\n"
    assert workq(db, "create", "Do the thing", "-d", body, cwd=repo).returncode == 0
    assert workq(db, "claim", "1", "--run-id", "r1", cwd=repo).returncode == 0
    mine = workq_json(db, "context", "--run-id", "r1", cwd=repo)
    assert mine["active_issue"]["source"] == "claim"
    assert mine["active_issue"]["acceptance_criteria"] == ["write it", "test it"]
    theirs = workq_json(db, "context", "--run-id", "r2", cwd=repo)
    assert theirs["active_issue"] is None and theirs["in_progress_issues"] == []
    git.run(["checkout", "-q", "-b", "bug/1-do-the-thing"], cwd=repo)
    printed = workq(db, "context", "--run-id", "r2", "--include-closed-recent", cwd=repo)
    assert printed.returncode == 0, printed.stderr
    assert "Active issue #1: Do the thing (from branch bug/1-do-the-thing)" in printed.stdout
    assert "claimed by r1" in printed.stdout
    assert "Closed in the last 7 days: none" in printed.stdout


def test_closures_older_than_seven_days_are_left_out(queue: Queue, clock: FakeClock) -> None:
    old = issues.create(queue, title="Old").number
    new = issues.create(queue, title="New").number
    claims.claim(queue, old, Authority.of({"r"}))
    claims.complete(queue, old, Authority.of({"r"}))
    clock.advance(6 * 24 * 3600)
    claims.claim(queue, new, Authority.of({"r"}))
    claims.complete(queue, new, Authority.of({"r"}))
    found = work_context.gather(queue, by=Authority.of({"r"}), include_closed_recent=True)
    assert [c.number for c in found.closed_recent or []] == [new, old]
    clock.advance(2 * 24 * 3600)
    found = work_context.gather(queue, by=Authority.of({"r"}), include_closed_recent=True)
    assert [c.number for c in found.closed_recent or []] == [new]


def test_no_branch_outside_a_repository(tmp_path: Path) -> None:
    assert work_context.checkout_branch(tmp_path) is None
    assert work_context.checkout_branch(None) is None


def test_a_lapsed_claim_is_not_held(queue: Queue, clock: FakeClock) -> None:
    """Another caller may claim a lapsed claim now: the context no longer counts it as the
    caller's (issue 40)."""
    number = issues.create(queue, title="Lapsing").number
    me = Authority.of({"r"})
    claims.claim(queue, number, me)
    found = work_context.gather(queue, by=me)
    assert [i.number for i in found.in_progress_issues] == [number]
    assert found.active_issue is not None and found.active_issue.number == number
    clock.advance(queue.lease_seconds + 1)
    found = work_context.gather(queue, by=me)
    assert found.in_progress_issues == [] and found.active_issue is None
