"""The workflow toolset through ``workq serve --toolsets default,workflow``: the
tests-passed gate, skip justification, holder rule and seed 000's result shapes. The
holder's session is a real ``workq serve`` process over stdio; the other session, and the
default toolset's server, are built in this process."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.server.conftest import call_error, call_ok, error_of, text
from tests.services.plans.conftest import serve, serve_here

pytestmark = pytest.mark.anyio

LIMIT = 120


async def test_the_workflow_of_a_claimed_issue_through_the_tools(tmp_path: Path) -> None:
    # testsPassed taken on the agent's word: tests/services/coding checks the quality gates
    # behind it.
    toolsets = ("--toolsets", "default,workflow", "--tests-gate", "trust")
    with anyio.fail_after(LIMIT):
        async with (
            serve(tmp_path, "run-a", *toolsets) as a,
            serve_here(tmp_path, "run-b", toolsets="default,workflow", tests_gate="trust") as b,
        ):
            names = {t.name for t in (await a.list_tools()).tools}
            assert {"advance_workflow", "get_workflow_status"} <= names
            await call_ok(a, "issue_create", title="Fix the login page", issue_type="bug")
            none = await call_ok(a, "get_workflow_status")
            assert text(none) == "This session holds no claimed issues"
            assert none.structured_content == {"success": True, "workflows": []}
            refused = await call_error(a, "advance_workflow", targetPhase="research")
            assert error_of(refused)["code"] == "NOT_LOCKED"  # the contract's code
            assert error_of(refused)["details"]["workq_code"] == "NOT_HOLDER"
            assert "No issue is locked by this session" in error_of(refused)["error"]

            await call_ok(a, "issue_claim", number=1)
            step = await call_ok(a, "advance_workflow", targetPhase="research")
            assert text(step) == "Issue #1: selection -> research"
            assert step.structured_content is not None
            assert step.structured_content["workflow"]["previousPhase"] == "selection"
            assert step.structured_content["workflow"]["currentPhase"] == "research"

            other = await call_error(b, "advance_workflow", issueNumber=1, targetPhase="branch")
            assert (error_of(other)["code"], error_of(other)["reason"]) == (
                "NOT_LOCKED",
                "not_locked",
            )
            assert error_of(other)["error"].startswith(
                "Issue #1 is not locked by this session: run-a holds it"
            )
            assert (await call_error(b, "get_workflow_status", issueNumber=1)).is_error

            skip = await call_error(a, "advance_workflow", issueNumber=1, targetPhase="testing")
            assert error_of(skip)["code"] == "INVALID_PHASE_TRANSITION"
            assert error_of(skip)["reason"] == "invalid_transition"
            assert "pass skipJustification to skip branch, implementation" in text(skip)
            jump = await call_ok(
                a,
                "advance_workflow",
                issueNumber=1,
                targetPhase="testing",
                skipJustification="a one-line fix",
            )
            assert text(jump) == (
                "Issue #1: research -> testing\n"
                "Skipped: branch, implementation (a one-line fix)\n"
                "Branch: 1-fix-the-login-page"
            )

            gate = await call_error(a, "advance_workflow", targetPhase="commit", testsPassed=False)
            assert (error_of(gate)["code"], error_of(gate)["reason"]) == (
                "TESTS_REQUIRED",
                "tests_required",
            )
            assert "Cannot advance from testing to commit: tests must pass first" in text(gate)
            passed = await call_ok(a, "advance_workflow", targetPhase="commit", testsPassed=True)
            assert "Tests: passed" in text(passed)
            pr = await call_ok(a, "advance_workflow", targetPhase="pr", prBody="Closes #1")
            assert "PR title: bug: Fix the login page (#1)" in text(pr)
            assert pr.structured_content is not None
            assert pr.structured_content["workflow"]["prTitle"] == "bug: Fix the login page (#1)"

            status = await call_ok(a, "get_workflow_status", issueNumber=1)
            assert status.structured_content is not None
            (item,) = status.structured_content["workflows"]
            assert item["currentPhase"] == "pr" and item["branchName"] == "1-fix-the-login-page"
            assert item["testsPassed"] is True and item["prNumber"] is None
            assert item["lockDuration"] >= 0 and item["lockAcquiredAt"]
            assert [(h["from"], h["to"]) for h in item["phaseHistory"]] == [
                ("selection", "research"),
                ("research", "testing"),
                ("testing", "commit"),
                ("commit", "pr"),
            ]
            assert text(status).startswith("#1 pr: Fix the login page\n  branch 1-fix-the-login")
            for bad in (
                {"targetPhase": "selection"},
                {"targetPhase": "shipping"},
                {"targetPhase": "review", "testsPassed": "yes"},
                {"targetPhase": "review", "skipJustification": "x" * 2001},
            ):
                result = await a.call_tool("advance_workflow", bad)
                assert result.is_error, bad
                assert error_of(result)["code"] in ("INVALID_INPUT", "INVALID_PHASE_TRANSITION"), (
                    bad
                )

            dropped = await call_ok(a, "advance_workflow", targetPhase="abandoned")
            assert text(dropped).endswith("The claim is still yours: give it up with issue_release")
            final = await call_error(a, "advance_workflow", targetPhase="review")
            assert error_of(final)["reason"] == "invalid_transition"


async def test_the_workflow_tools_are_not_in_the_default_toolset(tmp_path: Path) -> None:
    with anyio.fail_after(LIMIT):
        async with serve_here(tmp_path, "run-a") as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"enter_plan_mode", "exit_plan_mode", "advance_plan_phase"} <= names
            assert "get_current_phase" in names and "advance_workflow" not in names
            result = await client.call_tool("get_workflow_status", {})
            assert result.is_error and "workflow" in text(result)
