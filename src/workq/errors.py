"""The exception hierarchy of workq.

Every error carries a stable ``code`` (what happened, for machines), a message (for people),
``facts`` (the details that explain it) and ``hint`` (what the caller should do next).
A subclass's docstring is its default message. Nothing here imports the rest of workq.

A hint that names an operation names it as a ``Step``, not as text: the caller may stand
at the MCP server (where the step is a tool call) or at the CLI (where it is a command), and
each face spells the step its own way. ``hint`` is the MCP spelling; ``describe(spell)``
renders the hint with another face's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any, ClassVar


class Step(Enum):
    """An operation a hint points to. The value is how an MCP client of the native tools
    calls it; a server without that tool names one it has (``workq.server.spelling``), and
    the CLI spells each as its command (``workq.domain.commands``)."""

    LIST_ISSUES = "issue_list"
    SHOW_ISSUE = "issue_get"
    READY = "issue_ready"
    CLAIM = "issue_claim"
    CLAIM_NEXT = "issue_claim_next"
    RELEASE = "issue_release"
    UNBLOCK = "issue_unblock"
    FORCE_CLAIM = "issue_force_claim"
    COMPLETE_ANYWAY = "issue_force_claim, then issue_complete"
    RELEASE_ANYWAY = "issue_force_claim, then issue_release"
    CONFIRM = "confirmation='I understand this may cause conflicts'"
    NAME_ISSUE = "issueNumber"
    ENTER_PLAN = "enter_plan_mode(slug, goal)"
    PLAN_PHASE = "get_current_phase"
    ADVANCE_PLAN = "advance_plan_phase"
    EXIT_PLAN = "exit_plan_mode"
    TESTS_PASSED = "testsPassed=true"
    SKIP_JUSTIFICATION = "skipJustification"
    LIST_PLANS = "get_current_phase (this run's plan)"
    RUN_GATES = "run_quality_gates"
    MAKE_WORKTREE = "issue_claim with worktree=true"
    MERGE = "issue_merge"
    REMOVE_WORKTREE = "issue_block with remove_worktree=true"
    START_WORK = "start_work_on_issue"
    CREATE_BRANCH = "create_feature_branch"
    COMMIT_PHASE = "commit_tdd_phase"


Hint = str | tuple[str | Step, ...]
# How a face writes a step, given the error's facts (an issue number, a slug).
Spelling = Callable[[Step, Mapping[str, Any]], str]


def tool_call(step: Step, facts: Mapping[str, Any]) -> str:
    """The MCP spelling of a step: the tool, as a client calls it."""
    return step.value


def render(hint: Hint, spell: Spelling, facts: Mapping[str, Any]) -> str:
    if isinstance(hint, str):
        return hint
    return "".join(part if isinstance(part, str) else spell(part, facts) for part in hint)


class WorkqError(Exception):
    """workq failed."""

    code: ClassVar[str] = "INTERNAL"
    hint: str | None = None
    # The hint with its steps left structured, when it names any.
    next_step: tuple[str | Step, ...] | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "next_step" in cls.__dict__ and cls.next_step is not None:
            cls.hint = render(cls.next_step, tool_call, {})

    def __init__(
        self, message: str | None = None, *, hint: Hint | None = None, **facts: Any
    ) -> None:
        self.message = message or (self.__doc__ or self.code).strip()
        self.facts: dict[str, Any] = facts
        if isinstance(hint, tuple):
            self.next_step = hint
        elif hint is not None:
            self.next_step = None
            self.hint = hint
        if self.next_step is not None:
            self.hint = render(self.next_step, tool_call, facts)
        super().__init__(self.message)

    def hint_for(self, spell: Spelling = tool_call) -> str | None:
        """The hint as the caller of one face types it."""
        if self.next_step is not None and self.hint == render(
            self.next_step, tool_call, self.facts
        ):
            return render(self.next_step, spell, self.facts)
        return self.hint

    def describe(self, spell: Spelling = tool_call) -> str:
        """One line: code, message, facts and the next step."""
        text = f"{self.code}: {self.message.rstrip('.')}"
        hint = self.hint_for(spell)
        if hint:
            text += f"; {hint}"
        return text

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"code": self.code, "error": self.message}
        if self.facts:
            data["details"] = self.facts
        if self.hint:
            data["hint"] = self.hint
        return data


class InvalidInput(WorkqError):
    """The input is not valid."""

    code = "INVALID_INPUT"
    hint = "fix the argument and call again"


def said_plainly(err: Mapping[str, Any]) -> str:
    """One of pydantic's validation errors (``ValidationError.errors()``) in workq's words,
    for every face: the value given and what it should be, without pydantic's own phrasing
    (``Value error, ...``, ``Input should be a valid integer, unable to parse string``)."""
    value = err.get("input")
    shown = repr(value) if isinstance(value, str) else str(value)
    if len(shown) > 40:  # the value is named, never echoed whole
        shown = shown[:37] + "..."
    kind = err["type"]
    if kind == "value_error":  # a validator's own sentence
        return str(err.get("ctx", {}).get("error", err["msg"])).rstrip(".")
    if kind in ("int_parsing", "int_from_float", "int_type"):
        return f"{shown} is not a whole number"
    if kind in ("float_parsing", "float_type"):
        return f"{shown} is not a number"
    if kind in ("bool_parsing", "bool_type"):
        return f"{shown} is not true or false"
    if kind in ("enum", "literal_error"):
        expected = err.get("ctx", {}).get("expected")
        return f"{shown} is not one of {expected}" if expected else str(err["msg"])
    return str(err["msg"]).replace("Input should", "it should")


def bad_cursor() -> InvalidInput:
    """A paging cursor that workq did not give out (both list and search page)."""
    return InvalidInput(
        "cursor is not one workq gave out",
        field="cursor",
        hint="pass the next cursor of an earlier page, or none for the first page",
    )


class NotFound(WorkqError):
    """No such issue."""

    code = "NOT_FOUND"
    next_step = ("list issues with ", Step.LIST_ISSUES, " to find the right number")


class Conflict(WorkqError):
    """The operation conflicts with the current state."""

    code = "CONFLICT"


class AlreadyClaimed(Conflict):
    """The issue is claimed by someone else."""

    code = "ALREADY_CLAIMED"
    next_step = ("pick another with ", Step.READY)


class NotClaimable(Conflict):
    """The issue cannot be claimed in its current state."""

    code = "NOT_CLAIMABLE"
    next_step = ("pick another with ", Step.READY)


class NotHolder(Conflict):
    """Only the holder of the claim may do this."""

    code = "NOT_HOLDER"
    next_step = ("claim the issue first (", Step.CLAIM, "), or ask its holder to release it")


class RunIdInUse(Conflict):
    """Another live server acts under this run id (its claims are that server's)."""

    code = "RUN_ID_IN_USE"
    hint = (
        "pass another run_id (or start this server with another --run-id / WORKQ_RUN_ID), "
        "or stop the other server: its hold on the run id ends when it exits or stops renewing"
    )


class LeaseLapsed(Conflict):
    """The caller's claim lapsed (its lease ran out); it holds the issue no more."""

    code = "LEASE_LAPSED"
    next_step = (
        "claim it again with ",
        Step.CLAIM,
        " (a new fencing token, checked against reservations like any claim)",
    )


class PathsReserved(Conflict):
    """Paths this needs are reserved by another holder's live claim."""

    code = "PATHS_RESERVED"
    next_step = ("pick another with ", Step.READY, ", or wait for the holder to finish")


class StaleClaim(Conflict):
    """The claim this fencing token belongs to has ended: the issue was claimed again."""

    code = "STALE_CLAIM"
    next_step = (
        "stop working on it: its newer holder owns it now; pick other work with ",
        Step.READY,
    )


class OpenBlockers(Conflict):
    """The issue waits on issues that are not done."""

    code = "OPEN_BLOCKERS"
    next_step = ("finish those first (the claim stays yours), or give it up with ", Step.RELEASE)


class InvalidTransition(Conflict):
    """That state change is not allowed."""

    code = "INVALID_TRANSITION"


class DependencyCycle(Conflict):
    """The dependency would create a cycle."""

    code = "DEPENDENCY_CYCLE"
    hint = "remove the opposite dependency first"


class InvalidConfirmation(WorkqError):
    """The confirmation string does not match."""

    code = "INVALID_CONFIRMATION"
    next_step = ("pass ", Step.CONFIRM)


class PlanError(WorkqError):
    """Plan mode refused the operation."""

    code = "PLAN_ERROR"


class PlanModeActive(PlanError):
    """This run is in plan mode, where claiming and completing are not allowed."""

    code = "PLAN_MODE_ACTIVE"
    next_step = ("finish planning with ", Step.EXIT_PLAN, " first")


class NoActivePlan(PlanError):
    """This run is not in plan mode."""

    code = "NO_ACTIVE_PLAN"
    next_step = ("start one with ", Step.ENTER_PLAN)


class PlanEmpty(PlanError):
    """The plan file holds nothing beyond its template."""

    code = "PLAN_EMPTY"
    next_step = ("write the plan into its file, then ", Step.EXIT_PLAN, " again")


class StorageError(WorkqError):
    """The database could not be used."""

    code = "STORAGE_ERROR"
    hint = "check the database path and run 'workq doctor'"


class NoDatabase(StorageError):
    """There is no database where workq looked."""

    code = "NO_DATABASE"


class DriverMissing(StorageError):
    """The database's driver, an optional extra of workq, is not installed."""

    code = "DRIVER_MISSING"


class Busy(StorageError):
    """The database stayed locked by another writer for too long."""

    code = "DATABASE_BUSY"
    hint = "retry in a moment; nothing was changed"


class ReadOnlyStorage(StorageError):
    """The database cannot be written."""

    code = "READ_ONLY"
    hint = "check the permissions of the database file and its folder"


class StorageFull(StorageError):
    """The disk or database is full."""

    code = "STORAGE_FULL"
    hint = "free disk space; nothing was changed"


class CorruptDatabase(StorageError):
    """The database file is corrupt or not a workq database."""

    code = "CORRUPT_DATABASE"
    hint = "restore from a backup ('workq backup' makes one) or point --db elsewhere"


class ConnectionLost(StorageError):
    """The connection to the database server was lost."""

    code = "CONNECTION_LOST"
    hint = "check that the database server is running and reachable, then retry"


class SchemaMismatch(StorageError):
    """The database schema does not match this version of workq."""

    code = "SCHEMA_MISMATCH"


class GitHubError(WorkqError):
    """The GitHub API refused the request."""

    code = "GITHUB_API_ERROR"


class GitFailed(WorkqError):
    """A git command failed."""

    code = "GIT_FAILED"
    hint = "read git's message above, fix the repository state, then call again"


class GitMissing(GitFailed):
    """git is missing or too old for what was asked."""

    code = "GIT_UNAVAILABLE"
    hint = "install git 2.38 or newer and make sure it is on PATH"


class NoIssuesAvailable(WorkqError):
    """No issues match the criteria."""

    code = "NO_ISSUES_AVAILABLE"
    hint = "create one, or widen includeTypes/excludeTypes"


class AllIssuesLocked(Conflict):
    """All matching issues are locked by other sessions."""

    code = "ALL_ISSUES_LOCKED"
    next_step = ("wait for a lock to be released, or take one over with ", Step.FORCE_CLAIM)


class MergeConflict(Conflict):
    """merge would result in conflicts"""

    code = "MERGE_CONFLICT"
    hint = (
        "merge the default branch into the worktree's branch, resolve the conflicting "
        "files, commit, then merge again"
    )


class ServerBusy(WorkqError):
    """The server keeps as many waiting calls as it will."""

    code = "SERVER_BUSY"
    hint = "call again without wait_seconds, or later"


class WorkerFailed(WorkqError):
    """A worker of ``workq serve --workers`` died as it started."""

    code = "WORKER_FAILED"
    hint = "fix what the worker reported above, then start the server again"


class MergeBusy(Conflict):
    """Another merge into this repository is in progress."""

    code = "MERGE_BUSY"
    hint = "wait for it to finish (a crashed merger's lease expires), then merge again"


class UnmergedWork(Conflict):
    """The issue's worktree holds commits the default branch lacks: finishing or giving up
    the claim would leave them behind unseen."""

    code = "UNMERGED_WORK"


class WorktreeDirty(Conflict):
    """The worktree has uncommitted changes."""

    code = "WORKTREE_DIRTY"
    hint = "commit or discard them first (or remove it with force)"


# Contract E's error codes (the coding loop): its names, inside workq's error shape.
class UncommittedChanges(Conflict):
    """The checkout has uncommitted changes."""

    code = "ERR_UNCOMMITTED_CHANGES"
    hint = "commit or stash the changes first"


class BranchExists(Conflict):
    """That branch already exists."""

    code = "ERR_BRANCH_EXISTS"
    hint = "choose another name, or check out the existing branch"


class QualityGateFailed(Conflict):
    """One or more quality gates failed."""

    code = "ERR_QUALITY_GATE_FAILED"
    next_step = ("fix the issues the gates report, commit, then ", Step.RUN_GATES, " again")


class TestsFailing(Conflict):
    """The tests fail."""

    __test__ = False  # not a pytest test class
    code = "ERR_TESTS_FAILING"
    next_step = ("fix the failing tests, commit, then ", Step.RUN_GATES, " again")


class RuleViolation(Conflict):
    """The change breaks one of the workflow's rules."""

    code = "ERR_RULE_VIOLATION"
    hint = "change what the rule names, then call again"


class NothingToMerge(Conflict):
    """The branch has no commits the default branch lacks."""

    code = "NOTHING_TO_MERGE"
    hint = "commit the issue's work on its branch first"


class NothingToCommit(Conflict):
    """There is nothing to commit."""

    code = "NOTHING_TO_COMMIT"
    next_step = (
        "change something first; ",
        Step.COMMIT_PHASE,
        " commits every change of the checkout",
    )


class OnDefaultBranch(Conflict):
    """The checkout is on the default branch, not on a feature branch."""

    code = "ON_DEFAULT_BRANCH"
    next_step = ("start a branch first: ", Step.START_WORK, " or ", Step.CREATE_BRANCH)


class TaskNotFound(NotFound):
    """Task not found."""

    code = "TASK_NOT_FOUND"
    hint = "poll only the task ids this caller was given; an expired task is gone"


class TaskExpired(TaskNotFound):
    """Task has expired."""

    code = "TASK_EXPIRED"
    hint = "call the tool again"


class TaskSettled(Conflict):
    """The task was settled (cancelled or completed) meanwhile: what would have completed it
    is taken back."""

    code = "TASK_SETTLED"


def stored(error: WorkqError) -> dict[str, Any]:
    """``error`` as a JSON object, to answer it later (a task's result): ``revived``."""
    return {
        "code": error.code,
        "message": error.message,
        "facts": error.facts,
        "hint": error.hint,
    }


_REVIVED: dict[str, type[WorkqError]] = {}


def revived(data: Mapping[str, Any]) -> WorkqError:
    """The error ``stored`` kept: its code, message, facts and hint (as first rendered)."""
    code = str(data.get("code") or WorkqError.code)
    kind = _REVIVED.get(code)
    if kind is None:
        kind = _REVIVED[code] = type(f"Stored_{code}", (WorkqError,), {"code": code})
    facts = data.get("facts")
    kept = {}
    if isinstance(facts, dict):
        kept = {k: v for k, v in facts.items() if k not in ("message", "hint")}
    hint = data.get("hint")
    message = str(data.get("message") or "")
    return kind(message, hint=hint if isinstance(hint, str) else None, **kept)
