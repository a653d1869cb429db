"""Plan mode through servers: every transition allowed and refused with seed 002's
wording, restarts, two run ids, claims refused while planning, path escapes (servers built
in this process, one per run id, on one database file), and launchSwarm followed by the
autopilot loop, end to end through real ``workq serve`` subprocesses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.types import CallToolResult

from tests.server.conftest import call_error, call_ok, error_of, text
from tests.services.plans.conftest import fill, serve, serve_here, tree
from workq.domain.plan import PlanPhase, guidance

pytestmark = pytest.mark.anyio

LIMIT = 120  # seconds for a whole test: server processes start in about a second each


async def code_of(client: Client, tool: str, **arguments: Any) -> tuple[str, CallToolResult]:
    result = await call_error(client, tool, **arguments)
    return str(error_of(result)["code"]), result


async def test_every_plan_transition_allowed_and_refused(tmp_path: Path) -> None:
    with anyio.fail_after(LIMIT):
        async with serve_here(tmp_path, "run-a") as client:
            idle = await call_ok(client, "get_current_phase")
            assert text(idle).startswith("Not in plan mode (run run-a)")
            assert idle.structured_content is not None
            assert idle.structured_content["active"] is False
            assert idle.structured_content["run_id"] == "run-a"
            assert idle.structured_content["phase"] is None
            for tool in ("advance_plan_phase", "exit_plan_mode"):
                code, refused = await code_of(client, tool)
                assert code == "NO_ACTIVE_PLAN"
                assert "Run run-a is not in plan mode" in text(refused)

            entered = await call_ok(
                client, "enter_plan_mode", slug="vim-mode", goal="Implement vim keybindings"
            )
            assert text(entered).startswith(
                "Entered plan mode: vim-mode\nPlan file: plans/vim-mode.md\n"
            )
            assert (tmp_path / "plans" / "vim-mode.md").is_file()
            code, refused = await code_of(client, "enter_plan_mode", slug="other", goal="g")
            assert code == "PLAN_MODE_ACTIVE"
            assert "already in plan mode: plan vim-mode, phase Explore" in text(refused)
            resumed = await call_ok(client, "enter_plan_mode", slug="vim-mode", goal="again")
            assert "resumed at phase Explore" in text(resumed)

            phase = await call_ok(client, "get_current_phase")
            assert text(phase).startswith(
                f"Current phase: EXPLORE\n\n{guidance(PlanPhase.EXPLORE)}"
            )
            code, refused = await code_of(client, "exit_plan_mode")
            assert code == "PLAN_EMPTY"
            assert error_of(refused)["details"]["empty_sections"] == [
                "Findings",
                "Approach",
                "Risks",
                "Tasks",
            ]
            assert text(refused).startswith("Could not exit plan mode: PLAN_EMPTY: ")

            for name in ("Design", "Review", "Final", "Exit"):
                moved = await call_ok(client, "advance_plan_phase")
                phase_ = PlanPhase(name.lower())
                assert text(moved).startswith(f"Advanced to phase: {name}\n{guidance(phase_)}")
                assert moved.structured_content is not None
                assert moved.structured_content["phase"] == phase_.value
            code, refused = await code_of(client, "advance_plan_phase")
            assert code == "INVALID_TRANSITION"
            assert "no phase after Exit" in text(refused) and "exit_plan_mode" in text(refused)

            fill(tmp_path / "plans" / "vim-mode.md")
            done = await call_ok(client, "exit_plan_mode", launchSwarm=False, teammateCount=3)
            assert text(done) == "Exited plan mode\nPlan saved: plans/vim-mode.md"
            assert done.structured_content is not None
            assert done.structured_content["launched"] == []
            assert text(await call_ok(client, "get_current_phase")).startswith("Not in plan mode")
            code, _ = await code_of(client, "exit_plan_mode")
            assert code == "NO_ACTIVE_PLAN"
            # Arguments the schema refuses are INVALID_INPUT, and nothing changes.
            for arguments in ({"launchSwarm": "yes"}, {"teammateCount": 0}, {"extra": 1}):
                code, _ = await code_of(client, "exit_plan_mode", **arguments)
                assert code == "INVALID_INPUT"


async def test_a_restarted_server_resumes_the_same_plan(tmp_path: Path) -> None:
    with anyio.fail_after(LIMIT):
        async with serve_here(tmp_path, "run-a") as client:
            await call_ok(client, "enter_plan_mode", slug="resume-me", goal="survive restarts")
            await call_ok(client, "advance_plan_phase")
        async with serve_here(tmp_path, "run-a") as client:
            phase = await call_ok(client, "get_current_phase")
            assert text(phase).startswith("Current phase: DESIGN")
            assert "Plan: resume-me (plans/resume-me.md)" in text(phase)
            assert text(await call_ok(client, "advance_plan_phase")).startswith(
                "Advanced to phase: Review"
            )
        async with serve_here(tmp_path, "run-b") as client:
            assert text(await call_ok(client, "get_current_phase")).startswith("Not in plan mode")
        async with serve_here(tmp_path, "run-a") as client:
            assert text(await call_ok(client, "get_current_phase")).startswith(
                "Current phase: REVIEW"
            )


async def test_two_run_ids_plan_at_once(tmp_path: Path) -> None:
    with anyio.fail_after(LIMIT):
        async with serve_here(tmp_path, "run-a") as a, serve_here(tmp_path, "run-b") as b:
            await call_ok(a, "enter_plan_mode", slug="alpha", goal="first")
            code, refused = await code_of(b, "enter_plan_mode", slug="alpha", goal="same")
            assert code == "CONFLICT" and "being planned by run run-a" in text(refused)
            await call_ok(b, "enter_plan_mode", slug="beta", goal="second")
            await call_ok(b, "advance_plan_phase")
            assert text(await call_ok(a, "get_current_phase")).startswith("Current phase: EXPLORE")
            phase = await call_ok(b, "get_current_phase")
            assert text(phase).startswith("Current phase: DESIGN")
            assert "plans/beta.md" in text(phase) and "alpha" not in text(phase)
            fill(tmp_path / "plans" / "alpha.md")
            await call_ok(a, "exit_plan_mode")
            assert text(await call_ok(b, "get_current_phase")).startswith("Current phase: DESIGN")


async def test_claiming_and_completing_are_refused_while_planning(tmp_path: Path) -> None:
    with anyio.fail_after(LIMIT):
        async with serve_here(tmp_path, "run-a") as client, serve_here(tmp_path, "run-b") as other:
            for title in ("first", "second", "third"):
                await call_ok(client, "issue_create", title=title)
            await call_ok(client, "issue_claim", number=1)
            await call_ok(client, "enter_plan_mode", slug="think-first", goal="plan it")
            refusals: list[tuple[str, dict[str, Any], str]] = [
                ("issue_claim", {"number": 2}, "Could not claim issue #2: PLAN_MODE_ACTIVE: "),
                ("issue_claim", {"number": 2, "run_id": "alias"}, "Could not claim issue #2: "),
                ("issue_claim_next", {}, "Could not claim the next issue: PLAN_MODE_ACTIVE: "),
                ("issue_complete", {"number": 1}, "Could not complete issue #1: PLAN_MODE_ACTIVE"),
            ]
            for tool, arguments, start in refusals:
                code, refused = await code_of(client, tool, **arguments)
                assert code == "PLAN_MODE_ACTIVE", tool
                assert text(refused).startswith(start), text(refused)
                assert "plan think-first, phase Explore" in text(refused)
                assert "exit_plan_mode" in text(refused)
            # Creating, listing and reading stay allowed, and other runs are not affected.
            await call_ok(client, "issue_create", title="noted while planning")
            await call_ok(client, "issue_list")
            await call_ok(client, "issue_get", number=1)
            await call_ok(client, "issue_ready")
            await call_ok(other, "issue_claim", number=3)
            await call_ok(other, "issue_complete", number=3)
            got = await call_ok(client, "issue_get", number=2)
            assert got.structured_content is not None
            assert got.structured_content["claimed_by"] is None

            fill(tmp_path / "plans" / "think-first.md")
            await call_ok(client, "exit_plan_mode")
            await call_ok(client, "issue_complete", number=1)
            await call_ok(client, "issue_claim", number=2)


async def test_path_escapes_are_refused_and_nothing_is_written_outside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plans_dir = tmp_path / "work" / "plans"
    plans_dir.mkdir(parents=True)
    (tmp_path / "secret.md").write_text("keep\n")
    (plans_dir / "link.md").symlink_to(tmp_path / "secret.md")
    before = tree(tmp_path)
    with anyio.fail_after(LIMIT):
        # The plans folder comes from the environment, as for `workq serve`.
        monkeypatch.setenv("WORKQ_PLANS_DIR", str(plans_dir))
        async with serve_here(tmp_path, "run-a", db="q.db") as client:
            for slug in ("../secret", "/etc/passwd", "a/b", "..", "x.md", "link", "UP"):
                code, refused = await code_of(client, "enter_plan_mode", slug=slug, goal="g")
                assert code == "INVALID_INPUT", slug
                assert text(refused).startswith("Could not enter plan mode: INVALID_INPUT: ")
            code, _ = await code_of(client, "enter_plan_mode", slug="a" * 65, goal="g")
            assert code == "INVALID_INPUT"
            assert text(await call_ok(client, "get_current_phase")).startswith("Not in plan mode")
            written = await call_ok(client, "enter_plan_mode", slug="inside", goal="g")
            assert "Plan file: work/plans/inside.md\n" in text(written)
    after = {k: v for k, v in tree(tmp_path).items() if not k.startswith(("q.db", "serve-"))}
    assert after == {**before, "work/plans/inside.md": (plans_dir / "inside.md").read_bytes()}


async def test_launch_swarm_then_the_autopilot_loop_works_the_plan(tmp_path: Path) -> None:
    with anyio.fail_after(LIMIT):
        async with serve(tmp_path, "planner") as planner:
            await call_ok(planner, "enter_plan_mode", slug="vim-mode", goal="vim keys")
            for _ in range(4):
                await call_ok(planner, "advance_plan_phase")
            fill(tmp_path / "plans" / "vim-mode.md")
            done = await call_ok(planner, "exit_plan_mode", launchSwarm=True, teammateCount=2)
            assert text(done) == (
                "Exited plan mode\nPlan saved: plans/vim-mode.md\n"
                "Launched 4 issue(s) for 2 teammate(s):\n"
                "#1 teammate-1: Add the mode table\n"
                "#2 teammate-2: Document the modes\n"
                "#3 teammate-1: Wire the dispatcher (after #1)\n"
                "#4 teammate-2: End-to-end tests (after #1, #3)"
            )
            assert done.structured_content is not None
            launched = {i["number"]: i for i in done.structured_content["launched"]}
            assert {n: i["waits_for"] for n, i in launched.items()} == {
                1: [],
                2: [],
                3: [1],
                4: [1, 3],
            }
            listed = await call_ok(planner, "issue_list", label="plan:vim-mode")
            assert listed.structured_content is not None
            assert len(listed.structured_content["items"]) == 4

        finished: list[int] = []
        async with serve(tmp_path, "teammate-1") as one, serve(tmp_path, "teammate-2") as two:
            team = {"teammate-1": one, "teammate-2": two}
            for _ in range(10):  # rounds: each teammate takes what is ready for it
                for agent, client in team.items():
                    ready = await call_ok(client, "issue_ready", agent=agent)
                    assert ready.structured_content is not None
                    issue = ready.structured_content["issue"]
                    if issue is None:
                        continue
                    number = issue["number"]
                    assert text(await call_ok(client, "issue_claim", number=number)) == (
                        f"Claimed issue #{number}"
                    )
                    await call_ok(client, "issue_complete", number=number)
                    finished.append(number)
                if len(finished) == 4:
                    break
            assert sorted(finished) == [1, 2, 3, 4]
            for number, item in launched.items():
                assert all(finished.index(b) < finished.index(number) for b in item["waits_for"])
            for client in team.values():
                assert text(await call_ok(client, "issue_ready")) == "No ready issues available"
