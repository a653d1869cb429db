"""The MCP Tasks extension through real ``workq serve`` processes, spoken to by a raw
2026-07-28 client (tests/server/raw_modern.py): over stdio, over ``--http`` and over
``--http --workers 4``; on SQLite and PostgreSQL.

A waiting ``issue_claim_next`` becomes a task when the client declares the extension and
nothing is ready; the task completes with the synchronous call's answer, from any
process, a restarted one included; a cancel claims nothing; a task is its caller's alone;
a client without the extension, or a legacy session, is answered as before."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.server.conftest import CALL_TIMEOUT, server_params
from tests.server.raw_modern import SRC, TASKS, VERSION, Http, Stdio, message
from tests.server.test_http import START_TIMEOUT, free_port
from workq.config import Settings
from workq.services.handle import Queue
from workq.services.queue import issues, notes
from workq.services.runtime import open_queue
from workq.services.tasks import store

TERMINAL = {"completed", "failed", "cancelled"}
TASK_FIELDS = {"taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"}


@pytest.fixture
def where(settings: Settings) -> list[str]:
    """The serve options of the test's database (SQLite file or PostgreSQL)."""
    if settings.database_url:
        return ["--database-url", settings.database_url]
    return ["--db", str(settings.db_path)]


@pytest.fixture
def queue_of(settings: Settings) -> Iterator[Queue]:
    """The test's own handle on the database: work created here wakes no server directly."""
    q = open_queue(settings)
    yield q
    q.db.dispose()


@contextmanager
def agent(where: list[str], tmp_path: Path, run_id: str, *args: str) -> Iterator[Stdio]:
    with Stdio(where, tmp_path / f"{run_id}.log", *args, env={"WORKQ_RUN_ID": run_id}) as a:
        yield a


def until(check: Callable[[], Any], timeout: float = CALL_TIMEOUT) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def settled(client: Stdio | Http, task_id: str) -> dict[str, Any]:
    """Poll ``task_id`` until it is terminal; its last tasks/get result."""

    def poll() -> dict[str, Any] | None:
        answer = client.task("tasks/get", task_id)
        assert "result" in answer, answer
        result: dict[str, Any] = answer["result"]
        return result if result["status"] in TERMINAL else None

    found: dict[str, Any] = until(poll)
    return found


def a_task(result: dict[str, Any]) -> str:
    """``result`` is a CreateTaskResult with every field of the schema; its task id."""
    assert result["resultType"] == "task", result
    assert set(result) >= TASK_FIELDS, result
    assert result["status"] == "working"
    assert "content" not in result and "result" not in result
    for moment in ("createdAt", "lastUpdatedAt"):
        datetime.fromisoformat(result[moment].replace("Z", "+00:00"))
    assert isinstance(result["ttlMs"], int) and result["ttlMs"] >= 60_000
    assert 1000 <= result["pollIntervalMs"] <= 2000
    task_id: str = result["taskId"]
    assert len(task_id) >= 32
    return task_id


def kinds_of(q: Queue, number: int) -> list[str]:
    return [e.kind for e in notes.history(q, number, limit=100)]


def test_a_waiting_claim_is_a_task_completed_when_another_agent_creates_work(
    where: list[str], tmp_path: Path
) -> None:
    with agent(where, tmp_path, "run-a") as a, agent(where, tmp_path, "run-b") as b:
        task_id = a_task(a.call("issue_claim_next", {"wait_seconds": 120}))
        working = a.task("tasks/get", task_id)["result"]
        assert working["resultType"] == "complete" and working["status"] == "working"
        assert not ({"result", "error"} & set(working))
        b.call("issue_create", {"title": "work", "description": "do it"}, tasks=False)
        done = settled(a, task_id)
        assert done["status"] == "completed" and done["resultType"] == "complete"
        result = done["result"]
        assert result["content"][0]["text"].startswith("Claimed issue #1: work")
        assert result["structuredContent"]["claimed_by"] == "run-a"
        assert result["structuredContent"]["number"] == 1 and not result.get("isError")
        # The same answer as the synchronous call: something ready is claimed at once.
        b.call("issue_create", {"title": "more"}, tasks=False)
        at_once = a.call("issue_claim_next", {"wait_seconds": 120})
        assert "taskId" not in at_once and at_once["structuredContent"]["number"] == 2
        assert set(at_once["structuredContent"]) == set(result["structuredContent"])
        assert set(at_once) - {"_meta"} == set(result) - {"_meta"}
        shown = b.call("issue_get", {"number": 1}, tasks=False)["structuredContent"]
        assert shown["claimed_by"] == "run-a"
        # Read again: the same answer.
        assert a.task("tasks/get", task_id)["result"]["result"] == result


