"""How each step an error hint points to is typed at the command line: the `workq` command.
The CLI spells its hints with it; a server whose tools cannot do a step names the command
instead (server/spelling.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workq.errors import Step

COMMANDS: dict[Step, str] = {
    Step.LIST_ISSUES: "workq list",
    Step.SHOW_ISSUE: "workq show {number}",
    Step.READY: "workq ready",
    Step.CLAIM: "workq claim {number}",
    Step.CLAIM_NEXT: "workq claim-next",
    Step.RELEASE: "workq release {number}",
    Step.UNBLOCK: "workq unblock {number}",
    Step.FORCE_CLAIM: "workq force-claim {number} --confirm '...'",
    Step.COMPLETE_ANYWAY: "workq complete {number} --force",
    Step.RELEASE_ANYWAY: "workq release {number} --force",
    Step.CONFIRM: "--confirm 'I understand this may cause conflicts'",
    Step.NAME_ISSUE: "the issue number",
    Step.ENTER_PLAN: "workq plan enter SLUG GOAL",
    Step.PLAN_PHASE: "workq plan show",
    Step.ADVANCE_PLAN: "workq plan advance",
    Step.EXIT_PLAN: "workq plan exit",
    Step.LIST_PLANS: "workq plan list",
    Step.TESTS_PASSED: "--tests-passed",
    Step.SKIP_JUSTIFICATION: "--skip-justification",
    Step.RUN_GATES: "workq gates run {number}",
    Step.MAKE_WORKTREE: "workq worktree spawn {number}",
    Step.MERGE: "workq merge {number}",
    Step.REMOVE_WORKTREE: "workq worktree remove {repository} {worktree_id}",
    Step.START_WORK: "workq worktree spawn {number}",
    Step.CREATE_BRANCH: "git switch -c BRANCH",
    Step.COMMIT_PHASE: "git commit -a",
}


class _Facts(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return key.upper() if key != "number" else "N"


def command(step: Step, facts: Mapping[str, Any]) -> str:
    """A step as the command a person types (quoted), or as an argument to give."""
    text = COMMANDS[step].format_map(_Facts(facts))
    return f"'{text}'" if text.startswith("workq ") else text
