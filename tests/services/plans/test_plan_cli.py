"""``workq plan`` and ``workq workflow``, with --json, run in this process."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.services.plans.conftest import fill
from tests.workq_cli import data, ok, workq


def test_plan_commands_walk_a_plan_and_launch_it(tmp_path: Path) -> None:
    entered = data("plan", "enter", "cli-plan", "Plan from the shell", "--run-id", "r1")
    assert entered["plan"]["phase"] == "explore" and entered["created_file"]
    assert (tmp_path / "plans" / "cli-plan.md").is_file()
    shown = ok("plan", "show", "--run-id", "r1")
    assert "still empty  Findings, Approach, Risks, Tasks" in shown
    refused = workq("plan", "exit", "--run-id", "r1")
    assert refused.returncode == 1
    assert refused.stderr.startswith("error: PLAN_EMPTY: ")
    moved = data("plan", "advance", "--run-id", "r1")
    assert (moved["previous"], moved["plan"]["phase"]) == ("explore", "design")
    fill(tmp_path / "plans" / "cli-plan.md")
    done = data("plan", "exit", "--launch-swarm", "--teammates", "2", "--run-id", "r1")
    assert [(i["number"], i["agent"], i["waits_for"]) for i in done["launched"]] == [
        (1, "teammate-1", []),
        (2, "teammate-2", []),
        (3, "teammate-1", [1]),
        (4, "teammate-2", [1, 3]),
    ]
    listed = data("plan", "list")
    assert [(p["slug"], p["status"], p["run_id"]) for p in listed] == [("cli-plan", "exited", "r1")]
    assert data("plan", "list", "--active") == []
    detail = data("plan", "show", "cli-plan")
    assert [i["number"] for i in detail["issues"]] == [1, 2, 3, 4]
    assert detail["empty_sections"] == []
    table = ok("plan", "show", "cli-plan")
    assert "teammate-2" in table and "#1, #3" in table


def test_plan_run_id_defaults_and_abandon(tmp_path: Path) -> None:
    env = {"WORKQ_RUN_ID": "from-env", "WORKQ_PLANS_DIR": str(tmp_path / "elsewhere")}
    text = ok("plan", "enter", "envy", "goal", env=env)
    assert text.startswith("Entered plan mode: envy (run from-env, phase Explore)")
    assert f"Plan file: elsewhere{os.sep}envy.md" in text
    assert data("plan", "show", env=env)["plan"]["run_id"] == "from-env"
    as_tester = workq("plan", "show")
    assert as_tester.returncode == 1 and "NO_ACTIVE_PLAN" in as_tester.stderr
    dropped = data("plan", "exit", "--abandon", env=env)
    assert dropped["status"] == "abandoned"
    assert (tmp_path / "elsewhere" / "envy.md").exists()
    bad = workq("plan", "enter", "../escape", "goal")
    assert bad.returncode == 1 and bad.stderr.startswith("error: INVALID_INPUT: invalid plan slug")
    assert not (tmp_path / "escape.md").exists()


@pytest.mark.usefixtures("trusted_tests_gate")
def test_workflow_commands(tmp_path: Path) -> None:
    ok("create", "Add a workflow", "-t", "feature")
    ok("claim", "1", "--run-id", "dev")
    refused = workq("workflow", "advance", "1", "research", "--run-id", "someone")
    assert refused.returncode == 1 and "NOT_HOLDER" in refused.stderr
    step = data(
        "workflow",
        "advance",
        "1",
        "branch",
        "--run-id",
        "dev",
        "--skip-justification",
        "trivial",
    )
    assert step["workflow"]["branchName"] == "1-add-a-workflow"
    assert step["workflow"]["skipped"] == ["research"]
    ok("workflow", "advance", "1", "implementation", "--run-id", "dev")
    ok("workflow", "advance", "1", "testing", "--run-id", "dev")
    gate = workq("workflow", "advance", "1", "commit", "--run-id", "dev")
    assert gate.returncode == 1 and "tests must pass first" in gate.stderr
    ok("workflow", "advance", "1", "commit", "--tests-passed", "--run-id", "dev")
    status = data("workflow", "show", "1")
    (item,) = status["workflows"]
    assert item["currentPhase"] == "commit" and item["testsPassed"] is True
    assert len(item["phaseHistory"]) == 4
    assert data("workflow", "show", "--run-id", "other") == {"workflows": []}
    assert "commit" in ok("workflow", "show")
    detail = ok("workflow", "show", "1")
    assert "implementation -> testing" in detail


def test_cli_claims_are_refused_while_the_run_is_planning(tmp_path: Path) -> None:
    ok("create", "first")
    ok("create", "second")
    ok("claim", "2", "--run-id", "p")
    ok("plan", "enter", "think", "goal", "--run-id", "p")
    for args in (
        ("claim-next", "--run-id", "p"),
        ("claim", "1", "--run-id", "p"),
        ("force-claim", "1", "--run-id", "p", "--confirm", "I understand this may cause conflicts"),
        ("complete", "2", "--run-id", "p"),
    ):
        refused = workq(*args)
        assert refused.returncode == 1, args
        assert refused.stderr.startswith("error: PLAN_MODE_ACTIVE: Run p is in plan mode"), args
        assert "workq plan exit" in refused.stderr
    assert data("show", "1")["claimed_by"] is None
    assert data("show", "2")["status"] == "in_progress"
    # Other runs are not affected; an admin may override.
    assert data("claim-next", "--run-id", "q")["number"] == 1
    ok("complete", "2", "--run-id", "p", "--ignore-plan-mode")
    assert data("show", "2")["status"] == "done"
