"""Contract E's ``get_work_context``: where the caller stands, in one compact answer.

Everything comes from the local queue (and the checkout's branch name): the active issue,
the caller's claims, the next ready issues in claim order, what is blocked and why, the
caller's plan, and with ``include_closed_recent`` what was completed in the last 7 days.
Each list is bounded and read from an index, so the answer costs the same at any queue size.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Literal

from sqlalchemy import Connection, select

from workq.db.engine import retry_lost_read
from workq.db.tables import issues
from workq.db.tables import labels as labels_t
from workq.domain import branches, dates
from workq.domain import landing_failures as failures
from workq.domain.authority import Authority
from workq.domain.checklists import checkbox_items
from workq.errors import GitFailed, NotFound
from workq.schemas import (
    ActiveIssue,
    Blocker,
    BoardCard,
    ClosedIssue,
    InProgressIssue,
    LandingStatus,
    NextUpIssue,
    PlanInProgress,
    Priority,
    Status,
    WorkContext,
)
from workq.services.handle import Queue, load
from workq.services.plans import plan_mode
from workq.services.queue import overview, predicates, ready_queue
from workq.services.workspaces import landings, worktrees
from workq.vcs import git

NEXT_UP = 5
LISTED = 10  # in-progress issues, blockers, recently closed
RECENT = timedelta(days=7)


def checkout_branch(checkout: Path | None) -> str | None:
    """The branch checked out at ``checkout``, or None (detached, not a repository, no git)."""
    if checkout is None:
        return None
    try:
        return git.current_branch(checkout)
    except GitFailed:  # GitMissing too
        return None


def gather(
    q: Queue,
    *,
    by: Authority,
    branch: str | None = None,
    include_closed_recent: bool = False,
) -> WorkContext:
    """The work context of the caller ``by``: its live claims under any of its run ids,
    what is ready for the run id it claims under and that run's plan, with the active
    issue taken from ``branch`` when it names one of the queue's issues."""
    run_id = by.acts_as
    ready = ready_queue.ready(q, limit=NEXT_UP, holder=run_id or "")
    plan = plan_mode.active_plan(q, run_id) if run_id else None
    found = _read(q, by, branch, [r.number for r in ready], include_closed_recent)
    active, mine, labels, blocked, closed = found
    return WorkContext(
        active_issue=active,
        in_progress_issues=mine,
        next_up_issues=[
            NextUpIssue(number=r.number, title=r.title, labels=labels.get(r.number, []))
            for r in ready
        ],
        blockers=blocked,
        plan=(
            PlanInProgress(slug=plan.slug, goal=plan.goal, phase=plan.phase.value, path=plan.path)
            if plan
            else None
        ),
        closed_recent=closed,
    )


_Found = tuple[
    ActiveIssue | None,
    list[InProgressIssue],
    dict[int, list[str]],
    list[Blocker],
    list[ClosedIssue] | None,
]


@retry_lost_read
def _read(
    q: Queue,
    by: Authority,
    branch: str | None,
    next_up: list[int],
    include_closed_recent: bool,
) -> _Found:
    now = q.now()
    with q.db.read() as conn:
        # By the claimant's index alone: every end of a claim clears claimed_by, and a
        # status condition would lead SQLite to the status index instead. A lapsed claim
        # is not held (another caller may claim it now).
        columns = (issues.c.title, issues.c.priority, issues.c.status, issues.c.lease_expires_at)
        mine = list(
            conn.execute(
                select(issues.c.number, *columns)
                .where(predicates.held_by(sorted(by.run_ids), now))
                .order_by(issues.c.claimed_at.desc(), issues.c.number)
                .limit(LISTED)
            )
        )
        active = _active(conn, branch, mine[0].number if mine else None)
        labels: dict[int, list[str]] = {}
        if next_up:
            for number, name in conn.execute(
                select(issues.c.number, labels_t.c.name)
                .join(labels_t, labels_t.c.issue_id == issues.c.id)
                .where(issues.c.number.in_(next_up))
                .order_by(labels_t.c.name)
            ):
                labels.setdefault(number, []).append(name)
        cards = [
            *overview.first_cards(conn, "blocked", now, LISTED),
            *overview.first_cards(conn, "waiting", now, LISTED),
        ]
        closed = None
        if include_closed_recent:
            closed = [
                ClosedIssue(number=c.number, title=c.title, closed_at=c.since)
                for c in overview.first_cards(conn, "done", now, LISTED)
                if c.since is not None and c.since >= now - RECENT
            ]
    first = active.number if active else None
    # Both lists are in claim order; merged by priority (a stable sort keeps that order).
    cards.sort(key=lambda c: (c.number != first, c.priority.rank))
    return (
        active,
        [
            InProgressIssue(number=r.number, title=r.title, priority=Priority.from_rank(r.priority))
            for r in mine
        ],
        labels,
        [_blocker(c) for c in cards[:LISTED]],
        closed,
    )


