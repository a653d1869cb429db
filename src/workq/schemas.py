"""Pydantic models and enums that cross layers. No database, no I/O."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.json_schema import SkipJsonSchema

# Limits, documented in the README; the transports and the services share them.
TITLE_MAX = 256
DESCRIPTION_MAX = 65_536
REASON_MAX = 2_000
COMMENT_MAX = 65_536
RUN_ID_MAX = 128
AGENT_MAX = 64
LABEL_MAX = 64
LABELS_PER_ISSUE_MAX = 32
# File reservations: a path glob, and how many an issue may declare (domain/globs.py).
GLOB_MAX = 200
GLOBS_PER_ISSUE_MAX = 32
PAGE_DEFAULT = 20
PAGE_MAX = 200
NUMBER_MAX = 2**31 - 1
FORCE_CLAIM_CONFIRMATION = "I understand this may cause conflicts"


class Status(StrEnum):
    OPEN = "open"
    IN_PROGRESS = "in_progress"
    DONE = "done"


class Priority(StrEnum):
    URGENT = "urgent"
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"

    @property
    def rank(self) -> int:
        """0 for urgent .. 3 for low: the stored value, smallest first in ready order."""
        return _PRIORITY_RANK[self]

    @classmethod
    def from_rank(cls, rank: int) -> Priority:
        return _PRIORITY_BY_RANK[rank]

    @classmethod
    def _missing_(cls, value: object) -> Priority | None:
        """``critical`` (the GitHub issue-priority server's word) is urgent; any case."""
        if isinstance(value, str):
            name = value.strip().lower()
            if name == "critical":
                return cls.URGENT
            if name != value:
                return cls(name)
        return None


_PRIORITY_RANK = {Priority.URGENT: 0, Priority.HIGH: 1, Priority.MEDIUM: 2, Priority.LOW: 3}
_PRIORITY_BY_RANK = {v: k for k, v in _PRIORITY_RANK.items()}


class IssueType(StrEnum):
    TASK = "task"
    BUG = "bug"
    FEATURE = "feature"
    CHORE = "chore"
    DOCS = "docs"


class CommentKind(StrEnum):
    NOTE = "note"
    PROGRESS = "progress"
    QUESTION = "question"
    BLOCKER = "blocker"
    RESOLUTION = "resolution"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


class IssueSummary(_Model):
    """The compact form used in lists: no description."""

    number: int
    title: str
    status: Status
    priority: Priority
    issue_type: IssueType
    agent: str
    is_blocked: bool
    claimed_by: str | None = None
    labels: list[str] = Field(default_factory=list)


class IssueListItem(IssueSummary):
    """An issue in a list: its summary, and why it is not ready when it is not."""

    blocked_reason: str | None = None  # set when blocked by hand
    waiting_on: list[int] | None = None  # the unfinished issues it waits on, if any


def _unset(value: object) -> bool:
    """Workspace fields are left out of answers while unset: a server without workspaces
    does not publish them in the tools' output schemas either (server/registry.py)."""
    return value is None


class WorkspaceInfo(_Model):
    """The git worktree an issue is worked on in (a repository's worktree per claim)."""

    worktree_id: str
    repository: str
    path: str
    branch: str


class Issue(_Model):
    """An issue in full."""

    id: str
    number: int
    title: str
    description: str
    status: Status
    priority: Priority
    issue_type: IssueType
    agent: str
    is_blocked: bool
    blocked_reason: str | None
    open_blockers: int = Field(description="How many issues this one waits on are not done yet")
    claimed_by: str | None
    claimed_at: datetime | None
    lease_expires_at: datetime | None
    created_at: datetime
    updated_at: datetime
    closed_at: datetime | None
    labels: list[str] = Field(default_factory=list)
    blocked_by: list[int] = Field(default_factory=list, description="Numbers of its blockers")
    blocks: list[int] = Field(default_factory=list, description="Numbers of issues it blocks")
    repository: str | None = Field(
        default=None, description="The repository it belongs to", exclude_if=_unset
    )
    worktree: WorkspaceInfo | None = Field(
        default=None, description="Its active worktree", exclude_if=_unset
    )
    touches: list[str] = Field(default_factory=list, description="Path globs it touches")
    stalled_since: datetime | None = Field(
        default=None, description="Claim stalled at", exclude_if=_unset
    )

    def summary(self) -> IssueSummary:
        return IssueSummary(
            number=self.number,
            title=self.title,
            status=self.status,
            priority=self.priority,
            issue_type=self.issue_type,
            agent=self.agent,
            is_blocked=self.is_blocked or self.open_blockers > 0,
            claimed_by=self.claimed_by,
            labels=self.labels,
        )

    def listed(self, waiting_on: list[int]) -> IssueListItem:
        return IssueListItem(
            **self.summary().model_dump(),
            blocked_reason=self.blocked_reason if self.is_blocked else None,
            waiting_on=waiting_on or None,
        )


# An unfinished issue that is not ready, and why (no docstring: it would cost every
# agent its bytes in issue_ready's output schema).
class NotReady(_Model):
    number: int
    title: str
    reasons: list[str]


class Reservation(_Model):
    """A live file reservation: a path glob held by a claim."""

    number: int
    holder: str
    glob: str
    mode: Literal["exclusive", "shared"]
    lease_expires_at: datetime


class Reservations(_Model):
    items: list[Reservation]


class IssuePage(_Model):
    items: list[IssueListItem]
    has_more: bool
    next_cursor: str | None = Field(default=None, description="Pass as cursor to get the next page")


class ReadyFilter(_Model):
    agent: str | None = None
    include_types: list[IssueType] | None = None
    exclude_types: list[IssueType] | None = None
    labels: list[str] | None = Field(default=None, description="Issues must carry all of these")
    repository: str | None = Field(default=None, description="Issues of this repository only")
    # Issues that belong to some repository (a claim that makes a worktree needs one).
    in_a_repository: bool = False


FENCE_DOC = "Pass as fence to complete/release/block/heartbeat: refused once stale"


class BriefGate(_Model):
    """The newest run of one gate."""

    gate: str
    passed: bool
    commit: str
    finished_at: datetime


class BriefNote(_Model):
    """One of the newest comments, cut short."""

    kind: CommentKind
    author: str | None
    body: str
    created_at: datetime


class Briefing(_Model):
    """What the claim before this one left: who held it, how and when it ended, its work
    and where that is (services/workspaces/handoff.py)."""

    previous_holder: str | None
    ended: str = Field(
        description="released, blocked, lapsed, taken_over, stall_released or forced"
    )
    ended_at: datetime
    reason: str | None = None
    commits: list[str] = Field(
        default_factory=list, description="Subjects ahead of the default branch, newest first"
    )
    commits_ahead: int = 0
    gates: list[BriefGate] = Field(default_factory=list, description="The newest run of each")
    notes: list[BriefNote] = Field(default_factory=list, description="The newest comments")
    worktree: str | None = Field(default=None, description="The issue's worktree now")
    branch: str | None = None
    edits_ref: str | None = Field(default=None, description="The saved uncommitted edits")
    edits_in_worktree: bool = Field(default=False, description="The worktree still has them")
    restore: str | None = Field(
        default=None, description="Run in the worktree: brings the saved edits back"
    )
    where: str = Field(description="Where the work is, in words")

    def lines(self, when: Callable[[datetime], str]) -> list[str]:
        """The briefing in words, a line each (the CLI's and the tools' text), its moment
        written by ``when`` (each face's own way)."""
        why = f": {self.reason}" if self.reason else ""
        said = [
            f"Previous claim by {self.previous_holder or 'someone'} "
            f"{self.ended.replace('_', ' ')} at {when(self.ended_at)}{why}"
        ]
        if self.commits_ahead:
            more = self.commits_ahead - len(self.commits)
            shown = "; ".join(self.commits) + (f"; and {more} more" if more > 0 else "")
            said.append(f"{self.commits_ahead} commit(s) ahead: {shown}")
        if self.gates:
            said.append(
                "gates: "
                + ", ".join(f"{g.gate} {'passed' if g.passed else 'failed'}" for g in self.gates)
            )
        said.extend(f"note by {n.author or 'someone'}: {n.body}" for n in self.notes)
        said.append(self.where)
        return said


class SavedWork(_Model):
    """The work a claim left that its repository's default branch lacks, as saved when the
    claim ended (handoff.save): nothing of it deleted, nothing in the worktree touched."""

    number: int
    how: str
    holder: str | None
    worktree: str
    branch: str | None
    head: str
    commits: list[str] = Field(default_factory=list, description="Subjects, newest first")
    commits_ahead: int = 0
    edits_ref: str | None = Field(default=None, description="The uncommitted edits' commit")
    files_changed: list[str] = Field(default_factory=list)


class Attempt(_Model):
    """One claim of an issue, from its history (the board's "Attempts")."""

    holder: str | None
    claimed_at: datetime
    ended: str | None = Field(default=None, description="None: still held")
    ended_at: datetime | None = None
    saved: str | None = Field(default=None, description="The work it left, in words")


class Claim(_Model):
    """A claim: what issue_claim answers, and issue_claim_next with the issue's own fields."""

    claimed: bool = Field(default=True, description="false: nothing was ready to claim")
    number: int
    title: str
    claimed_by: str
    claimed_at: datetime
    lease_expires_at: datetime
    fence: int = Field(description=FENCE_DOC)
    previous_holder: str | None = Field(
        default=None, description="Set when an expired or forced claim was taken over"
    )
    already_held: bool = Field(default=False, description="The caller already held it")
    waits_on: list[int] = Field(
        default_factory=list,
        description="Unfinished issues it now waits on: not completable until done",
    )
    worktree: WorkspaceInfo | None = Field(
        default=None, description="Made with worktree=true", exclude_if=_unset
    )
    # What the claim before, which did not complete, left (left out of the schema, as a
    # merge's landing: the answer's text says it, and every claim tool would carry it).
    briefing: SkipJsonSchema[Briefing | None] = Field(default=None, exclude_if=_unset)


class ReadyIssue(_Model):
    number: int
    title: str
    description: str
    priority: Priority
    issue_type: IssueType
    agent: str
    created_at: datetime


class ClaimedIssue(Claim):
    """The claim claim_next took, flat as issue_claim's, with what the issue asks."""

    description: str
    priority: Priority
    issue_type: IssueType
    agent: str
    # Where the issue is (its repository, whether that makes a worktree per claim), as the
    # claim's own statement read it; None when not read (then asked). Not in the answer.
    placement: SkipJsonSchema[tuple[str | None, bool] | None] = Field(default=None, exclude=True)


def _or_none(annotation: Any, metadata: list[Any]) -> Any:
    """``annotation`` or None; still left out of the schema if it was (SkipJsonSchema)."""
    skipped = [m for m in metadata if type(m).__name__ == "SkipJsonSchema"]
    wider = annotation | None
    return Annotated[(wider, *skipped)] if skipped else wider


def _as_claimed_issue(schema: dict[str, Any]) -> None:
    """Publish each field with ClaimedIssue's type (absent when nothing was claimed, never
    null unless ClaimedIssue's may be), and only ``claimed`` required."""
    for name, node in schema["properties"].items():
        annotation = ClaimedIssue.model_fields[name].annotation
        options = node.get("anyOf")
        if options and type(None) not in get_args(annotation):
            kept = [o for o in options if o != {"type": "null"}]
            node.pop("anyOf")
            node.update(kept[0] if len(kept) == 1 else {"anyOf": kept})
    schema["required"] = ["claimed"]


# issue_claim_next's answer: the claim, or only ``{"claimed": false}`` when nothing was
# ready. Its fields are ClaimedIssue's, optional so that the SDK's check of the answer
# accepts the second.
ClaimedNext = create_model(
    "ClaimedNext",
    __config__=ConfigDict(frozen=True, json_schema_extra=_as_claimed_issue),
    **{
        name: (_or_none(field.annotation, field.metadata), Field(default=None))
        for name, field in ClaimedIssue.model_fields.items()
    },  # type: ignore[call-overload]
)


NOTHING_CLAIMED: dict[str, Any] = {"claimed": False}


class Completed(_Model):
    number: int
    title: str
    already_done: bool = False
    unblocked: list[int] = Field(
        default_factory=list, description="Issues this completion made ready"
    )


class Comment(_Model):
    id: int
    number: int
    kind: CommentKind
    body: str
    author: str | None
    created_at: datetime


class Event(_Model):
    id: int
    number: int
    kind: str
    actor: str | None
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    created_at: datetime

    def change(self, limit: int | None = 120) -> str:
        """What changed, in words for people (the CLI's history, the board's):
        ``was title=a; now title=b``; empty values left out, cut to ``limit``."""
        parts = []
        for word, values in (("was", self.before), ("now", self.after)):
            said = [f"{k}={_said(v)}" for k, v in sorted((values or {}).items()) if _said(v)]
            if said:
                parts.append(f"{word} " + ", ".join(said))
        text = "; ".join(parts)
        return text if limit is None or len(text) <= limit else text[: limit - 3] + "..."


def _said(value: Any) -> str:
    if value is None or value == "" or value == [] or value == {}:
        return ""
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)


