"""The issue-priority server's tools (contract B) by their own names and shapes: create_issue,
select_next_issue, release_lock, force_claim and list_backlog (advance_workflow and
get_workflow_status live in issue_workflow.py). Each result carries ``success: true``; a
refusal is ``isError`` with contract B's error object (``success: false``, ``error``,
``code``, ``reason``, ``details``) in ``_meta["workq/error"]``.

Contract B speaks of GitHub issues and lock files; here the issue is the queue's, the lock
is the queue's claim (with its lease) and the session is this server's run id. Contract B's
priority ``critical`` is workq's ``urgent``.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Literal

from mcp.types import CallToolResult
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from workq.errors import AllIssuesLocked, NoIssuesAvailable, NotHolder
from workq.schemas import Claim, Issue, IssueType, Priority, Status
from workq.server.params import Confirmation, Description, Number, Title, Types
from workq.server.registry import READ_ONLY, Registry, writes
from workq.server.results import clip, ok, worded

if TYPE_CHECKING:
    from workq.services.queue.reports import Availability

PriorityWord = Literal["critical", "high", "medium", "low"]
TypeWord = Literal["bug", "feature", "chore", "docs"]
Repository = Annotated[
    str | None,
    Field(
        max_length=140,
        description="Accepted and ignored: the queue is this server's database",
    ),
]
Notes = Annotated[str, Field(max_length=8_000)]
Criteria = Annotated[list[Annotated[str, Field(max_length=1_000)]], Field(max_length=50)]


def priority_word(priority: Priority) -> str:
    return "critical" if priority is Priority.URGENT else priority.value


def contract_labels(issue: Issue) -> list[str]:
    """Contract B's labels of an issue: ``priority:*``, ``type:*``, ``status:*``, then its own."""
    status = {"open": "backlog", "in_progress": "in-progress", "done": "done"}[issue.status]
    own = [name for name in issue.labels if not name.startswith(("priority:", "type:", "status:"))]
    return [
        f"priority:{priority_word(issue.priority)}",
        f"type:{issue.issue_type.value}",
        f"status:{status}",
        *own,
    ]


class _Camel(BaseModel):
    model_config = ConfigDict(
        frozen=True, alias_generator=to_camel, validate_by_name=True, serialize_by_alias=True
    )


class CreatedIssue(_Camel):
    number: int
    title: str
    html_url: str = Field(alias="html_url")
    labels: list[str]


class IssueCreated(_Camel):
    success: bool = True
    issue: CreatedIssue


class SelectedIssue(_Camel):
    number: int
    title: str
    html_url: str = Field(alias="html_url")
    priority: str
    type: str
    priority_score: float
    age_in_days: float


class Lock(_Camel):
    """The contract's lock, with the claim's lease and fence (as issue_claim answers them)."""

    session_id: str
    acquired_at: datetime
    expires_at: datetime
    fence: int


def _lock(claim: Claim) -> Lock:
    return Lock(
        session_id=claim.claimed_by,
        acquired_at=claim.claimed_at,
        expires_at=claim.lease_expires_at,
        fence=claim.fence,
    )


class Phase(_Camel):
    current_phase: str


class IssueSelected(_Camel):
    success: bool = True
    issue: SelectedIssue
    lock: Lock
    workflow: Phase


class Released(_Camel):
    issue_number: int
    reason: str
    duration: int = Field(description="Lock duration in seconds")


class LockReleased(_Camel):
    success: bool = True
    released: Released


class PreviousHolder(_Camel):
    session_id: str
    acquired_at: datetime | None
    pid: int | None


class Taken(_Camel):
    issue_number: int
    previous_holder: PreviousHolder | None


class ForceClaimed(_Camel):
    success: bool = True
    claimed: Taken
    lock: Lock


class BacklogEntry(_Camel):
    number: int
    title: str
    priority: str
    type: str
    priority_score: float
    age_in_days: float
    is_locked: bool
    locked_by: str | None


class BacklogListed(_Camel):
    success: bool = True
    backlog: list[BacklogEntry]
    total: int


def issue_url(number: int, mirrored: str | None) -> str:
    """The GitHub twin's URL when the issue is mirrored, else its workq resource URI."""
    return mirrored or f"workq://issues/{number}"


def _registered(repository: str | None) -> str | None:
    """A repository this queue registered, by name; None for contract B's 'owner/repo' (the
    queue is this server's database, whichever GitHub repository it names)."""
    return None if repository is None or "/" in repository else repository


