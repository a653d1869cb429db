"""How each face that acts on claimed work is called: a recipe per face (and per variant,
where one face does different things), building valid arguments for the claimed issue.

A recipe names its *family*: how the world is set up and how the holder claims issue #1.
Tools: queue (``issue_claim``); repo (``issue_claim`` with a worktree); github (the same,
the repository's ``origin`` a bare one the fake GitHub reads); pr (the same, landing
through pull requests); agit (``agit_claim_task`` for a registered agent, with a
worktree); workflow (``start_work_on_issue`` with a worktree, the server working in the
repository). Commands and the board: cli (``workq claim``); cli-repo (in a repository that
makes a worktree per claim); cli-bare-repo (in a repository, no worktree); landing (a
worktree per claim, landing through pull requests on the fake GitHub). ``prepare`` lists
what the holder does before the case: commit work, leave an edit, reserve a path, queue
its landing, ...

``outcome``: ``code`` compares the call's code (or success) with the table's; ``next``
is a claim of the next ready issue (it claims #1 or answers that nothing is ready: the
table's refusal shows as "nothing"); ``sweep`` renews, releases, removes or lands what it
finds (the outcome is whether #1, its worktree, or what it landed changed)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.authority.world import NUMBER, OTHER, REPO, REPO2
from workq.domain.decisions import Action
from workq.schemas import FORCE_CLAIM_CONFIRMATION

A = Action
CONFIRM = FORCE_CLAIM_CONFIRMATION


@dataclass(frozen=True)
class Ctx:
    """What a recipe builds its arguments from."""

    run_id: str | None  # the run id the call names (None: the caller's own)
    agent: str | None  # the agent id an agit tool names
    fence: int | None
    worktree_id: str | None
    number: int = NUMBER  # the claimed issue


Build = Callable[[Ctx], Any]


@dataclass(frozen=True)
class Recipe:
    face: str  # the tool, the command as typed, or the board action
    kind: str  # tool | cli | board
    family: str
    actions: tuple[Action, ...]
    build: Build
    variant: str = ""
    names: str | None = None  # the parameter naming the run id it acts as
    fence: bool = False  # it takes the claim's fence
    force: str | None = None  # the CLI's override flag
    always_override: bool = False  # the CLI command acts as an override whatever it is told
    claims_as: str | None = None  # the run id a board force-claim claims under
    for_holder: bool = False  # acts for the claim that asked (the landing worker)
    outcome: str = "code"  # code | next | sweep
    sweeps: str = ""  # for a sweep: what it looks at (held | lapsed | finished | landing)
    prepare: tuple[str, ...] = ()
    target: int = NUMBER
    only: tuple[str, ...] = ()  # the callers it runs as, when not all of them
    why_only: str = ""

    @property
    def id(self) -> str:
        label = f"{self.kind}:{self.face}"
        return f"{label}[{self.variant}]" if self.variant else label


def _opt(ctx: Ctx, **values: Any) -> dict[str, Any]:
    """The arguments, with run_id and fence only when given."""
    out = {k: v for k, v in values.items() if v is not None}
    if ctx.run_id is not None:
        out["run_id"] = ctx.run_id
    return out


def _fence(ctx: Ctx) -> dict[str, int]:
    return {"fence": ctx.fence} if ctx.fence is not None else {}


def _fenced(ctx: Ctx) -> list[str]:
    return ["--fence", str(ctx.fence)] if ctx.fence is not None else []


def _run(ctx: Ctx) -> list[str]:
    return ["--run-id", ctx.run_id] if ctx.run_id is not None else []


ANYONES = ("holder", "other")
LANDING = ("holder", "stale", "taken-over", "no-claim", "planning")
NOT_CLAIMABLE_STATE = "the issue is blocked or done: it has no claim, only holder and other apply"


def tool(face: str, family: str, actions: tuple[Action, ...], build: Build, **kw: Any) -> Recipe:
    return Recipe(face, "tool", family, actions, build, **kw)


def cli(face: str, family: str, actions: tuple[Action, ...], build: Build, **kw: Any) -> Recipe:
    return Recipe(face, "cli", family, actions, build, **kw)


def board(face: str, actions: tuple[Action, ...], build: Build, **kw: Any) -> Recipe:
    return Recipe(face, "board", "cli", actions, build, **kw)


RUN_ID: dict[str, Any] = {"names": "run_id"}
FENCED: dict[str, Any] = {"names": "run_id", "fence": True}

# fmt: off
TOOL_RECIPES: list[Recipe] = [
    tool("issue_update", "queue", (A.EDIT,), lambda c: {"number": c.number, "title": "renamed"},
         variant="title"),
    tool("issue_update", "queue", (A.RESHAPE,), lambda c: {"number": c.number, "touches": []},
         variant="touches"),
    tool("issue_update", "repo", (A.RESHAPE,), lambda c: {"number": c.number, "repository": REPO2},
         variant="repository", prepare=("repo2",)),
    tool("issue_delete", "queue", (A.DELETE,), lambda c: {"number": c.number}),
    tool("issue_claim", "queue", (A.CLAIM,), lambda c: _opt(c, number=c.number), **RUN_ID),
    tool("issue_claim_next", "queue", (A.CLAIM,), lambda c: _opt(c), **RUN_ID, outcome="next",
         prepare=("block2",)),
    tool("issue_complete", "queue", (A.COMPLETE,), lambda c: _opt(c, number=c.number, **_fence(c)),
         **FENCED),
    tool("issue_block", "queue", (A.BLOCK,),
         lambda c: _opt(c, number=c.number, reason="stuck", **_fence(c)), **FENCED),
    tool("issue_release", "queue", (A.RELEASE,), lambda c: _opt(c, number=c.number, **_fence(c)),
         **FENCED),
    tool("issue_heartbeat", "queue", (A.HEARTBEAT,),
         lambda c: _opt(c, number=c.number, **_fence(c)), **FENCED, variant="number"),
    tool("issue_heartbeat", "queue", (A.HEARTBEAT,), lambda c: _opt(c), **RUN_ID,
         variant="every claim", outcome="sweep", sweeps="held"),
    tool("issue_unblock", "queue", (A.UNBLOCK,), lambda c: {"number": OTHER}, target=OTHER,
         prepare=("block2",), only=ANYONES, why_only=NOT_CLAIMABLE_STATE),
    tool("issue_force_claim", "queue", (A.FORCE_CLAIM,),
         lambda c: _opt(c, number=c.number, confirmation=CONFIRM), **RUN_ID),
    tool("issue_depend", "queue", (A.DEPEND,), lambda c: {"blocker": OTHER, "blocked": c.number}),
    tool("issue_undepend", "queue", (A.DEPEND,), lambda c: {"blocker": OTHER, "blocked": c.number},
         prepare=("depend",)),
    tool("issue_comment", "queue", (A.COMMENT,), lambda c: _opt(c, number=c.number, body="a note"),
         **RUN_ID),
    tool("issue_reserve", "queue", (A.RESERVE,),
         lambda c: _opt(c, number=c.number, glob="docs/**", **_fence(c)), **FENCED),
    tool("issue_unreserve", "queue", (A.UNRESERVE,),
         lambda c: _opt(c, number=c.number, glob="docs/**", **_fence(c)), **FENCED,
         prepare=("reserve",)),
    tool("issue_merge", "repo", (A.MERGE,), lambda c: _opt(c, number=c.number, **_fence(c)),
         **FENCED, prepare=("commit",)),
    tool("issue_merge", "pr", (A.QUEUE_LANDING,),
         lambda c: _opt(c, number=c.number, **_fence(c)), **FENCED, prepare=("commit",),
         variant="pull request"),
    tool("issue_gates", "repo", (A.GATES,), lambda c: _opt(c, number=c.number), **RUN_ID),
    # contract B
    tool("advance_workflow", "queue", (A.STEP,),
         lambda c: {"targetPhase": "research", "issueNumber": c.number}),
    tool("select_next_issue", "queue", (A.CLAIM,), lambda c: {}, outcome="next",
         prepare=("block2",)),
    tool("release_lock", "queue", (A.RELEASE,),
         lambda c: {"issueNumber": c.number, "reason": "abandoned"}, variant="abandoned"),
    tool("release_lock", "queue", (A.COMPLETE,),
         lambda c: {"issueNumber": c.number, "reason": "completed"}, variant="completed"),
    tool("force_claim", "queue", (A.FORCE_CLAIM,),
         lambda c: {"issueNumber": c.number, "confirmation": CONFIRM}),
    # contract E
    tool("run_quality_gates", "repo", (A.GATES,),
         lambda c: _opt(c, files=[], issue_number=c.number), **RUN_ID),
    tool("link_issue_to_branch", "workflow", (A.CLAIM,),
         lambda c: {"issue_number": c.number, "move_to_in_progress": True}, variant="claim",
         prepare=("branch",)),
    tool("link_issue_to_branch", "workflow", (A.RESHAPE,),
         lambda c: {"issue_number": c.number, "move_to_in_progress": False}, variant="link",
         prepare=("branch",)),
    tool("start_work_on_issue", "workflow", (A.CLAIM,),
         lambda c: {"issue_number": c.number, "worktree": True}),
    tool("commit_tdd_phase", "workflow", (A.STEP,),
         lambda c: {"phase": "green", "component": "feature", "issue_number": c.number},
         prepare=("edit",)),
    tool("merge_to_main", "workflow", (A.MERGE,), lambda c: {"issue_number": c.number},
         prepare=("commit",)),
    tool("submit_pr", "github", (A.LAND,),
         lambda c: {"title": "feat: the claimed work", "number": c.number}, prepare=("commit",)),
    tool("add_issue_comment", "queue", (A.COMMENT,),
         lambda c: {"issue_number": c.number, "body": "a note", "comment_type": "progress"}),
    # contract D
    tool("agit_spawn_worktree", "agit", (A.CLAIM,),
         lambda c: {"repo": REPO, "task": "t-1", "agent": c.agent}, names="agent"),
    tool("agit_remove_worktree", "agit", (A.REMOVE_WORKTREE,),
         lambda c: {"repo": REPO, "worktree_id": c.worktree_id}),
    tool("agit_claim_task", "agit", (A.CLAIM,),
         lambda c: {"task_id": "t-1", "agent_id": c.agent, "worktree": True}, names="agent_id"),
    tool("agit_complete_task", "agit", (A.COMPLETE,),
         lambda c: {"task_id": "t-1", "result": "done"}),
    tool("agit_merge_worktree", "agit", (A.MERGE,),
         lambda c: {"repo": REPO, "worktree_id": c.worktree_id}, prepare=("commit",)),
    tool("agit_heartbeat", "agit", (A.HEARTBEAT,), lambda c: {"agent_id": c.agent},
         names="agent_id", outcome="sweep", sweeps="held"),
]

CLI_RECIPES: list[Recipe] = [
    cli("block", "cli", (A.BLOCK,), lambda c: ["block", "1", "stuck", *_run(c), *_fenced(c)],
        **FENCED, force="--force"),
    cli("claim", "cli", (A.CLAIM,), lambda c: ["claim", "1", *_run(c)], **RUN_ID,
        force="--ignore-plan-mode"),
    cli("claim-next", "cli", (A.CLAIM,), lambda c: ["claim-next", *_run(c)], **RUN_ID,
        outcome="next", force="--ignore-plan-mode", prepare=("block2",)),
    cli("comment", "cli", (A.COMMENT,), lambda c: ["comment", "1", "a note"]),
    cli("complete", "cli", (A.COMPLETE,), lambda c: ["complete", "1", *_run(c), *_fenced(c)],
        **FENCED, force="--force"),
    cli("delete", "cli", (A.DELETE,), lambda c: ["delete", "1", "--yes"], force="--force"),
    cli("depend", "cli", (A.DEPEND,), lambda c: ["depend", "1", "--on", "2"]),
    cli("doctor", "cli", (A.RELEASE,), lambda c: ["doctor", "--repair"], outcome="sweep",
        sweeps="lapsed", always_override=True),
    cli("force-claim", "cli", (A.FORCE_CLAIM,),
        lambda c: ["force-claim", "1", "--confirm", CONFIRM, *_run(c)], **RUN_ID,
        force="--ignore-plan-mode"),
    cli("gates run", "cli-repo", (A.GATES,), lambda c: ["gates", "run", "1", *_run(c)],
        **RUN_ID),
    cli("sync github", "landing", (A.LAND,),
        lambda c: ["sync", "github", "--repo", "acme/widgets", "--once"], for_holder=True,
        outcome="sweep", sweeps="landing", prepare=("commit", "queue"), only=LANDING,
        why_only="the worker acts for the claim that queued the landing, in each of its states"),
    cli("heartbeat", "cli", (A.HEARTBEAT,),
        lambda c: ["heartbeat", "1", *_run(c), *_fenced(c)], **FENCED),
    cli("merge", "cli-repo", (A.MERGE,), lambda c: ["merge", "1", *_run(c)], **RUN_ID,
        force="--force", prepare=("commit",)),
    cli("merge", "landing", (A.QUEUE_LANDING,), lambda c: ["merge", "1", *_run(c)], **RUN_ID,
        force="--force", prepare=("commit",), variant="pull request"),
    cli("release", "cli", (A.RELEASE,), lambda c: ["release", "1", *_run(c), *_fenced(c)],
        **FENCED, force="--force"),
    cli("reopen", "cli", (A.REOPEN,), lambda c: ["reopen", "2"], target=OTHER,
        prepare=("done2",), only=ANYONES, why_only=NOT_CLAIMABLE_STATE),
    cli("repo assign", "cli-bare-repo", (A.RESHAPE,),
        lambda c: ["repo", "assign", "1", REPO2], prepare=("repo2",)),
    cli("unblock", "cli", (A.UNBLOCK,), lambda c: ["unblock", "2"], target=OTHER,
        prepare=("block2",), only=ANYONES, why_only=NOT_CLAIMABLE_STATE),
    cli("undepend", "cli", (A.DEPEND,), lambda c: ["undepend", "1", "--on", "2"],
        prepare=("depend",)),
    cli("update", "cli", (A.EDIT,), lambda c: ["update", "1", "--title", "renamed"],
        variant="title", force="--force"),
    cli("update", "cli", (A.RESHAPE,), lambda c: ["update", "1", "--clear-touches"],
        variant="touches", force="--force"),
    cli("update", "cli-bare-repo", (A.RESHAPE,), lambda c: ["update", "1", "--repo", REPO2],
        variant="repository", force="--force", prepare=("repo2",)),
    cli("workflow advance", "cli", (A.STEP,),
        lambda c: ["workflow", "advance", "1", "research", *_run(c)], **RUN_ID),
    cli("worktree prune", "cli-repo", (A.REMOVE_WORKTREE,),
        lambda c: ["worktree", "prune", "--repo", REPO], outcome="sweep", sweeps="finished",
        always_override=True),
    cli("worktree remove", "cli-repo", (A.REMOVE_WORKTREE,),
        lambda c: ["worktree", "remove", str(c.worktree_id), "--repo", REPO, *_run(c)],
        **RUN_ID, force="--force"),
    cli("worktree spawn", "cli-bare-repo", (A.RESHAPE,), lambda c: ["worktree", "spawn", "1"]),
]

BOARD_RECIPES: list[Recipe] = [
    board("priority", (A.EDIT,), lambda c: {"priority": "urgent"}),
    board("unblock", (A.UNBLOCK,), lambda c: {}, target=OTHER, prepare=("block2",),
          only=("override",), why_only=NOT_CLAIMABLE_STATE),
    board("release", (A.RELEASE,), lambda c: {"reason": "agent died"}),
    board("force-claim", (A.FORCE_CLAIM,),
          lambda c: {"run_id": "run-b", "confirmation": CONFIRM}, claims_as="run-b"),
    board("comment", (A.COMMENT,), lambda c: {"body": "from the board"}),
]
# fmt: on

RECIPES = TOOL_RECIPES + CLI_RECIPES + BOARD_RECIPES

# Faces with actions that the matrix does not run, and why.
NOT_RUN: dict[str, str] = {}