class BacklogItem(_Model):
    number: int
    title: str
    priority: Priority
    issue_type: IssueType
    priority_score: float
    age_in_days: float
    is_locked: bool
    locked_by: str | None
    is_blocked: bool


class Backlog(_Model):
    backlog: list[BacklogItem]
    total: int


class Stats(_Model):
    total: int
    by_status: dict[str, int]
    by_priority: dict[str, int]
    ready: int
    blocked: int
    claimed: int
    stale_claims: int = Field(description="Claims whose lease has expired")


class SearchHit(_Model):
    number: int
    title: str
    status: Status
    priority: Priority
    issue_type: IssueType
    snippet: str = Field(description="The best matching passage, matches in [brackets]")


class SearchPage(_Model):
    items: list[SearchHit]
    has_more: bool
    next_cursor: str | None = Field(default=None, description="Pass as cursor to get the next page")


# The board (issue 16): what its pages show, read by services/queue/overview.py.


class BoardCard(_Model):
    """An issue on a board column."""

    number: int
    title: str
    priority: Priority
    issue_type: IssueType
    agent: str
    labels: list[str] = Field(default_factory=list)
    claimed_by: str | None = None
    lease_expires_at: datetime | None = None
    phase: str | None = None
    waiting_on: list[int] = Field(default_factory=list)
    blocked_reason: str | None = None
    since: datetime | None = Field(default=None, description="Blocked or done since")
    stalled_since: datetime | None = Field(default=None, description="Its claim stalled at")


