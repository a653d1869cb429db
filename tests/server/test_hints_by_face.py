"""A refusal's next step names a tool the caller has: the server's own tools decide how a
hint spells a step (server/spelling.py), and a step none of them does is named as the
`workq` command to run in a terminal, never as a tool the caller cannot call."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from tests.server.conftest import call_error, call_ok, error_of, make_server, text
from workq.errors import QualityGateFailed, Step
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