def register(reg: Registry) -> None:
    _register_create(reg)
    _register_locks(reg)
    _register_backlog(reg)


def _register_create(reg: Registry) -> None:
    state = reg.state

    @reg.tool(writes(idempotent=False))
    def create_issue(
        title: Title,
        priority: PriorityWord,
        type: TypeWord,
        body: Description | None = None,
        context: Notes | None = None,
        acceptanceCriteria: Criteria | None = None,
        technicalNotes: Notes | None = None,
        repository: Annotated[
            str | None,
            Field(
                max_length=140,
                description="A registered repository's name ('owner/repo' is "
                "accepted and names no repository)",
            ),
        ] = None,
    ) -> Annotated[CallToolResult, IssueCreated]:
        """Create an issue with a priority and a type. With context,
        acceptanceCriteria or technicalNotes the body follows the template Summary /
        Context / Acceptance Criteria / Technical Notes. Labels priority:*, type:*,
        status:backlog."""
        from workq.services.queue import issues

        with worded("Could not create issue"):
            created = issues.create(
                state.queue(),
                repository=_registered(repository),
                title=title,
                description=body,
                priority=Priority.URGENT if priority == "critical" else priority,
                issue_type=type,
                actor=state.run_id,
                context=context,
                acceptance_criteria=acceptanceCriteria,
                technical_notes=technicalNotes,
            )
        labels = contract_labels(created)
        result = CreatedIssue(
            number=created.number,
            title=created.title,
            html_url=issue_url(created.number, None),
            labels=labels,
        )
        text = f"Created issue #{created.number}: {created.title} ({', '.join(labels)})"
        return ok(text, IssueCreated(issue=result))


def _register_locks(reg: Registry) -> None:
    """Selecting an issue (it is locked), releasing a lock and taking one over."""
    state = reg.state

    @reg.tool(writes(idempotent=False))
    def select_next_issue(
        includeTypes: Types | None = None,
        excludeTypes: Types | None = None,
        repository: Repository = None,
    ) -> Annotated[CallToolResult, IssueSelected]:
        """Select and lock the highest-priority ready issue in one step (no race with
        other sessions). Refused with reason no_issues or all_locked when none is left."""
        from workq.schemas import ReadyFilter
        from workq.services.queue import issues, reports
        from workq.services.sync import mirror
        from workq.services.workspaces import claiming

        q = state.queue()
        chosen = ReadyFilter(
            include_types=[IssueType(t) for t in includeTypes] if includeTypes else None,
            exclude_types=[IssueType(t) for t in excludeTypes] if excludeTypes else None,
        )
        with worded("Could not select the next issue"):
            taken = claiming.claim_next(q, state.authority(), chosen)
            if taken is None:
                counts = reports.availability(
                    q, include_types=chosen.include_types, exclude_types=chosen.exclude_types
                )
                raise _nothing_left(counts)
            state.claimed_with(taken.claimed_by)
        link = mirror.github_link(q, taken.number)
        created = issues.get(q, taken.number).created_at
        age = max((taken.claimed_at - created).total_seconds() / 86400, 0.0)
        issue = SelectedIssue(
            number=taken.number,
            title=taken.title,
            html_url=issue_url(taken.number, link.url if link else None),
            priority=priority_word(taken.priority),
            type=taken.issue_type.value,
            priority_score=round(reports.priority_score(taken.priority, age), 2),
            age_in_days=round(age, 2),
        )
        text = (
            f"Selected and locked issue #{taken.number}: {taken.title}\n"
            f"priority: {issue.priority} · type: {issue.type} · score {issue.priority_score:g}"
        )
        if taken.description:
            text += f"\n\n{taken.description}"
        return ok(
            text,
            IssueSelected(
                issue=issue,
                lock=_lock(taken),
                workflow=Phase(current_phase="selection"),
            ),
        )

    @reg.tool(writes(idempotent=False))
    def release_lock(
        issueNumber: Number,
        reason: Literal["completed", "abandoned", "merged"],
        repository: Repository = None,
    ) -> Annotated[CallToolResult, LockReleased]:
        """Release this session's lock on an issue: completed or merged marks it done,
        abandoned puts it back in the queue for others."""
        from workq.services.queue import claims, issues

        q = state.queue()
        with worded(f"Could not release issue #{issueNumber}"):
            before = issues.get(q, issueNumber)
            by = state.authority()
            try:
                if before.status == Status.DONE:
                    # A second release: contract B answers not_locked where issue_complete
                    # would answer "already done". The services judge every other case.
                    raise NotHolder(f"Issue #{issueNumber} is done")
                if reason == "abandoned":
                    claims.release(q, issueNumber, by, reason="abandoned")
                else:
                    claims.complete(q, issueNumber, by)
            except NotHolder as exc:
                holder = before.claimed_by or "nobody"
                raise NotHolder(
                    f"Issue #{issueNumber} is not locked by this session ({holder} holds it)",
                    reason="not_locked",
                ) from exc
        since = before.claimed_at or q.now()
        duration = max(0, int((q.now() - since).total_seconds()))
        released = Released(issue_number=issueNumber, reason=reason, duration=duration)
        done = "back in the queue" if reason == "abandoned" else "done"
        return ok(
            f"Released issue #{issueNumber} ({reason}, held {duration} s): {done}",
            LockReleased(released=released),
        )

    @reg.tool(writes(idempotent=False, destructive=True))
    def force_claim(
        issueNumber: Number,
        confirmation: Confirmation,
        repository: Repository = None,
    ) -> Annotated[CallToolResult, ForceClaimed]:
        """Take an issue from the session that holds it (a stuck or dead agent); its
        workflow phase is kept and a comment records the takeover."""
        from workq.services.queue import claims, issues

        q = state.queue()
        with worded(f"Could not force-claim issue #{issueNumber}"):
            before = issues.get(q, issueNumber)
            claim = claims.force_claim(
                q,
                issueNumber,
                state.authority(),
                confirmation,
                note="Issue claimed by new session (force claim)",
            )
            state.claimed_with(claim.claimed_by)
        previous = None
        if claim.previous_holder:
            previous = PreviousHolder(
                session_id=claim.previous_holder, acquired_at=before.claimed_at, pid=None
            )
        taken = Taken(issue_number=issueNumber, previous_holder=previous)
        lock = _lock(claim)
        return ok(
            f"Force-claimed issue #{issueNumber} "
            f"(previous holder: {claim.previous_holder or 'nobody'})",
            ForceClaimed(claimed=taken, lock=lock),
        )