class BoardColumn(_Model):
    name: str
    count: int
    cards: list[BoardCard]
    page: int
    has_more: bool


class BoardFilter(_Model):
    agent: str | None = None
    label: str | None = None
    issue_type: IssueType | None = None


class BoardView(_Model):
    columns: list[BoardColumn]
    last_event: int = Field(description="The newest event id when the view was read")
    now: datetime


class AgentClaim(_Model):
    number: int
    title: str
    claimed_at: datetime | None
    lease_expires_at: datetime | None
    stalled_since: datetime | None = None


class BoardAgent(_Model):
    """A run id that holds claims, or a registered agent, and its last sign of life."""

    run_id: str
    claims: list[AgentClaim]
    last_heartbeat: datetime | None


class BoardChange(_Model):
    id: int
    number: int | None
    kind: str
    actor: str | None


class GraphNode(_Model):
    number: int
    title: str
    status: Status
    is_blocked: bool


# --- agent workspaces (contract D's agit) --------------------------------------------------

MERGE_MODES = ("merge", "squash")


class Repository(_Model):
    """A registered git repository (``agit_list_repos``'s item, and more)."""

    name: str
    path: str
    default_branch: str
    remote_url: str | None
    worktree_dir: str
    auto_worktree: bool = Field(description="Every claim of its issues makes a worktree")
    merge_mode: str = Field(description="merge (fast-forward when possible) or squash")
    land: str = Field(default="local", description="local, or pr (through pull requests)")
    github_repo: str | None = None
    on_refused: str = Field(default="return", description="return (to the holder) or block")
    update_branch: bool = True
    worktree_count: int = 0
    task_count: int = 0


