"""Wire rules of the Tasks extension that the conformance suite states (its tasks scenarios
drive fixture tools workq does not have, so they are shown here on workq's own tools; see
docs/mcp.md "Conformance"), through real ``workq serve`` processes and a raw 2026-07-28
client: over HTTP a ``tasks/*`` request whose ``Mcp-Name`` names another task is refused
with -32020; a legacy ``task`` param on ``tools/call`` is tolerated and promotes nothing;
a task and its inlined result carry none of the removed v1 keys; a cancel of a settled
task is acknowledged and changes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.server.raw_modern import VERSION, Http, Stdio, message
from tests.server.test_tasks import a_task, http_serving, settled
from workq.config import Settings

REMOVED = {"ttl", "pollInterval", "requestState", "task"}
RELATED = "io.modelcontextprotocol/related-task"


@pytest.fixture
def where(settings: Settings) -> list[str]:
    if settings.database_url:
        return ["--database-url", settings.database_url]
    return ["--db", str(settings.db_path)]


def _post(url: str, method: str, params: dict[str, Any], name: str | None) -> dict[str, Any]:
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": VERSION,
        "mcp-method": method,
    }
    if name is not None:
        headers["mcp-name"] = name
    answer = httpx2.post(url, json=message(900, method, params, tasks=True), headers=headers)
    found: dict[str, Any] = answer.json()
    return found


def test_over_http_a_tasks_request_must_name_its_task_in_mcp_name(
    where: list[str], tmp_path: Path
) -> None:
    with http_serving(where, tmp_path) as url:
        client = Http(url, session="session-one")
        try:
            task_id = a_task(client.call("issue_claim_next", {"wait_seconds": 60}))
            for method in ("tasks/get", "tasks/update", "tasks/cancel"):
                params = {"taskId": task_id, "_meta": {}}
                wrong = _post(url, method, params, "another-task")
                assert wrong["error"]["code"] == -32020, (method, wrong)
                assert "mcp-name" in wrong["error"]["message"].lower()
            # Named right (the raw client sends Mcp-Name = taskId), it is answered.
            assert client.task("tasks/get", task_id)["result"]["status"] == "working"
            assert client.task("tasks/cancel", task_id)["result"]["resultType"] == "complete"
        finally:
            client.close()


def test_a_task_and_its_result_carry_no_removed_key_and_a_late_cancel_changes_nothing(
    where: list[str], tmp_path: Path
) -> None:
    with Stdio(where, tmp_path / "a.log", env={"WORKQ_RUN_ID": "run-a"}) as a:
        made = a.call("issue_claim_next", {"wait_seconds": 1})
        assert not (REMOVED & set(made)), made
        task_id = a_task(made)
        working = a.task("tasks/get", task_id)["result"]
        assert not (REMOVED & set(working))
        done = settled(a, task_id)
        assert not (REMOVED & set(done)) and RELATED not in done["result"].get("_meta", {})
        assert isinstance(done["ttlMs"], int) and isinstance(done["pollIntervalMs"], int)
        # A cancel of a settled task: the same empty acknowledgement; it stays completed.
        ack = a.task("tasks/cancel", task_id)
        assert ack["result"].get("resultType") == "complete"
        assert not ({"taskId", "status", "result", "error"} & set(ack["result"]))
        assert a.task("tasks/get", task_id)["result"]["status"] == "completed"


def test_a_legacy_task_param_is_tolerated_and_promotes_nothing(
    where: list[str], tmp_path: Path
) -> None:
    with Stdio(where, tmp_path / "a.log", env={"WORKQ_RUN_ID": "run-a"}) as a:
        hinted = {"name": "issue_create", "arguments": {"title": "hinted"}}
        answer = a.request("tools/call", {**hinted, "task": {"ttl": 60_000, "pollInterval": 5}})
        result = answer["result"]
        assert result["resultType"] == "complete" and "taskId" not in result
        assert result["structuredContent"]["number"] == 1
        # A call that may become a task still decides by itself: something is ready.
        claim = {"name": "issue_claim_next", "arguments": {"wait_seconds": 60}}
        taken = a.request("tools/call", {**claim, "task": {"ttl": 1}})["result"]
        assert taken["resultType"] == "complete" and taken["structuredContent"]["number"] == 1
