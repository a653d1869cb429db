"""``issue_gates`` and a local ``issue_merge`` whose gates run longer than a moment, as
tasks, through real ``workq serve`` processes spoken to by a raw 2026-07-28 client: the
task completes with the synchronous call's answer; a server killed (kill -9) while the
gates run leaves a task that the restarted server reports ``failed`` with a -32603 saying
the run was interrupted; quick gates, and a client without the extension, are answered in
the call."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.server.raw_modern import Stdio
from tests.server.test_tasks import TASK_FIELDS, settled, until
from tests.services.tasks.gated import Gated
from tests.services.workspaces.gitrepo import commit
from workq.config import Settings
from workq.domain.authority import Authority
from workq.services.handle import Queue
from workq.services.queue import claims, issues
from workq.services.runtime import open_queue
from workq.services.tasks import gates as gate_task
from workq.services.tasks import merge as merge_task
from workq.services.tasks import runner
from workq.services.workspaces import claiming, repositories
from workq.vcs import git

AGENT = "run-a"
SERVE = ("--toolsets", "default,coding,workspaces", "--tests-gate", "evidence")


@pytest.fixture
def gated(tmp_path: Path) -> Iterator[Gated]:
    found = Gated(tmp_path)
    yield found
    found.release("stop")  # a gate left by a killed server ends too


@pytest.fixture
def where(settings: Settings) -> list[str]:
    if settings.database_url:
        return ["--database-url", settings.database_url]
    return ["--db", str(settings.db_path)]


@pytest.fixture
def queue_of(settings: Settings, gated: Gated) -> Iterator[Queue]:
    q = open_queue(settings)
    repositories.add(q, "app", gated.repo)
    yield q
    q.db.dispose()


def serving(where: list[str], tmp_path: Path) -> Stdio:
    return Stdio(where, tmp_path / "serve.log", *SERVE, env={"WORKQ_RUN_ID": AGENT})


def held(q: Queue) -> int:
    number = issues.create(q, title="gated", repository="app").number
    claims.claim(q, number, Authority.of({AGENT}))
    return number


def a_task(result: dict[str, Any]) -> str:
    assert result["resultType"] == "task", result
    assert set(result) >= TASK_FIELDS and result["status"] == "working"
    task_id: str = result["taskId"]
    return task_id


def running(client: Stdio, task_id: str, said: str) -> dict[str, Any] | None:
    found: dict[str, Any] = client.task("tasks/get", task_id)["result"]
    return found if found.get("statusMessage") == said else None


def test_issue_gates_that_run_long_is_a_task_with_the_calls_answer(
    where: list[str], tmp_path: Path, gated: Gated, queue_of: Queue
) -> None:
    number = held(queue_of)
    with serving(where, tmp_path) as a:
        task_id = a_task(a.call("issue_gates", {"number": number}))
        seen = until(lambda: running(a, task_id, gate_task.RUNNING))
        assert seen["status"] == "working"
        gated.release()
        done = settled(a, task_id)
        assert done["status"] == "completed"
        result = done["result"]
        assert not result.get("isError") and result["structuredContent"]["overall_pass"]
        # Quick now (its last run took a moment): answered in the call, the same answer.
        again = a.call("issue_gates", {"number": number})
        assert again["resultType"] == "complete" and "taskId" not in again
        assert again["content"] == result["content"]
        assert again["structuredContent"] == result["structuredContent"]


def test_a_refusal_met_by_the_gates_task_is_worded_as_the_call_words_it(
    where: list[str], tmp_path: Path, gated: Gated, queue_of: Queue
) -> None:
    number = held(queue_of)
    with serving(where, tmp_path) as a:
        task_id = a_task(a.call("issue_gates", {"number": number}))
        until(lambda: running(a, task_id, gate_task.RUNNING))
        # The claim goes to another agent while the gates run: the runs are not stored.
        claims.release(queue_of, number, Authority.of({AGENT}), reason="handed over")
        claims.claim(queue_of, number, Authority.of({"run-b"}))
        gated.release()
        done = settled(a, task_id)
        result = done["result"]
        assert done["status"] == "completed" and result["isError"]
        text = result["content"][0]["text"]
        assert text.startswith(f"Could not run the quality gates of issue #{number}: ")
        assert "NOT_HOLDER" in text
        at_once = a.call("issue_gates", {"number": number}, tasks=False)
        assert at_once["isError"] and at_once["content"] == result["content"]
        assert at_once["_meta"]["workq/error"] == result["_meta"]["workq/error"]


def test_a_server_killed_while_the_gates_run_leaves_a_task_reported_interrupted(
    where: list[str], tmp_path: Path, gated: Gated, queue_of: Queue
) -> None:
    number = held(queue_of)
    with serving(where, tmp_path) as first:
        task_id = a_task(first.call("issue_gates", {"number": number}))
        until(lambda: running(first, task_id, gate_task.RUNNING))
        first.kill()
    with serving(where, tmp_path) as restarted:
        answer = restarted.task("tasks/get", task_id)["result"]
        assert answer["status"] == "failed" and answer["resultType"] == "complete"
        assert answer["error"] == {"code": -32603, "message": runner.INTERRUPTED}
        assert answer["statusMessage"] == runner.INTERRUPTED and "result" not in answer
        # Called again, the gates run again.
        gated.release()
        again = a_task(restarted.call("issue_gates", {"number": number}))
        assert settled(restarted, again)["status"] == "completed"


def test_a_client_without_the_extension_waits_for_the_gates_in_the_call(
    where: list[str], tmp_path: Path, gated: Gated, queue_of: Queue
) -> None:
    number = held(queue_of)
    gated.release()
    with serving(where, tmp_path) as a:
        answer = a.call("issue_gates", {"number": number}, tasks=False)
        assert answer["resultType"] == "complete" and "taskId" not in answer
        assert answer["structuredContent"]["overall_pass"]


def test_a_local_merge_whose_gates_run_long_is_a_task_completed_with_the_merge(
    where: list[str], tmp_path: Path, gated: Gated, queue_of: Queue
) -> None:
    number = issues.create(queue_of, title="merge me", repository="app").number
    taken = claiming.claim(queue_of, number, Authority.of({AGENT}), worktree=True)
    assert taken.worktree is not None
    commit(Path(taken.worktree.path), {"src/feature.py": "y = 1\n"}, "feature")
    with serving(where, tmp_path) as a:
        task_id = a_task(a.call("issue_merge", {"number": number}))
        until(lambda: running(a, task_id, merge_task.RUNNING))
        gated.release()
        done = settled(a, task_id)
        assert done["status"] == "completed", done
        data = done["result"]["structuredContent"]
        assert data["merged"] is True and data["commit"] == git.head(gated.repo)
        text = done["result"]["content"][0]["text"]
        assert text.startswith(f"Merged issue #{number}: ")
        # Asked again: merged already, answered in the call.
        again = a.call("issue_merge", {"number": number})
        assert again["resultType"] == "complete" and again["structuredContent"]["already_merged"]