class WorktreeInfo(_Model):
    id: str
    repository: str
    number: int | None
    path: str
    branch: str
    base_commit: str
    state: str
    agent: str | None
    disk_bytes: int | None = None


class AgentInfo(_Model):
    agent_id: str
    name: str
    type: str
    last_seen: datetime
    claims: list[int] = Field(default_factory=list, description="Issues it holds")
    worktrees: list[str] = Field(default_factory=list, description="Paths of its worktrees")
    stalled: list[int] = Field(default_factory=list, description="Of its claims, the stalled")


class FileConflict(_Model):
    file: str
    worktrees: list[str]
    issues: list[int] = Field(default_factory=list)


class ConflictReport(_Model):
    conflicts: list[FileConflict]
    scanned_worktrees: int


class RepoOverview(Repository):
    """A repository with its worktrees and the files two of them both change."""

    worktrees: list[WorktreeInfo]
    conflicts: list[FileConflict]


LandingState = Literal["queued", "open", "merging", "merged", "landed", "refused"]
LAND_MODES = ("local", "pr")
ON_REFUSED = ("return", "block")


class CheckAnnotation(_Model):
    """One annotation of a failing check run: where, how grave, what it says."""

    path: str
    start_line: int | None = None
    annotation_level: str | None = Field(default=None, description="notice, warning or failure")
    message: str