def _register_backlog(reg: Registry) -> None:
    state = reg.state

    @reg.tool(READ_ONLY)
    def list_backlog(
        includeTypes: Types | None = None,
        excludeTypes: Types | None = None,
        limit: Annotated[int, Field(strict=True, ge=1, le=100)] = 20,
        repository: Repository = None,
    ) -> Annotated[CallToolResult, BacklogListed]:
        """Issues not done, highest priority score first, with lock status (read-only)."""
        from workq.services.queue import reports

        found = reports.backlog(
            state.queue(),
            include_types=[IssueType(t) for t in includeTypes or ()],
            exclude_types=[IssueType(t) for t in excludeTypes or ()],
            limit=limit,
        )
        entries = [
            BacklogEntry(
                number=i.number,
                title=i.title,
                priority=priority_word(i.priority),
                type=i.issue_type.value,
                priority_score=i.priority_score,
                age_in_days=i.age_in_days,
                is_locked=i.is_locked,
                locked_by=i.locked_by,
            )
            for i in found.backlog
        ]
        lines = [
            f"#{e.number} score {e.priority_score:g} {e.priority} {e.type}: {clip(e.title)}"
            + (f" (locked by {e.locked_by})" if e.locked_by else "")
            for e in entries
        ]
        if not lines:
            lines = ["The backlog is empty"]
        elif found.total > len(lines):
            lines.append(f"Showing {len(lines)} of {found.total}; raise limit to see more")
        return ok("\n".join(lines), BacklogListed(backlog=entries, total=found.total))


def _nothing_left(counts: Availability) -> NoIssuesAvailable | AllIssuesLocked:
    """Contract B's refusal when nothing could be selected, with its counts as details."""
    if counts.matching and counts.locked == counts.matching:
        return AllIssuesLocked(
            "All matching issues are currently locked",
            reason="all_locked",
            totalIssues=counts.total,
            matchingFilter=counts.matching,
            locked=counts.locked,
            blocked=counts.blocked,
        )
    message = (
        "No issues match the criteria"
        if not counts.matching
        else "No matching issue is ready (the others are blocked or locked)"
    )
    return NoIssuesAvailable(
        message,
        reason="no_issues",
        totalIssues=counts.total,
        matchingFilter=counts.matching,
        locked=counts.locked,
        blocked=counts.blocked,
    )
