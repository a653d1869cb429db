"""``workq plan`` and ``workq workflow``, run as real processes with --json."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from tests.plan.conftest import WORKQ, fill


def run(
    cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [WORKQ, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "WORKQ_ACTOR": "tester", **(env or {})},
    )


def ok(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    done = run(cwd, *args, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def data(cwd: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    return json.loads(ok(cwd, *args, "--json", env=env))


def test_plan_commands_walk_a_plan_and_launch_it(tmp_path: Path) -> None:
    entered = data(tmp_path, "plan", "enter", "cli-plan", "Plan from the shell", "--run-id", "r1")
    assert entered["plan"]["phase"] == "explore" and entered["created_file"]
    assert (tmp_path / "plans" / "cli-plan.md").is_file()
    shown = ok(tmp_path, "plan", "show", "--run-id", "r1")
    assert "still empty  Findings, Approach, Risks, Tasks" in shown
    refused = run(tmp_path, "plan", "exit", "--run-id", "r1")
    assert refused.returncode == 1
    assert refused.stderr.startswith("error: PLAN_EMPTY: ")
    moved = data(tmp_path, "plan", "advance", "--run-id", "r1")
    assert (moved["previous"], moved["plan"]["phase"]) == ("explore", "design")
    fill(tmp_path / "plans" / "cli-plan.md")
    done = data(tmp_path, "plan", "exit", "--launch-swarm", "--teammates", "2", "--run-id", "r1")
    assert [(i["number"], i["agent"], i["waits_for"]) for i in done["launched"]] == [
        (1, "teammate-1", []),
        (2, "teammate-2", []),
        (3, "teammate-1", [1]),
        (4, "teammate-2", [1, 3]),
    ]
    listed = data(tmp_path, "plan", "list")
    assert [(p["slug"], p["status"], p["run_id"]) for p in listed] == [("cli-plan", "exited", "r1")]
    assert data(tmp_path, "plan", "list", "--active") == []
    detail = data(tmp_path, "plan", "show", "cli-plan")
    assert [i["number"] for i in detail["issues"]] == [1, 2, 3, 4]
    assert detail["empty_sections"] == []
    table = ok(tmp_path, "plan", "show", "cli-plan")
    assert "teammate-2" in table and "#1, #3" in table


def test_plan_run_id_defaults_and_abandon(tmp_path: Path) -> None:
    env = {"WORKQ_RUN_ID": "from-env", "WORKQ_PLANS_DIR": str(tmp_path / "elsewhere")}
    text = ok(tmp_path, "plan", "enter", "envy", "goal", env=env)
    assert text.startswith("Entered plan mode: envy (run from-env, phase Explore)")
    assert f"Plan file: elsewhere{os.sep}envy.md" in text
    assert data(tmp_path, "plan", "show", env=env)["plan"]["run_id"] == "from-env"
    as_tester = run(tmp_path, "plan", "show")
    assert as_tester.returncode == 1 and "NO_ACTIVE_PLAN" in as_tester.stderr
    dropped = data(tmp_path, "plan", "exit", "--abandon", env=env)
    assert dropped["status"] == "abandoned"
    assert (tmp_path / "elsewhere" / "envy.md").exists()
    bad = run(tmp_path, "plan", "enter", "../escape", "goal")
    assert bad.returncode == 1 and bad.stderr.startswith("error: INVALID_INPUT: invalid plan slug")
    assert not (tmp_path / "escape.md").exists()


def test_workflow_commands(tmp_path: Path) -> None:
    ok(tmp_path, "create", "Add a workflow", "-t", "feature")
    ok(tmp_path, "claim", "1", "--run-id", "dev")
    refused = run(tmp_path, "workflow", "advance", "1", "research", "--run-id", "someone")
    assert refused.returncode == 1 and "NOT_HOLDER" in refused.stderr
    step = data(
        tmp_path,
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
    ok(tmp_path, "workflow", "advance", "1", "implementation", "--run-id", "dev")
    ok(tmp_path, "workflow", "advance", "1", "testing", "--run-id", "dev")
    gate = run(tmp_path, "workflow", "advance", "1", "commit", "--run-id", "dev")
    assert gate.returncode == 1 and "tests must pass first" in gate.stderr
    ok(tmp_path, "workflow", "advance", "1", "commit", "--tests-passed", "--run-id", "dev")
    status = data(tmp_path, "workflow", "show", "1")
    (item,) = status["workflows"]
    assert item["currentPhase"] == "commit" and item["testsPassed"] is True
    assert len(item["phaseHistory"]) == 4
    assert data(tmp_path, "workflow", "show", "--run-id", "other") == {"workflows": []}
    assert "commit" in ok(tmp_path, "workflow", "show")
    detail = ok(tmp_path, "workflow", "show", "1")
    assert "implementation -> testing" in detail


def test_cli_claims_are_refused_while_the_run_is_planning(tmp_path: Path) -> None:
    ok(tmp_path, "create", "first")
    ok(tmp_path, "create", "second")
    ok(tmp_path, "claim", "2", "--run-id", "p")
    ok(tmp_path, "plan", "enter", "think", "goal", "--run-id", "p")
    for args in (
        ("claim-next", "--run-id", "p"),
        ("claim", "1", "--run-id", "p"),
        ("force-claim", "1", "--run-id", "p", "--confirm", "I understand this may cause conflicts"),
        ("complete", "2", "--run-id", "p"),
    ):
        refused = run(tmp_path, *args)
        assert refused.returncode == 1, args
        assert refused.stderr.startswith("error: PLAN_MODE_ACTIVE: Run p is in plan mode"), args
        assert "workq plan exit" in refused.stderr
    assert data(tmp_path, "show", "1")["claimed_by"] is None
    assert data(tmp_path, "show", "2")["status"] == "in_progress"
    # Other runs are not affected; an admin may override.
    assert data(tmp_path, "claim-next", "--run-id", "q")["issue"]["number"] == 1
    ok(tmp_path, "complete", "2", "--run-id", "p", "--ignore-plan-mode")
    assert data(tmp_path, "show", "2")["status"] == "done"