class FailedCheck(_Model):
    """A check that failed on the head a landing was refused on, with what it reported
    (each text cut to its bound)."""

    name: str
    kind: Literal["check_run", "status"]
    conclusion: str | None = None
    title: str | None = None
    summary: str | None = None
    url: str | None = None
    annotations: list[CheckAnnotation] = Field(
        default_factory=list, description="The first ones, in GitHub's order"
    )
    annotations_total: int = Field(default=0, description="How many the check run has")


class ChangesRequested(_Model):
    """A review whose author's standing verdict is "changes requested"."""

    author: str | None = None
    body: str | None = None
    commit_id: str | None = Field(default=None, description="The head it was given on")
    url: str | None = None


class ReviewComment(_Model):
    """A comment of a changes-requested review, on a line of the pull request's diff."""

    author: str | None = None
    path: str
    line: int | None = None
    body: str
    url: str | None = None


class LandingFailure(_Model):
    """What the holder needs to repair a refused landing: why, which round of how many, the
    failing checks with their output and first annotations, and the pull request's requested
    changes. What GitHub would not answer is named in ``unread``."""

    reason: str
    round: int = Field(default=0, description="Which refusal of the issue's landing this is")
    max_rounds: int = Field(default=0, description="max_landing_rounds when it was refused")
    blocked: bool = Field(default=False, description="This refusal blocked the issue")
    head_sha: str | None = None
    pr_number: int | None = None
    pr_url: str | None = None
    checks: list[FailedCheck] = Field(default_factory=list)
    more_checks: int = Field(default=0, description="Failing checks beyond those listed")
    reviews: list[ChangesRequested] = Field(default_factory=list)
    review_comments: list[ReviewComment] = Field(default_factory=list)
    unread: list[str] = Field(
        default_factory=list, description="What could not be read from GitHub, and why"
    )


class LandingStatus(_Model):
    """Where an issue's landing through a pull request stands."""

    number: int
    repository: str
    branch: str
    state: LandingState = Field(
        description="queued, open (checks running), merging, merged, landed, or refused"
    )
    detail: str | None = Field(default=None, description="What it waits for, or why refused")
    head_sha: str = Field(description="The branch tip it lands")
    pr_number: int | None = None
    pr_url: str | None = None
    merge_sha: str | None = Field(default=None, description="The commit GitHub merged it as")
    requested_by: str | None = None
    updated_at: datetime
    rounds: int = Field(default=0, description="How many times its landing was refused")
    failure: LandingFailure | None = Field(
        default=None, description="While refused: what to repair (checks, requested changes)"
    )


class MergeResult(_Model):
    merged: bool
    branch: str
    into: str
    worktree_cleaned: bool
    commit: str | None = Field(default=None, description="The default branch's new tip")
    already_merged: bool = Field(default=False, description="An earlier run had merged it")
    number: int | None = None
    note: str | None = Field(default=None, description="What the merge did not check")
    # Through a pull request: where the landing stands (left out of the schema: the
    # answer's text says it, and three merge tools would carry its schema).
    landing: SkipJsonSchema[LandingStatus | None] = Field(default=None, exclude_if=_unset)


