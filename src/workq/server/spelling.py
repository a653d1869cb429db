"""How a server spells the steps its refusals point to: as a tool this server has.

A hint names a ``Step`` (errors.py); its value is the native tool. A server may not have
that tool: the gates tool is ``run_quality_gates`` under the workflow-server profile and
``issue_gates`` in the ``coding`` toolset, and an agit agent may have neither. Each step
names here the tools that do it, best first; a server answers with the first one it has,
and with the command line's command when it has none (a person or a shell can still run
it), never with a tool the caller cannot call.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from workq.domain.commands import command
from workq.errors import Spelling, Step

# The tools that do each step, best first. A step that is an argument (a confirmation
# string, testsPassed) is spelled as it is.
TOOLS: dict[Step, tuple[str, ...]] = {
    Step.LIST_ISSUES: ("issue_list", "list_backlog", "agit_list_tasks"),
    Step.SHOW_ISSUE: ("issue_get", "get_workflow_status", "agit_repo_status"),
    Step.READY: ("issue_ready", "select_next_issue", "agit_list_tasks"),
    Step.CLAIM: ("issue_claim", "agit_claim_task", "select_next_issue"),
    Step.CLAIM_NEXT: ("issue_claim_next", "select_next_issue"),
    Step.RELEASE: ("issue_release", "release_lock"),
    Step.UNBLOCK: ("issue_unblock",),
    Step.FORCE_CLAIM: ("issue_force_claim", "force_claim"),
    Step.ENTER_PLAN: ("enter_plan_mode",),
    Step.PLAN_PHASE: ("get_current_phase",),
    Step.ADVANCE_PLAN: ("advance_plan_phase",),
    Step.EXIT_PLAN: ("exit_plan_mode",),
    Step.LIST_PLANS: ("get_current_phase",),
    Step.RUN_GATES: ("run_quality_gates", "issue_gates"),
    Step.MAKE_WORKTREE: ("issue_claim", "agit_spawn_worktree"),
    Step.MERGE: ("issue_merge", "merge_to_main", "agit_merge_worktree"),
    Step.REMOVE_WORKTREE: ("issue_block", "agit_remove_worktree"),
    Step.START_WORK: ("start_work_on_issue",),
    Step.CREATE_BRANCH: ("create_feature_branch",),
    Step.COMMIT_PHASE: ("commit_tdd_phase",),
}
# A tool that does a step only through one of its arguments, which it may not offer (the
# issue tools' workspace arguments come with the workspaces toolset).
ARGUMENTS: dict[tuple[Step, str], str] = {
    (Step.REMOVE_WORKTREE, "issue_block"): "remove_worktree",
}
# Steps that take two tools: both, or the command line.
PAIRS: dict[Step, tuple[str, str]] = {
    Step.COMPLETE_ANYWAY: ("issue_force_claim", "issue_complete"),
    Step.RELEASE_ANYWAY: ("issue_force_claim", "issue_release"),
}


def spelling(tools: Collection[str] | Mapping[str, Any]) -> Spelling:
    """The spelling of a server whose tools are ``tools``: their names, or the tools by
    name (then a tool's arguments count too, see ``ARGUMENTS``)."""
    offered = {
        name: frozenset(getattr(tool, "parameters", {}).get("properties", ()))
        for name, tool in (tools.items() if isinstance(tools, Mapping) else ())
    }

    def able(step: Step, name: str) -> bool:
        needed = ARGUMENTS.get((step, name))
        return name in have and (needed is None or needed in offered.get(name, ()))

    have = frozenset(tools)

    def spell(step: Step, facts: Mapping[str, Any]) -> str:
        if step in PAIRS:
            if all(name in have for name in PAIRS[step]):
                return step.value
            return _from_a_terminal(step, facts)
        choices = TOOLS.get(step)
        if choices is None:  # an argument, not a tool
            return step.value
        for name in choices:
            if able(step, name):
                return _as_tool(step, name)
        return _from_a_terminal(step, facts)

    return spell


def _as_tool(step: Step, name: str) -> str:
    """The step's own wording when its tool is the native one (it may carry arguments)."""
    return step.value if step.value.split()[0].split("(")[0] == name else name


def _from_a_terminal(step: Step, facts: Mapping[str, Any]) -> str:
    return f"{command(step, facts)} in a terminal (this server has no tool for it)"
