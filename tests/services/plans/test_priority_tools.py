"""Seed 000's seven tools through ``workq serve --toolsets priority``, driven the way a
seed-000 client drives them: create, list, select (and the reasons it refuses), advance,
status, force claim from a second session, and release. The first session is a real
``workq serve`` process over stdio; the second, on the same database file, a server built in
this process with the same settings."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.server.conftest import call_error, call_ok, error_of, text
from tests.services.plans.conftest import serve, serve_here
from workq.schemas import FORCE_CLAIM_CONFIRMATION

pytestmark = pytest.mark.anyio

LIMIT = 120
SEED_000 = {
    "create_issue",
    "select_next_issue",
    "advance_workflow",
    "release_lock",
    "force_claim",
    "get_workflow_status",
    "list_backlog",
}


async def test_a_seed_000_session_from_create_to_release(tmp_path: Path) -> None:
    with anyio.fail_after(LIMIT):
        async with (
            serve(tmp_path, "run-a", "--toolsets", "priority") as a,
            serve_here(tmp_path, "run-b", toolsets="priority") as b,
        ):
            names = {t.name for t in (await a.list_tools()).tools}
            assert names == SEED_000

            empty = await call_error(a, "select_next_issue")
            error = error_of(empty)
            assert (error["code"], error["reason"]) == ("NO_ISSUES_AVAILABLE", "no_issues")
            assert error["details"]["totalIssues"] == 0

            created = await call_ok(
                a,
                "create_issue",
                title="Login fails",
                priority="critical",
                type="bug",
                context="Users cannot log in",
                acceptanceCriteria=["login works", "a test covers it"],
            )
            assert created.structured_content == {
                "success": True,
                "issue": {
                    "number": 1,
                    "title": "Login fails",
                    "html_url": "workq://issues/1",
                    "labels": ["priority:critical", "type:bug", "status:backlog"],
                },
            }
            await call_ok(a, "create_issue", title="Write docs", priority="low", type="docs")
            refused = await call_error(a, "create_issue", title="x", priority="urgent", type="bug")
            assert error_of(refused)["code"] == "INVALID_INPUT"

            backlog = await call_ok(b, "list_backlog", limit=5)
            assert backlog.structured_content is not None
            assert backlog.structured_content["success"] is True
            assert backlog.structured_content["total"] == 2
            first = backlog.structured_content["backlog"][0]
            assert (first["number"], first["priority"], first["type"]) == (1, "critical", "bug")
            assert (first["isLocked"], first["lockedBy"]) == (False, None)
            assert first["priorityScore"] >= 100

            selected = await call_ok(a, "select_next_issue", excludeTypes=["docs"])
            data = selected.structured_content
            assert data is not None
            assert data["success"] is True
            assert data["issue"]["number"] == 1
            assert data["issue"]["priority"] == "critical"
            assert data["lock"]["sessionId"] == "run-a"
            assert (
                data["lock"]["fence"] == 1
                and data["lock"]["expiresAt"] > data["lock"]["acquiredAt"]
            )
            assert data["workflow"] == {"currentPhase": "selection"}
            locked = await call_error(b, "select_next_issue", excludeTypes=["docs"])
            error = error_of(locked)
            assert (error["code"], error["reason"]) == ("ALL_ISSUES_LOCKED", "all_locked")
            assert error["details"] == {
                "reason": "all_locked",
                "totalIssues": 2,
                "matchingFilter": 1,
                "locked": 1,
                "blocked": 0,
            }

            listed = await call_ok(b, "list_backlog")
            assert listed.structured_content is not None
            assert listed.structured_content["backlog"][0]["lockedBy"] == "run-a"

            await call_ok(a, "advance_workflow", issueNumber=1, targetPhase="research")
            status = await call_ok(a, "get_workflow_status")
            assert status.structured_content is not None
            assert status.structured_content["success"] is True
            assert status.structured_content["workflows"][0]["currentPhase"] == "research"

            not_mine = await call_error(b, "release_lock", issueNumber=1, reason="completed")
            assert error_of(not_mine)["code"] == "NOT_LOCKED"
            wrong = await call_error(b, "force_claim", issueNumber=1, confirmation="yes")
            assert error_of(wrong)["code"] == "INVALID_CONFIRMATION"
            taken = await call_ok(
                b, "force_claim", issueNumber=1, confirmation=FORCE_CLAIM_CONFIRMATION
            )
            assert taken.structured_content is not None
            assert taken.structured_content["success"] is True
            previous = taken.structured_content["claimed"]["previousHolder"]
            assert previous["sessionId"] == "run-a"
            assert previous["acquiredAt"] == data["lock"]["acquiredAt"]
            assert taken.structured_content["lock"]["sessionId"] == "run-b"
            kept = await call_ok(b, "get_workflow_status", issueNumber=1)
            assert kept.structured_content is not None
            assert kept.structured_content["workflows"][0]["currentPhase"] == "research"
            gone = await call_error(a, "advance_workflow", issueNumber=1, targetPhase="branch")
            assert error_of(gone)["reason"] == "not_locked"

            released = await call_ok(b, "release_lock", issueNumber=1, reason="completed")
            assert released.structured_content is not None
            assert released.structured_content["success"] is True
            assert released.structured_content["released"]["issueNumber"] == 1
            assert released.structured_content["released"]["reason"] == "completed"
            assert released.structured_content["released"]["duration"] >= 0
            again = await call_error(b, "release_lock", issueNumber=1, reason="completed")
            assert error_of(again)["code"] == "NOT_LOCKED"

            docs = await call_ok(b, "select_next_issue")
            assert docs.structured_content is not None
            assert docs.structured_content["issue"]["number"] == 2
            back = await call_ok(b, "release_lock", issueNumber=2, reason="abandoned")
            assert "back in the queue" in text(back)
            final = await call_ok(a, "list_backlog")
            assert final.structured_content is not None
            assert [i["number"] for i in final.structured_content["backlog"]] == [2]
            assert final.structured_content["backlog"][0]["isLocked"] is False


async def test_failures_are_the_contracts_objects_with_its_codes(tmp_path: Path) -> None:
    with anyio.fail_after(LIMIT):
        async with serve_here(tmp_path, "run-a", toolsets="priority") as a:
            empty = await call_error(a, "select_next_issue")
            assert empty.structured_content is not None
            assert empty.structured_content["success"] is False
            assert empty.structured_content["reason"] == "no_issues"
            for tool, arguments, code, reason in (
                (
                    "force_claim",
                    {"confirmation": FORCE_CLAIM_CONFIRMATION},
                    "ISSUE_NOT_FOUND",
                    None,
                ),
                ("release_lock", {"reason": "abandoned"}, "NOT_LOCKED", "not_locked"),
                ("advance_workflow", {"targetPhase": "research"}, "NOT_LOCKED", "not_locked"),
                ("get_workflow_status", {}, "NOT_LOCKED", "not_locked"),
            ):
                refused = await call_error(a, tool, issueNumber=999, **arguments)
                found = error_of(refused)
                assert (found["code"], found.get("reason")) == (code, reason), (tool, found)
                assert found["details"]["workq_code"] == "NOT_FOUND"