class PruneReport(_Model):
    removed: list[WorktreeInfo]
    kept: list[WorktreeInfo] = Field(description="Dirty or still in use")


# Quality gates (services/coding/gates.py): contract E's run_quality_gates result, and the evidence.
class GateIssue(_Model):
    file: str
    line: int
    message: str


GateCause = Literal["failed", "missing_program", "no_tests", "timed_out"]


class GateResult(_Model):
    gate_number: int
    name: str
    passed: bool
    score: str
    issues: list[GateIssue] = Field(default_factory=list, description="The first ones found")
    issues_total: int = 0
    skipped: bool = Field(default=False, description="No file matched the gate's globs")
    timed_out: bool = False
    exit_code: int | None = None
    error: str | None = Field(default=None, description="Why the gate could not run")
    cause: GateCause | None = Field(default=None, description="Why it did not pass")
    output: str = Field(default="", description="The end of its output, bounded")
    output_cut_bytes: int = 0
    tests: bool = Field(default=False, description="The tests gate")


class GateTestResults(_Model):
    passed: int = 0
    failed: int = 0
    errors: list[str] = Field(default_factory=list)


class GateReport(_Model):
    overall_pass: bool
    gates: list[GateResult]
    test_results: GateTestResults | None = None
    number: int
    commit: str
    dirty: bool = Field(description="Run on uncommitted changes: not evidence for the commit")
    checkout: str
    config: str = Field(description="Where the gates were read from, a preset, or 'none'")
    from_evidence: bool = Field(
        default=False, description="Read from stored runs on this commit, not run now"
    )
    evidence: Literal["this run", "stored, passed", "stored, failed", "none"] = Field(
        default="this run",
        description="What merges and testsPassed read for the commit: this run (every "
        "gate, clean tree) or the runs stored before",
    )

    def verdict(self) -> str:
        if not self.gates:
            return "no gates"
        return "all gates pass" if self.overall_pass else "gates FAIL"

    def note(self) -> str | None:
        """With no gates configured, how to add them; for a run that is not evidence for its
        commit, what a merge will read instead."""
        if self.config == "none":
            return (
                "No gates are configured in this repository: merges check nothing. "
                "`workq gates init [--preset strict|pytest]` writes a starter table"
            )
        if self.evidence == "this run":
            return None
        what = "uncommitted changes" if self.dirty else "named files or gates"
        stored = {
            "none": "no stored runs of every gate on it yet",
            "stored, passed": "its stored runs passed",
            "stored, failed": "its stored runs failed",
        }[self.evidence]
        return (
            f"Not evidence for {self.commit[:12]} (run on {what}): a merge or testsPassed "
            f"needs every gate passed on the commit from a clean tree; {stored}"
        )


class GateSetting(_Model):
    gate_number: int
    name: str
    command: list[str]
    files: list[str]
    timeout: float
    tests: bool
    env: list[str] = Field(default_factory=list, description="Variables passed beyond the usual")


class GateConfig(_Model):
    checkout: str
    source: str
    gates: list[GateSetting]


class GateRun(_Model):
    """One stored gate run."""

    number: int
    commit: str
    dirty: bool
    full: bool
    gate: str
    gate_number: int
    tests: bool
    passed: bool
    score: str
    issues_found: int
    tests_passed: int | None = None
    tests_failed: int | None = None
    timed_out: bool = False
    exit_code: int | None = None
    started_at: datetime
    finished_at: datetime
    actor: str | None = None


# --- the coding loop's context and docs search (contract E) -----------------------------


class ActiveIssue(_Model):
    """The issue being worked on, with contract E's fields and the claim workq knows."""

    number: int
    title: str
    body: str
    acceptance_criteria: list[str] = Field(description="The body's checkbox items")
    source: Literal["branch", "claim"] = Field(description="How it was found")
    status: Status
    priority: Priority
    claimed_by: str | SkipJsonSchema[None] = Field(default=None, exclude_if=_unset)
    lease_expires_at: datetime | SkipJsonSchema[None] = Field(default=None, exclude_if=_unset)
    branch: str | SkipJsonSchema[None] = Field(default=None, exclude_if=_unset)
    worktree_path: str | SkipJsonSchema[None] = Field(default=None, exclude_if=_unset)
    # Its landing through a pull request, with the failure to repair when refused (left out
    # of the schema, as MergeResult's: the answer's text says it).
    landing: SkipJsonSchema[LandingStatus | None] = Field(default=None, exclude_if=_unset)


