"""``issue_merge`` through a pull request as a task, through real processes: a raw
2026-07-28 client (tests/server/raw_modern.py) of ``workq serve --sync-github`` (the GitHub
worker beside the server) against the fake GitHub, whose ``main`` is protected. The merge
queues the landing and answers with a task; the task says where the landing stands while
the checks run, and completes with the merge's answer once it landed (the merge commit)
or was refused (what to repair); a client without the extension is answered at once, as
before."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.github.landing_helpers import Origin, make_origin
from tests.github.mirror_helpers import REPO
from tests.github.tools_helpers import git
from tests.github_fake.server import FakeGitHub
from tests.server.raw_modern import Stdio
from tests.server.test_tasks import TASK_FIELDS, settled, until
from workq.db.tables import tasks
from workq.services.tasks import landing as landing_task
from workq.services.tasks import store
from workq.services.workspaces import worktrees

AGENT = "run-a"
SERVE = ("--toolsets", "default,workspaces", "--tests-gate", "trust", "--sync-github", REPO)


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as found:
        yield found


@pytest.fixture
def origin(tmp_path: Path, fake: FakeGitHub) -> Iterator[Origin]:
    found = make_origin(tmp_path, fake)
    yield found
    found.q.db.dispose()


def serving(tmp_path: Path, fake: FakeGitHub, *, sync: bool = True) -> Stdio:
    """``workq serve`` (this tree's code) on the origin's queue as ``AGENT``, moving its
    landings through the fake (``sync``)."""
    env = {
        "WORKQ_RUN_ID": AGENT,
        "GITHUB_TOKEN": fake.token,
        "GITHUB_API_URL": fake.url,
        "WORKQ_GITHUB_PACE": "0",
    }
    args = SERVE if sync else SERVE[:-2]
    return Stdio(["--db", str(tmp_path / "queue.db")], tmp_path / "serve.log", *args, env=env)


def a_landing_task(result: dict[str, Any]) -> str:
    assert result["resultType"] == "task", result
    assert set(result) >= TASK_FIELDS and result["status"] == "working", result
    assert result["pollIntervalMs"] == landing_task.POLL_MS
    assert result["ttlMs"] == (landing_task.WAIT_SECONDS + store.READ_GRACE_SECONDS) * 1000
    task_id: str = result["taskId"]
    return task_id


@pytest.mark.slow  # the worker looks at a waiting pull request every 10 s
def test_a_merge_through_a_pull_request_is_a_task_completed_with_the_merge_commit(
    tmp_path: Path, fake: FakeGitHub, origin: Origin
) -> None:
    fake.protect_branch("main", required_checks=["ci"])
    number = origin.issue("Add a feature", "feature.py", "x = 1\n")
    with serving(tmp_path, fake) as a:
        task_id = a_landing_task(a.call("issue_merge", {"number": number}))
        pull = until(lambda: fake.pulls())[0]

        def waiting() -> dict[str, Any] | None:
            found: dict[str, Any] = a.task("tasks/get", task_id)["result"]
            return found if found["statusMessage"].startswith(f"Landing #{number} open") else None

        seen = until(waiting)  # the checks run: the task says so
        assert seen["status"] == "working" and "result" not in seen
        assert f"pull request #{pull['number']}" in seen["statusMessage"]
        fake.add_check_run(pull["head"]["sha"], "ci", conclusion="success")
        done = settled(a, task_id)
        assert done["status"] == "completed" and done["resultType"] == "complete"
        result = done["result"]
        main = git(origin.bare, "rev-parse", "main")
        assert not result.get("isError")
        data = result["structuredContent"]
        assert data["merged"] is True and data["commit"] == main and data["number"] == number
        assert data["landing"]["state"] == "landed" and data["worktree_cleaned"] is True
        text = result["content"][0]["text"]
        assert text.startswith(f"Issue #{number} lands through a pull request: landed")
        assert f"Merged as {main[:12]}; the issue is done." in text
        assert done["statusMessage"] == f"Landed #{number} as {main[:12]}"
        # The same answer as the synchronous call gives for that landing, read again.
        assert a.task("tasks/get", task_id)["result"]["result"] == result
        shown = a.call("issue_get", {"number": number}, tasks=False)["structuredContent"]
        assert shown["status"] == "done" and shown["landing"]["merge_sha"] == main


def test_a_refused_landing_completes_the_task_with_the_failing_checks(
    tmp_path: Path, fake: FakeGitHub, origin: Origin
) -> None:
    fake.protect_branch("main", required_checks=["ci"])
    number = origin.issue("Break it", "broken.py", "broken = True\n")
    info = worktrees.get_for_issue(origin.q, number)
    assert info is not None  # the tip's checks fail before the pull request is even opened
    tip = git(Path(info.path), "rev-parse", "HEAD")
    fake.add_check_run(
        tip, "ci", conclusion="failure", title="1 test failed", summary="test_broken failed"
    )
    with serving(tmp_path, fake) as a:
        task_id = a_landing_task(a.call("issue_merge", {"number": number}))
        done = settled(a, task_id)
        assert done["status"] == "completed"  # a refused landing is an answer, not a failure
        result = done["result"]
        assert not result.get("isError")
        data = result["structuredContent"]
        assert data["merged"] is False and data["commit"] is None
        failure = data["landing"]["failure"]
        assert data["landing"]["state"] == "refused" and "check ci failed" in failure["reason"]
        assert failure["checks"][0]["name"] == "ci"
        assert failure["checks"][0]["summary"] == "test_broken failed"
        text = result["content"][0]["text"]
        assert "Landing refused: check ci failed" in text and "test_broken failed" in text
        assert "Repair it in the issue's worktree, commit, and merge again." in text
        shown = a.call("issue_get", {"number": number}, tasks=False)["structuredContent"]
        assert shown["claimed_by"] == AGENT
        assert shown["landing"]["failure"]["reason"] == failure["reason"]


def test_a_client_without_the_extension_is_answered_at_once_as_before(
    tmp_path: Path, fake: FakeGitHub, origin: Origin
) -> None:
    number = origin.issue("Plain", "plain.py", "plain\n")
    with serving(tmp_path, fake, sync=False) as a:
        answer = a.call("issue_merge", {"number": number}, tasks=False)
        assert answer["resultType"] == "complete" and "taskId" not in answer
        assert answer["structuredContent"]["landing"]["state"] == "queued"
        assert "claim your next issue meanwhile" in answer["content"][0]["text"]
        # No GitHub worker runs: the answer says what to start.
        assert "no GitHub worker is moving landings" in answer["content"][0]["text"]
    with origin.q.db.read() as conn:
        assert conn.execute(tasks.select()).first() is None  # no task was made


def test_a_merge_already_landed_is_answered_at_once(
    tmp_path: Path, fake: FakeGitHub, origin: Origin
) -> None:
    """A merge with nothing left to follow (landed already) is no task."""
    number = origin.issue("Twice", "twice.py", "twice\n")
    with serving(tmp_path, fake) as a:
        task_id = a_landing_task(a.call("issue_merge", {"number": number}))
        assert settled(a, task_id)["result"]["structuredContent"]["merged"] is True
        again = a.call("issue_merge", {"number": number})
        assert again["resultType"] == "complete" and again["structuredContent"]["already_merged"]
