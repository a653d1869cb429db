"""The events that raise notices where no watch is needed: gates failing N times in a row
(a real repository, the coding toolset's issue_gates), a plan reaching Review; each queues
a notice for a sink that takes it, once per streak or step."""

from __future__ import annotations

from contextlib import chdir
from pathlib import Path

import anyio
import pytest
from mcp import Client
from sqlalchemy import select

from tests.server.conftest import call_ok
from tests.services.coding.gaterepo import commit, gated_repo
from workq.config import Settings
from workq.db.tables import events, notices
from workq.server.app import build_server
from workq.services.handle import Queue
from workq.services.notices import sinks
from workq.services.plans import plan_mode
from workq.services.queue import policies
from workq.services.runtime import open_queue
from workq.vcs import git


def _sink(q: Queue, events: str) -> None:
    sinks.add(q, "people", command="true", events=events)


def _notices(q: Queue) -> list[str]:
    with q.db.read() as conn:
        return list(conn.execute(select(notices.c.event).order_by(notices.c.id)).scalars())


def _count(q: Queue, kind: str) -> int:
    with q.db.read() as conn:
        return len(conn.execute(select(events.c.id).where(events.c.kind == kind)).all())


@pytest.mark.anyio
async def test_gates_failing_in_a_row_is_told_once_per_streak(tmp_path: Path) -> None:
    repo = gated_repo(tmp_path / "app", app="x = 'FAIL'\n")
    settings = Settings(db_path=tmp_path / "q.db", toolsets="default,coding", run_id="dev")
    q = open_queue(settings)
    _sink(q, "gates_failing")
    policies.settle(q, "gate_failures", "2")
    with chdir(repo), anyio.fail_after(120):
        async with Client(build_server(settings)) as client:
            await call_ok(client, "issue_create", title="Gated work")
            await call_ok(client, "issue_claim", number=1)
            git.switch_new(repo, "feature", "main")
            commit(repo, {"src/more.py": "y = 2\n"}, "feat: more")
            await call_ok(client, "issue_gates", gate="tests")
            assert _count(q, "gates_failing") == 0  # one failure is not a streak
            await call_ok(client, "issue_gates", gate="tests")
            assert _count(q, "gates_failing") == 1
            await call_ok(client, "issue_gates", gate="tests")
            assert _count(q, "gates_failing") == 1  # the same streak, told already
            commit(repo, {"src/app.py": "x = 1\n"}, "fix: pass")
            await call_ok(client, "issue_gates", gate="tests")  # passes: the streak ends
            commit(repo, {"src/app.py": "x = 'FAIL'\n"}, "oops")
            await call_ok(client, "issue_gates", gate="tests")
            await call_ok(client, "issue_gates", gate="tests")
            assert _count(q, "gates_failing") == 2
    assert _notices(q) == ["gates_failing", "gates_failing"]
    q.db.dispose()


def test_a_plan_at_review_waits_for_a_person(queue: Queue, tmp_path: Path) -> None:
    _sink(queue, "plan_waiting")
    plan_mode.enter(queue, "planner", "auth-flow", "Design the login flow", tmp_path / "plans")
    plan_mode.advance(queue, "planner")  # Design
    assert _notices(queue) == []
    plan_mode.advance(queue, "planner")  # Review: a person reads it now
    assert _notices(queue) == ["plan_waiting"]
    plan_mode.advance(queue, "planner")  # Final
    assert _notices(queue) == ["plan_waiting"]