class InProgressIssue(_Model):
    number: int
    title: str
    priority: Priority


class NextUpIssue(_Model):
    number: int
    title: str
    labels: list[str]


class Blocker(_Model):
    number: int
    title: str
    blocked_by: str = Field(description="The block's reason, or the issues it waits on")


class PlanInProgress(_Model):
    slug: str
    goal: str
    phase: str
    path: str


class ClosedIssue(_Model):
    number: int
    title: str
    closed_at: datetime


# The fields left out of an answer while unset are typed without null in the schemas
# (SkipJsonSchema): fewer bytes in tools/list, and the same contract.
class WorkContext(_Model):
    """Contract E's ``get_work_context``: where the caller stands, from the local queue."""

    active_issue: ActiveIssue | None
    in_progress_issues: list[InProgressIssue]
    next_up_issues: list[NextUpIssue]
    blockers: list[Blocker]
    plan: PlanInProgress | SkipJsonSchema[None] = Field(default=None, exclude_if=_unset)
    closed_recent: list[ClosedIssue] | SkipJsonSchema[None] = Field(
        default=None, exclude_if=_unset, description="With include_closed_recent"
    )


class DocHit(_Model):
    file_path: str
    title: str
    snippet: str
    relevance_score: float = Field(ge=0, le=1)
    line_number: int


class DocResults(_Model):
    """Contract E's ``search_documentation`` answer (its array, as ``results``)."""

    results: list[DocHit]


# --- contract E's git steps (services/workspaces/gitflow.py) ------------------------------------


class BranchCreated(_Model):
    branch_name: str
    created_from: str = Field(description="The default branch it starts from")


class BranchLinked(_Model):
    branch_name: str
    issue_number: int
    project_status: str = Field(description="In Progress once claimed, else the status")


class IssueContext(_Model):
    number: int
    title: str
    acceptance_criteria: list[str] = Field(description="Its body's checkbox lines")


class WorkStarted(_Model):
    branch_name: str
    issue: IssueContext
    path: str = Field(description="Where to work: the worktree, or the server's checkout")
    worktree: bool = Field(description="Whether path is a worktree of its own")
    created_from: str
    resumed: bool = Field(default=False, description="The caller had started it already")


class TddCommit(_Model):
    commit_hash: str
    commit_message: str
    issue_number: int | None = None


class MergedToMain(_Model):
    merged_branch: str
    target_branch: str
    commit_hash: str
    issue_number: int
    branch_deleted: bool
    already_merged: bool = Field(
        default=False, description="Merged by an earlier call: nothing was done now"
    )
    note: str | None = Field(default=None, description="What the merge did not check")
    # Through a pull request: where the landing stands (left out of the schema: the
    # answer's text says it, and three merge tools would carry its schema).
    landing: SkipJsonSchema[LandingStatus | None] = Field(default=None, exclude_if=_unset)


# Tool calls answered later (services/tasks; the MCP Tasks extension, server/tasks.py).


class TaskStatus(StrEnum):
    """A task's status, as the Tasks extension names them."""

    WORKING = "working"
    INPUT_REQUIRED = "input_required"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL = frozenset({TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED})


class TaskView(BaseModel):
    """One task. ``answer`` (completed): the kind's answer, which the face renders as the
    tool's result: ``{"value": ...}`` for a success, ``{"refused": ...}`` for a refusal (a
    stored workq error, ``errors.revived``). ``error`` (failed): the JSON-RPC error."""

    model_config = ConfigDict(frozen=True)

    id: str
    kind: str
    status: TaskStatus
    status_message: str | None = None
    created_at: datetime
    updated_at: datetime
    ttl_ms: int | None
    poll_interval_ms: int
    answer: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    number: int | None = None
    fence: int | None = None