def test_a_refusal_met_while_waiting_is_the_tasks_answer_as_the_call_words_it(
    where: list[str], tmp_path: Path
) -> None:
    with agent(where, tmp_path, "run-a") as a, agent(where, tmp_path, "run-b") as b:
        task_id = a_task(a.call("issue_claim_next", {"wait_seconds": 120}))
        entered = a.call("enter_plan_mode", {"slug": "think", "goal": "first"}, tasks=False)
        assert not entered.get("isError"), entered
        b.call("issue_create", {"title": "work"}, tasks=False)
        done = settled(a, task_id)
        assert done["status"] == "completed"  # a tool error is a result, not a failed task
        refused = done["result"]
        at_once = a.call("issue_claim_next", {"wait_seconds": 120})  # refused at once
        assert refused["isError"] and at_once["isError"]
        assert refused["content"] == at_once["content"]
        assert refused["content"][0]["text"].startswith(
            "Could not claim the next issue: PLAN_MODE_ACTIVE"
        )
        assert refused["_meta"]["workq/error"] == at_once["_meta"]["workq/error"]
        shown = b.call("issue_get", {"number": 1}, tasks=False)["structuredContent"]
        assert shown["claimed_by"] is None


def test_the_wait_ends_with_nothing_claimed(where: list[str], tmp_path: Path) -> None:
    with agent(where, tmp_path, "run-a") as a:
        task_id = a_task(a.call("issue_claim_next", {"wait_seconds": 1}))
        done = settled(a, task_id)
        assert done["status"] == "completed"
        assert done["result"]["structuredContent"] == {"claimed": False}
        assert done["result"]["content"][0]["text"] == "No ready issues available"


def test_a_task_outlives_its_killed_server(
    where: list[str], tmp_path: Path, queue_of: Queue
) -> None:
    with agent(where, tmp_path, "run-k") as first:
        task_id = a_task(first.call("issue_claim_next", {"wait_seconds": 120}))
        first.kill()
    issues.create(queue_of, title="arrived while no server ran")
    with agent(where, tmp_path, "run-k") as restarted:
        done = settled(restarted, task_id)
    assert done["result"]["structuredContent"]["claimed_by"] == "run-k"
    assert issues.get(queue_of, 1).claimed_by == "run-k"


def test_a_client_that_ends_its_input_leaves_no_task_to_claim_for_it(
    where: list[str], tmp_path: Path, queue_of: Queue
) -> None:
    """Without a chosen run id no later server can read its tasks: they are cancelled as
    it exits. With one (the kill -9 test above), they wait for the restarted server."""
    with Stdio(where, tmp_path / "gone.log") as gone:
        task_id = a_task(gone.call("issue_claim_next", {"wait_seconds": 120}))
    with agent(where, tmp_path, "run-b"):  # a server whose waker would claim for it
        issues.create(queue_of, title="work")
        time.sleep(1.0)
    assert issues.get(queue_of, 1).claimed_by is None
    row = store.load(queue_of, task_id)
    assert row is not None and row.status == "cancelled"


def test_a_cancelled_task_claims_nothing(where: list[str], tmp_path: Path, queue_of: Queue) -> None:
    with agent(where, tmp_path, "run-a") as a:
        task_id = a_task(a.call("issue_claim_next", {"wait_seconds": 120}))
        assert a.task("tasks/cancel", task_id)["result"]["resultType"] == "complete"
        issues.create(queue_of, title="work")
        time.sleep(1.0)  # the waker has seen the change
        assert a.task("tasks/get", task_id)["result"]["status"] == "cancelled"
    assert issues.get(queue_of, 1).claimed_by is None
    assert kinds_of(queue_of, 1) == ["created"]


