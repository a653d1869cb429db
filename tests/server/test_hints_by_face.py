"""A refusal's next step names a tool the caller has: the server's own tools decide how a
hint spells a step (server/spelling.py), and a step none of them does is named as the
`workq` command to run in a terminal, never as a tool the caller cannot call."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mcp import Client

from tests.server.conftest import EVERYTHING, call_error, call_ok, error_of, make_server, text
from workq.errors import (
    AllIssuesLocked,
    NothingToCommit,
    OnDefaultBranch,
    QualityGateFailed,
    Step,
    WorkqError,
)
from workq.server.spelling import spelling

pytestmark = pytest.mark.anyio


async def _blocked_claim_hint(db: Path, toolsets: str) -> tuple[str, str]:
    async with Client(make_server(db, toolsets=toolsets)) as client:
        await call_ok(client, "issue_create", title="stuck")
        await call_ok(client, "issue_block", number=1, reason="waits for a decision")
        refused = await call_error(client, "issue_claim", number=1)
        return text(refused), error_of(refused)["hint"]


async def test_a_server_without_the_unblock_tool_names_the_command(db: Path) -> None:
    said, hint = await _blocked_claim_hint(db, "default")
    assert "issue_unblock" not in said and "issue_unblock" not in hint
    assert "'workq unblock 1' in a terminal (this server has no tool for it)" in hint
    assert hint in said  # the text carries what the structured part carries
    assert "pick another with issue_ready" in hint


async def test_a_server_with_the_unblock_tool_names_it(tmp_path: Path, db: Path) -> None:
    _, hint = await _blocked_claim_hint(db, "default,recovery")
    assert hint == "unblock it with issue_unblock, or pick another with issue_ready"


def test_the_gates_step_is_the_gates_tool_of_the_face_or_the_command() -> None:
    refusal = QualityGateFailed(number=7)
    native = refusal.hint_for(spelling({"issue_merge", "issue_gates"}))
    workflow = refusal.hint_for(spelling({"merge_to_main", "run_quality_gates"}))
    agit = refusal.hint_for(spelling({"agit_merge_worktree", "agit_claim_task"}))
    assert native is not None and "issue_gates" in native and "run_quality_gates" not in native
    assert workflow is not None and "run_quality_gates" in workflow
    assert agit is not None and "'workq gates run 7' in a terminal" in agit


def test_every_step_is_spelled_by_a_tool_or_an_argument_or_a_command() -> None:
    nothing = spelling(set())
    for step in Step:
        said = nothing(step, {"number": 3})
        assert said == step.value or "in a terminal" in said, step


def _error_classes() -> list[type[WorkqError]]:
    found, todo = [], [WorkqError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


def test_no_fixed_hint_names_a_tool_in_plain_text(db: Path) -> None:
    """A hint that names a tool names it as a Step, spelled by the face that answers."""
    tools = set(make_server(db, toolsets=EVERYTHING).workq_tools)
    named = {
        cls.__name__: [t for t in tools if re.search(rf"\b{t}\b", cls.hint or "")]
        for cls in _error_classes()
        if cls.next_step is None
    }
    assert {name: said for name, said in named.items() if said} == {}


def test_the_steps_of_the_profile_refusals_are_spelled_by_the_face() -> None:
    locked = AllIssuesLocked()
    assert locked.hint_for(spelling({"select_next_issue", "force_claim"})) == (
        "wait for a lock to be released, or take one over with force_claim"
    )
    native = locked.hint_for(spelling({"issue_force_claim", "force_claim"}))
    assert native is not None and native.endswith("take one over with issue_force_claim")
    none = locked.hint_for(spelling(set()))
    assert none is not None and "'workq force-claim N --confirm '...'' in a terminal" in none

    workflow = spelling({"start_work_on_issue", "create_feature_branch", "commit_tdd_phase"})
    assert OnDefaultBranch().hint_for(workflow) == (
        "start a branch first: start_work_on_issue or create_feature_branch"
    )
    assert "commit_tdd_phase commits every change" in (NothingToCommit().hint_for(workflow) or "")
    for error in (OnDefaultBranch(), NothingToCommit()):
        said = error.hint_for(spelling({"issue_claim", "issue_merge"})) or ""
        assert "start_work_on_issue" not in said and "commit_tdd_phase" not in said
        assert "in a terminal (this server has no tool for it)" in said
