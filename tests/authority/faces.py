"""Every face that can write, and what it does to claimed work.

``TOOLS``, ``COMMANDS`` and ``BOARD`` map each face (a tool of ``tools/list``, a ``workq``
command, a board action) to the actions of the decision table (``domain/decisions.py``)
it performs on a claimed issue, or to a line saying why it creates or changes no claimed
work. tests/authority/test_matrix.py fails, naming the face, when a writing face is missing
here or when a face named here no longer exists; recipes.py says how each face with actions
is called, and test_matrix.py runs it as every caller.

Read-only tools (``readOnlyHint``) need no entry. Commands carry no such hint, so every
command has an entry: the read-only ones under ``READS``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from workq.domain.decisions import Action

A = Action
Entry = tuple[Action, ...] | str

TOOLS: dict[str, Entry] = {
    # contract A and the toolsets
    "issue_create": "creates a new issue, claimed by nobody",
    "issue_update": (A.EDIT, A.RESHAPE),  # title..labels: edit; touches, repository: reshape
    "issue_delete": (A.DELETE,),
    "issue_claim": (A.CLAIM,),
    "issue_claim_next": (A.CLAIM,),
    "issue_complete": (A.COMPLETE,),
    "issue_block": (A.BLOCK,),
    "issue_release": (A.RELEASE,),
    "issue_heartbeat": (A.HEARTBEAT,),
    "enter_plan_mode": "puts the caller's own run in plan mode: its plan, no issue",
    "advance_plan_phase": "moves the caller's own plan: no issue",
    "exit_plan_mode": "ends the caller's own plan; a swarm creates new, unclaimed issues",
    "issue_unblock": (A.UNBLOCK,),
    "issue_force_claim": (A.FORCE_CLAIM,),
    "issue_depend": (A.DEPEND,),
    "issue_undepend": (A.DEPEND,),
    "issue_comment": (A.COMMENT,),
    "issue_reserve": (A.RESERVE,),
    "issue_unreserve": (A.UNRESERVE,),
    "issue_merge": (A.MERGE, A.QUEUE_LANDING),  # a repository landing through a PR: queued
    "issue_gates": (A.GATES,),
    # contract B (issue-priority)
    "advance_workflow": (A.STEP,),
    "create_issue": "creates a new issue, claimed by nobody",
    "select_next_issue": (A.CLAIM,),
    "release_lock": (A.RELEASE, A.COMPLETE),  # abandoned: release; completed/merged: complete
    "force_claim": (A.FORCE_CLAIM,),
    # contract C (github-tools): GitHub's own issues and pull requests, by GitHub number
    "github_create_pr": "opens a pull request between two named branches on GitHub; no issue",
    "github_add_labels": "labels a GitHub issue or pull request; the queue is not touched",
    "github_close_issue": "closes a GitHub issue; a mirrored one is judged by the sync worker",
    # contract E (workflow-server)
    "submit_pr": (A.LAND,),  # pushes the claim's branch and opens the PR that completes it
    "run_quality_gates": (A.GATES,),
    "create_feature_branch": "a branch of no issue in the server's own checkout",
    # move_to_in_progress claims it; without, it only records the branch: what the
    # claim's checkout uses, like its repository (a step would need a claim to link one)
    "link_issue_to_branch": (A.CLAIM, A.RESHAPE),
    "start_work_on_issue": (A.CLAIM,),
    "commit_tdd_phase": (A.STEP,),
    "merge_to_main": (A.MERGE,),
    "add_issue_comment": (A.COMMENT,),
    # contract D (agit)
    "agit_spawn_worktree": (A.CLAIM,),  # an existing task: claims it; a description: a new one
    "agit_remove_worktree": (A.REMOVE_WORKTREE,),
    "agit_claim_task": (A.CLAIM,),
    "agit_complete_task": (A.COMPLETE,),
    "agit_merge_worktree": (A.MERGE,),
    "agit_register_agent": "names an agent (an id for a name and type); no issue",
    "agit_heartbeat": (A.HEARTBEAT,),
}

READS = "reads only"

COMMANDS: dict[str, Entry] = {
    "agents": READS,
    "backlog": READS,
    "backup": "copies the database file; the queue is not changed",
    "block": (A.BLOCK,),
    "board": "serves the board; its actions are faces of their own (BOARD)",
    "claim": (A.CLAIM,),
    "claim-next": (A.CLAIM,),
    "comment": (A.COMMENT,),
    "complete": (A.COMPLETE,),
    "conflicts": READS,
    "context": READS,
    "create": "creates a new issue, claimed by nobody",
    "db check": READS,
    "db copy": "copies the whole queue into another (empty) database; the source is unchanged",
    "db current": READS,
    "db downgrade": "migrates the schema (an administrator's act on the database, not a claim)",
    "db upgrade": "migrates the schema (an administrator's act on the database, not a claim)",
    "delete": (A.DELETE,),
    "depend": (A.DEPEND,),
    "docs search": "reads the docs (its index is a cache outside the queue)",
    "doctor": (A.RELEASE,),  # --repair returns lapsed claims to the queue, as an override
    "export": "writes the queue to a file; the queue is not changed",
    "force-claim": (A.FORCE_CLAIM,),
    "gates evidence": READS,
    "gates init": "writes a gate table into the repository's own checkout, not a claim's",
    "gates list": READS,
    "gates run": (A.GATES,),
    "heartbeat": (A.HEARTBEAT,),
    "history": READS,
    "hooks check": READS,
    "hooks install": "installs the repository's pre-commit hook; no issue",
    "import": "loads an export into an empty database (refused otherwise)",
    "init": "creates the database or migrates it; no issue",
    "list": READS,
    "merge": (A.MERGE, A.QUEUE_LANDING),
    "notify add": "adds a notice sink; no issue",
    "notify deliveries": READS,
    "notify list": READS,
    "notify remove": "removes a notice sink and its notices; no issue",
    "notify run": "delivers the notice outbox; no issue",
    "notify test": "sends a made-up notice to a sink; the queue is not changed",
    "plan advance": "moves the run's own plan: no issue",
    "plan enter": "puts the run in plan mode: its plan, no issue",
    "plan exit": "ends the run's own plan; a swarm creates new, unclaimed issues",
    "plan list": READS,
    "plan relocate": "copies plan files into the plans folder and points plans at them",
    "plan show": READS,
    "ready": READS,
    "release": (A.RELEASE,),
    "reopen": (A.REOPEN,),
    "policy list": READS,
    "policy set": "sets a queue-wide or repository policy; no claim",
    "policy unset": "drops a queue-wide or repository policy; no claim",
    "repo add": "registers a repository; no issue",
    "repo assign": (A.RESHAPE,),
    "repo list": READS,
    "repo set": "changes how a repository lands; no claim",
    "repo status": READS,
    "serve": "serves the tools; they are faces of their own (TOOLS)",
    "show": READS,
    "stats": READS,
    "sync forget": "drops the GitHub mirror's outbox and links; no claim",
    "sync github": (A.LAND,),  # the landing worker: each push and merge call
    "sync retry": "puts dead outbox rows back in the queue; no claim",
    "sync status": READS,
    "unblock": (A.UNBLOCK,),
    "undepend": (A.DEPEND,),
    "update": (A.EDIT, A.RESHAPE),
    "watch": READS,
    "where": READS,
    "workflow advance": (A.STEP,),
    "workflow show": READS,
    "worktree list": READS,
    "worktree prune": (A.REMOVE_WORKTREE,),
    "worktree remove": (A.REMOVE_WORKTREE,),
    "worktree spawn": (A.RESHAPE,),  # makes the worktree a claim works in
}

BOARD: dict[str, Entry] = {
    "priority": (A.EDIT,),
    "unblock": (A.UNBLOCK,),
    "release": (A.RELEASE,),
    "force-claim": (A.FORCE_CLAIM,),
    "comment": (A.COMMENT,),
}


def writes(annotations: Any) -> bool:
    """Whether a tool may write: anything but ``readOnlyHint=True``."""
    return annotations is None or annotations.read_only_hint is not True


def commands(group: Any, path: tuple[str, ...] = ()) -> Iterator[str]:
    """Every command of the click group, as typed: ``db copy``, ``repo add``, ..."""
    for name, sub in sorted(group.commands.items()):
        if hasattr(sub, "commands"):
            yield from commands(sub, (*path, name))
        else:
            yield " ".join((*path, name))