def test_a_cancel_racing_the_claim_never_leaves_a_claim_nobody_receives(
    where: list[str], tmp_path: Path, queue_of: Queue
) -> None:
    with agent(where, tmp_path, "run-a") as a:
        for attempt in range(8):
            label = f"race-{attempt}"  # each round's issue is for its own task only
            asked = {"wait_seconds": 120, "labels": [label]}
            task_id = a_task(a.call("issue_claim_next", asked))
            number = issues.create(queue_of, title=label, labels=[label]).number
            time.sleep(0.01 * attempt)  # the waker claims at some point meanwhile
            cancelled = a.task("tasks/cancel", task_id)
            assert cancelled["result"]["resultType"] == "complete"
            shown = a.task("tasks/get", task_id)["result"]
            assert shown["status"] == "cancelled", shown  # its answer was never read
            assert issues.get(queue_of, number).claimed_by is None
            kinds = kinds_of(queue_of, number)
            assert kinds in (["created"], ["created", "claimed", "released"]), kinds


def test_another_caller_is_told_the_task_does_not_exist(where: list[str], tmp_path: Path) -> None:
    with agent(where, tmp_path, "run-a") as a, agent(where, tmp_path, "run-b") as b:
        task_id = a_task(a.call("issue_claim_next", {"wait_seconds": 120}))
        for method in ("tasks/get", "tasks/update", "tasks/cancel"):
            theirs = b.task(method, task_id)
            never = b.task(method, "x" * 32)
            assert theirs["error"]["code"] == never["error"]["code"] == -32602
            assert theirs["error"] == never["error"]
        assert a.task("tasks/get", task_id)["result"]["status"] == "working"


def next_notification(client: Stdio, method: str) -> dict[str, Any]:
    while True:
        found = client.notifications.get(timeout=CALL_TIMEOUT)
        if found.get("method") == method:
            return found


def test_task_status_notifications_on_a_listen_stream(where: list[str], tmp_path: Path) -> None:
    with agent(where, tmp_path, "run-a") as a, agent(where, tmp_path, "run-b") as b:
        task_id = a_task(a.call("issue_claim_next", {"wait_seconds": 120}))
        theirs = a_task(b.call("issue_claim_next", {"wait_seconds": 120}))
        refused = a.request(
            "subscriptions/listen", {"notifications": {"taskIds": [task_id]}}, tasks=False
        )
        assert refused["error"]["code"] == -32021
        asked = {"taskIds": [task_id, theirs, "x" * 32], "toolsListChanged": True}
        a.send(900, "subscriptions/listen", {"notifications": asked})
        ack = next_notification(a, "notifications/subscriptions/acknowledged")["params"]
        assert ack["notifications"] == {"taskIds": [task_id], "toolsListChanged": True}
        assert ack["_meta"]["io.modelcontextprotocol/subscriptionId"] == 900
        first = next_notification(a, "notifications/tasks")["params"]
        assert first["taskId"] == task_id and first["status"] == "working"
        b.call("issue_create", {"title": "work"}, tasks=False)
        done = next_notification(a, "notifications/tasks")["params"]
        assert done["status"] == "completed" and done["taskId"] == task_id
        assert done["result"]["structuredContent"]["claimed_by"] == "run-a"
        assert done["result"] == a.task("tasks/get", task_id)["result"]["result"]
        assert done["_meta"]["io.modelcontextprotocol/subscriptionId"] == 900


def test_tasks_methods_need_the_capability(where: list[str], tmp_path: Path) -> None:
    with agent(where, tmp_path, "run-a") as a:
        task_id = a_task(a.call("issue_claim_next", {"wait_seconds": 120}))
        for method in ("tasks/get", "tasks/update", "tasks/cancel"):
            error = a.task(method, task_id, tasks=False)["error"]
            assert error["code"] == -32021
            assert error["data"] == {"requiredCapabilities": {"extensions": {TASKS: {}}}}
        update = a.request("tasks/update", {"taskId": task_id, "inputResponses": {"k": {}}})
        assert update["result"]["resultType"] == "complete"
        assert a.task("tasks/get", task_id)["result"]["status"] == "working"


def test_a_client_without_the_extension_waits_as_before(where: list[str], tmp_path: Path) -> None:
    with agent(where, tmp_path, "run-a") as a:
        started = time.monotonic()
        answer = a.call("issue_claim_next", {"wait_seconds": 1}, tasks=False)
        assert time.monotonic() - started >= 0.9
        assert answer["structuredContent"] == {"claimed": False}
        assert answer["resultType"] == "complete" and "taskId" not in answer