def _active(conn: Connection, branch: str | None, claimed: int | None) -> ActiveIssue | None:
    """The issue the branch names (if the queue has it), else the caller's newest claim."""
    named = branches.issue_number(branch) if branch else None
    candidates: tuple[tuple[int | None, Literal["branch", "claim"]], ...] = (
        (named, "branch"),
        (claimed, "claim"),
    )
    for number, source in candidates:
        if number is None:
            continue
        try:
            row = load(conn, number)
        except NotFound:
            continue
        tree = worktrees.of_issue(conn, number)
        live = row.status == Status.IN_PROGRESS.value
        return ActiveIssue(
            number=row.number,
            title=row.title,
            body=row.description,
            acceptance_criteria=checkbox_items(row.description),
            source=source,
            status=Status(row.status),
            priority=Priority.from_rank(row.priority),
            claimed_by=row.claimed_by if live else None,
            lease_expires_at=row.lease_expires_at if live else None,
            branch=branch if source == "branch" else (tree.branch if tree else None),
            worktree_path=tree.path if tree else None,
            landing=landings.status_in(conn, number),
        )
    return None


def _blocker(card: BoardCard) -> Blocker:
    if card.blocked_reason is not None:
        reason = card.blocked_reason
    elif card.waiting_on:
        reason = "waiting on " + ", ".join(f"#{n}" for n in card.waiting_on)
    else:  # a count that drifted from the graph (workq doctor --repair recounts)
        reason = "waiting on unfinished issues"
    return Blocker(number=card.number, title=card.title, blocked_by=reason)


def text(found: WorkContext) -> str:
    """The context as an agent or a person reads it (both faces print this)."""
    lines: list[str] = []
    a = found.active_issue
    if a is None:
        lines.append("Active issue: none (no issue branch checked out, no claim held)")
    else:
        where = f"branch {a.branch}" if a.source == "branch" and a.branch else "your claim"
        lines.append(f"Active issue #{a.number}: {a.title} (from {where})")
        facts = [f"status: {a.status.value}", f"priority: {a.priority.value}"]
        if a.claimed_by:
            until = dates.stamp(a.lease_expires_at) if a.lease_expires_at else "-"
            facts.append(f"claimed by {a.claimed_by} until {until}")
        if a.worktree_path:
            facts.append(f"worktree {a.worktree_path} ({a.branch})")
        lines.append(" · ".join(facts))
        if a.acceptance_criteria:
            lines.append("Acceptance criteria:")
            lines.extend(f"- {c}" for c in a.acceptance_criteria)
        if a.landing is not None:
            lines += _landing(a.landing)
        if a.body:
            lines += ["", a.body.rstrip(), ""]
    _section(
        lines,
        "In progress",
        [_line(i.number, i.title, i.priority.value) for i in found.in_progress_issues],
    )
    _section(
        lines,
        "Next up",
        [_line(i.number, i.title, ", ".join(i.labels)) for i in found.next_up_issues],
    )
    _section(lines, "Blockers", [f"#{b.number} {b.title}: {b.blocked_by}" for b in found.blockers])
    if found.plan:
        p = found.plan
        lines.append(f"Plan in progress: {p.slug} ({p.phase}): {p.goal}")
    if found.closed_recent is not None:
        _section(
            lines,
            "Closed in the last 7 days",
            [f"#{c.number} {c.title} ({dates.day(c.closed_at)})" for c in found.closed_recent],
        )
    return "\n".join(lines)


def _landing(found: LandingStatus) -> list[str]:
    """Where the active issue's landing stands; refused, what to repair."""
    pull = f" · pull request #{found.pr_number}" if found.pr_number else ""
    rounds = f" · refused {found.rounds} times so far" if found.rounds else ""
    detail = f": {found.detail}" if found.detail and found.failure is None else ""
    lines = [f"Landing: {found.state}{pull}{rounds}{detail}"]
    if found.failure is not None:
        lines += ["", failures.comment(found.failure), ""]
    return lines


def _line(number: int, title: str, note: str) -> str:
    return f"#{number} {title}" + (f" ({note})" if note else "")


def _section(lines: list[str], name: str, items: list[str]) -> None:
    if not items:
        lines.append(f"{name}: none")
        return
    lines.append(f"{name}:")
    lines.extend(f"- {item}" for item in items)