@pytest.mark.anyio
async def test_a_legacy_session_is_unchanged(tmp_path: Path, sqlite_template: Path) -> None:
    from tests.conftest import migrated_sqlite

    db = tmp_path / "legacy.db"
    migrated_sqlite(sqlite_template, db)
    env = {"PYTHONPATH": SRC}
    async with Client(server_params(db, env=env), mode="legacy") as client:
        with anyio.fail_after(CALL_TIMEOUT):
            result = await client.call_tool("issue_claim_next", {"wait_seconds": 1})
        assert result.structured_content == {"claimed": False}


@contextmanager
def http_serving(where: list[str], tmp_path: Path, *args: str) -> Iterator[str]:
    """``workq serve --http`` (this tree's code) on the test's database; its URL."""
    port = free_port()
    log = (tmp_path / "http.log").open("a")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "workq.cli.main",
            *where,
            "serve",
            "--http",
            "--port",
            str(port),
            *args,
        ],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": SRC},
    )
    try:
        until(lambda: process.poll() is not None or _accepts(port), START_TIMEOUT)
        assert process.poll() is None, (tmp_path / "http.log").read_text()
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=START_TIMEOUT)
        log.close()


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
    except OSError:
        return False
    return True


@pytest.mark.parametrize("workers", ["1", "4"])
def test_over_http_a_task_is_its_sessions_and_any_worker_answers_it(
    where: list[str], tmp_path: Path, queue_of: Queue, workers: str
) -> None:
    with http_serving(where, tmp_path, "--workers", workers) as url:
        mine, other = Http(url, session="session-one"), Http(url, session="session-two")
        polls = [Http(url, session="session-one") for _ in range(4)]  # connections of its own
        try:
            task_id = a_task(mine.call("issue_claim_next", {"wait_seconds": 120}))
            assert other.task("tasks/get", task_id)["error"]["code"] == -32602
            assert other.task("tasks/cancel", task_id)["error"]["code"] == -32602
            issues.create(queue_of, title="work over http")
            done = settled(polls[0], task_id)
            for poll in polls[1:]:
                assert poll.task("tasks/get", task_id)["result"]["result"] == done["result"]
            holder = done["result"]["structuredContent"]["claimed_by"]
            assert issues.get(queue_of, 1).claimed_by == holder
            cancelled = a_task(mine.call("issue_claim_next", {"wait_seconds": 120}))
            assert mine.task("tasks/cancel", cancelled)["result"]["resultType"] == "complete"
            issues.create(queue_of, title="after the cancel")
            time.sleep(1.0)
            assert mine.task("tasks/get", cancelled)["result"]["status"] == "cancelled"
            assert issues.get(queue_of, 2).claimed_by is None
        finally:
            for client in (mine, other, *polls):
                client.close()


def test_task_status_notifications_over_http(
    where: list[str], tmp_path: Path, queue_of: Queue
) -> None:
    """The listen stream over Streamable HTTP is an SSE response of its own."""
    with http_serving(where, tmp_path) as url:
        mine = Http(url, session="session-one")
        try:
            task_id = a_task(mine.call("issue_claim_next", {"wait_seconds": 120}))
            asked = {"notifications": {"taskIds": [task_id]}}
            headers = {
                "content-type": "application/json",
                "accept": "application/json, text/event-stream",
                "mcp-protocol-version": VERSION,
                "mcp-method": "subscriptions/listen",
                "mcp-session-id": "session-one",
            }
            body = message(7, "subscriptions/listen", asked, tasks=True)
            seen: list[dict[str, Any]] = []
            with mine.http.stream("POST", url, json=body, headers=headers) as stream:
                assert stream.headers["content-type"].startswith("text/event-stream")
                for line in stream.iter_lines():
                    if not line.startswith("data:"):
                        continue
                    seen.append(json.loads(line[5:]))
                    status = seen[-1]["params"].get("status")
                    if status == "working":
                        issues.create(queue_of, title="work")
                    if status == "completed":
                        break
            methods = [m["method"] for m in seen]
            assert methods[0] == "notifications/subscriptions/acknowledged"
            assert methods[1:] == ["notifications/tasks", "notifications/tasks"]
            assert seen[-1]["params"]["result"]["structuredContent"]["number"] == 1
        finally:
            mine.close()
