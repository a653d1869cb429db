"""Workflow phases of claimed issues (contract B's ``advance_workflow`` and
``get_workflow_status``).

A claimed issue starts at ``selection`` and moves by the rules of
``domain.workflow.check_transition``; only the claim's holder may move it. Entering
``branch`` (or any later phase) records the branch name ``{number}-{kebab-case-title}``;
entering ``pr`` records a pull request title and body (given, or contract B's defaults).
Creating branches and pull requests is not done here.

Each change is an event of kind ``workflow_advanced`` (before and after phase, what was
recorded), and the phase history is read back from those events. A workflow belongs to a
claim: once the claim ends (``completed``, ``released`` or ``blocked`` after the last phase
change) the stored state is stale and the next holder starts again at selection. A takeover
(an expired lease, ``force_claim``) keeps the phase, as contract B's force claim does.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, insert, select, update

from workq.db.engine import retry_lost_read
from workq.db.tables import events, issues, workflows
from workq.domain import fields
from workq.domain.authority import Authority
from workq.domain.decisions import Action
from workq.domain.workflow import (
    TransitionCheck,
    WorkflowPhase,
    at_or_after,
    branch_name,
    check_transition,
)
from workq.errors import (
    InvalidInput,
    LeaseLapsed,
    NotClaimable,
    NotHolder,
    PlanModeActive,
    Step,
    WorkqError,
)
from workq.plan_schemas import PhaseChange, WorkflowChange, WorkflowStatus
from workq.schemas import PAGE_MAX, TITLE_MAX, Status
from workq.services.coding import gates
from workq.services.handle import Queue, load, record
from workq.services.queue import door, predicates
from workq.services.sync import pulls

__all__ = [
    "ENDING_KINDS",
    "EVENT_KIND",
    "PhaseChange",
    "WorkflowChange",
    "WorkflowStatus",
    "advance",
    "status",
]

EVENT_KIND = "workflow_advanced"
# Events that end a claim, and with it the claim's workflow.
ENDING_KINDS = ("completed", "released", "blocked")
IN_PROGRESS = Status.IN_PROGRESS.value
SELECTION = WorkflowPhase.SELECTION


# --- reading -------------------------------------------------------------------------------


def _history(conn: Connection, number: int) -> tuple[list[PhaseChange], bool]:
    """The phase changes of the current claim's workflow, and whether it is live (its last
    change came after the last end of a claim)."""
    rows = conn.execute(
        select(events.c.kind, events.c.before, events.c.after, events.c.created_at)
        .where(events.c.number == number, events.c.kind.in_([EVENT_KIND, *ENDING_KINDS]))
        .order_by(events.c.id)
    )
    history: list[PhaseChange] = []
    live = False
    for row in rows:
        if row.kind != EVENT_KIND:
            history, live = [], False
            continue
        before, after = json.loads(row.before or "{}"), json.loads(row.after or "{}")
        history.append(
            PhaseChange.model_validate(
                {"from": before["phase"], "to": after["phase"], "timestamp": row.created_at}
            )
        )
        live = True
    return history, live


def _state(conn: Connection, issue: Any) -> tuple[Any, list[PhaseChange]]:
    """The issue's live workflow row (None before its first change) and its history."""
    history, live = _history(conn, issue.number)
    row = conn.execute(select(workflows).where(workflows.c.issue_id == issue.id)).first()
    return (row if live else None), (history if live else [])


def _claimed(q: Queue, conn: Connection, issue: Any, by: Authority | None, *, read: bool) -> None:
    """The door's word on ``by`` moving ``issue``'s workflow (``step``), in contract B's
    words: NOT_HOLDER, reason ``not_locked``. ``read``: only who holds it counts (a
    lapsed lease or a plan does not hide a workflow from its holder). ``by`` None: any
    claimed issue may be read."""
    if issue.status != IN_PROGRESS or issue.claimed_by is None:
        raise NotHolder(
            f"Issue #{issue.number} is not locked by this session: it is not claimed",
            hint=("claim it first (", Step.CLAIM, "); a workflow belongs to a claim"),
            number=issue.number,
            reason="not_locked",
        )
    if by is None:
        return
    try:
        door.check(q, conn, issue, Action.STEP, by)
    except (LeaseLapsed, PlanModeActive):
        if not read:
            raise
    except (NotHolder, NotClaimable) as exc:
        raise _not_locked(issue, exc) from None


def _not_locked(issue: Any, exc: WorkqError) -> NotHolder:
    return NotHolder(
        f"Issue #{issue.number} is not locked by this session: {issue.claimed_by} holds it",
        hint="only the claim's holder may advance its workflow",
        number=issue.number,
        holder=issue.claimed_by,
        reason="not_locked",
        refused=exc.message,
    )


def _held_issue(
    q: Queue, conn: Connection, number: int | None, by: Authority, *, lock: bool = True
) -> Any:
    if number is not None:
        issue = load(conn, fields.number(number, "issueNumber"), for_update=lock)
        _claimed(q, conn, issue, by, read=not lock)
        return issue
    now = q.now()
    rows = list(
        conn.execute(
            select(issues.c.number, issues.c.status, issues.c.lease_expires_at)
            .where(predicates.held_by(sorted(by.run_ids), now))  # a lapsed claim is not held
            .order_by(issues.c.number)
            .limit(10)
        ).all()
    )
    if not rows:
        raise NotHolder(
            "No issue is locked by this session",
            hint=("claim one first (", Step.CLAIM_NEXT, "), or give ", Step.NAME_ISSUE),
            reason="not_locked",
        )
    if len(rows) > 1:
        held = ", ".join(f"#{r.number}" for r in rows)
        raise InvalidInput(
            f"this session holds several issues ({held}); say which with issueNumber",
            field="issueNumber",
        )
    issue = load(conn, rows[0].number, for_update=lock)
    _claimed(q, conn, issue, by, read=not lock)
    return issue


def _status(conn: Connection, issue: Any, now: datetime) -> WorkflowStatus:
    row, history = _state(conn, issue)
    acquired = issue.claimed_at or now
    pull = pulls.of_issue_conn(conn, issue.id)
    return WorkflowStatus(
        issue_number=issue.number,
        title=issue.title,
        current_phase=WorkflowPhase(row.phase) if row else SELECTION,
        branch_name=row.branch_name if row else None,
        tests_passed=row.tests_passed if row else None,
        skip_justification=row.skip_justification if row else None,
        pr_number=pull.pr_number if pull else (row.pr_number if row else None),
        pr_title=row.pr_title if row else None,
        pr_url=pull.url if pull else None,
        lock_holder=issue.claimed_by,
        lock_acquired_at=acquired,
        lock_duration=max(0, int((now - acquired).total_seconds())),
        phase_history=history,
    )


@retry_lost_read
def status(
    q: Queue,
    number: int | None = None,
    by: Authority | None = None,
    *,
    limit: int = PAGE_MAX,
) -> list[WorkflowStatus]:
    """The workflow of issue ``number``, or of every claimed issue (by number, at most
    ``limit``). With ``by``, only its live claims: another holder's issue is refused.

    Raises:
        NotFound: no issue ``number``.
        NotHolder: ``number`` is not claimed (or, with ``by``, not by it).
    """
    if not 1 <= limit <= PAGE_MAX:
        raise InvalidInput(f"limit must be between 1 and {PAGE_MAX}", field="limit")
    with q.db.read() as conn:
        now = q.now()
        if number is not None:
            issue = load(conn, fields.number(number, "issueNumber"))
            _claimed(q, conn, issue, by, read=True)
            return [_status(conn, issue, now)]
        stmt = (
            select(issues)
            .where(issues.c.status == IN_PROGRESS, issues.c.claimed_by.is_not(None))
            .order_by(issues.c.number)
            .limit(limit)
        )
        if by is not None:
            if not by.run_ids:
                return []
            stmt = stmt.where(predicates.held_by(sorted(by.run_ids), now))
        found = conn.execute(stmt).all()
        return [_status(conn, issue, now) for issue in found]


# --- advancing -----------------------------------------------------------------------------


def _gates_evidence(
    q: Queue,
    number: int | None,
    by: Authority,
    target: WorkflowPhase | str,
    skip_justification: str | None,
    here: Path | None,
) -> dict[str, Any]:
    """Check the quality gates when this move would take testsPassed=true into commit; what
    the workflow event records of them (empty when the move does not cross into commit).
    Runs outside any transaction: gates take time."""
    with q.db.read() as conn:
        issue = _held_issue(q, conn, number, by, lock=False)
        row, _ = _state(conn, issue)
    current = WorkflowPhase(row.phase) if row else SELECTION
    check = check_transition(
        current, target, tests_passed=True, skip_justification=skip_justification
    )
    if check.tests_gate != "passed":
        return {}
    where = gates.checkout_for(q, issue.number, here)
    report = gates.check_work(q, issue.number, where, by=by, actor=issue.claimed_by)
    return {
        "commit": report.commit,
        "dirty": report.dirty,
        "evidence": "stored" if report.from_evidence else "ran",
    }


def _default_pr_title(issue: Any) -> str:
    """Contract B's ``{type}: {title} (#{number})``, the title cut to fit."""
    head, tail = f"{issue.issue_type}: ", f" (#{issue.number})"
    room = TITLE_MAX - len(head) - len(tail)
    title = issue.title if len(issue.title) <= room else issue.title[: room - 1] + "…"
    return f"{head}{title}{tail}"


def _default_pr_body(issue: Any, tests: bool | None, justification: str | None) -> str:
    if tests is True:
        evidence = "Tests passed."
    elif justification:
        evidence = f"Tests not run: {justification}"
    else:
        evidence = "No test result recorded."
    return (
        f"## Summary\n{issue.title}\n\n## Test Evidence\n{evidence}\n\n"
        f"## Issue Reference\nCloses #{issue.number}\n"
    )


def advance(
    q: Queue,
    number: int | None,
    by: Authority,
    target: WorkflowPhase | str,
    *,
    tests_passed: bool | None = None,
    skip_justification: str | None = None,
    pr_title: str | None = None,
    pr_body: str | None = None,
    here: Path | None = None,
) -> WorkflowChange:
    """Move the workflow of issue ``number`` (default: the one issue ``by`` holds) to
    ``target``, by contract B's matrix. Only the holder of its live claim may (the door,
    ``step``), asked in the transaction that moves it. ``pr_title``/``pr_body`` are
    recorded when given; entering ``pr`` without them records contract B's defaults.

    The tests gate: with ``q.tests_gate`` "evidence", ``tests_passed=True`` into commit is
    taken only when the quality gates passed on the issue's checkout (its worktree, its
    repository, else the git work tree ``here``, the caller's directory); see
    ``gates.check_work``. A skip justification is taken as contract B says.

    Raises:
        NotHolder: ``by`` does not hold the issue (reason ``not_locked``).
        LeaseLapsed, PlanModeActive: the door's other refusals.
        InvalidTransition: the matrix refuses the move (reason ``invalid_transition`` or
            ``tests_required``).
        InvalidInput: bad arguments, or ``number`` omitted while holding several issues.
        NotFound: no issue ``number``.
        QualityGateFailed, TestsFailing: the tests gate refused ``tests_passed=True``
            (nothing changed but the stored gate runs).
    """
    if not by.run_ids and by.override is None:
        raise NotHolder("No issue is locked by this session", reason="not_locked")
    title = fields.title(pr_title) if pr_title is not None else None
    body = fields.description(pr_body) if pr_body is not None else None
    shown: dict[str, Any] = {}
    if tests_passed is True and q.tests_gate == gates.EVIDENCE:
        shown = _gates_evidence(q, number, by, target, skip_justification, here)

    def work(conn: Connection) -> WorkflowChange:
        issue = _held_issue(q, conn, number, by)
        row, _ = _state(conn, issue)
        current = WorkflowPhase(row.phase) if row else SELECTION
        check = check_transition(
            current, target, tests_passed=tests_passed, skip_justification=skip_justification
        )
        dst = check.current
        branch = row.branch_name if row else None
        if branch is None and at_or_after(dst, WorkflowPhase.BRANCH):
            branch = branch_name(issue.number, issue.title)
        tests = check.tests_passed
        if tests is None and row is not None:
            tests = row.tests_passed
        justification = check.justification or (row.skip_justification if row else None)
        new_title = title or (row.pr_title if row else None)
        new_body = body or (row.pr_body if row else None)
        if at_or_after(dst, WorkflowPhase.PR):
            new_title = new_title or _default_pr_title(issue)
            new_body = new_body or _default_pr_body(issue, tests, justification)
        now = q.now()
        values: dict[str, Any] = {
            "phase": dst.value,
            "branch_name": branch,
            "tests_passed": tests,
            "skip_justification": justification,
            "pr_title": new_title,
            "pr_body": new_body,
            "updated_at": now,
        }
        _store(conn, issue, row, values, now)
        record(
            q,
            conn,
            kind=EVENT_KIND,
            issue_id=issue.id,
            number=issue.number,
            actor=issue.claimed_by,
            now=now,
            before={"phase": current.value},
            after=_recorded(check, row, branch, new_title, shown),
        )
        return WorkflowChange(
            issue_number=issue.number,
            previous_phase=current,
            current_phase=dst,
            branch_name=branch,
            tests_passed=tests,
            skipped=list(check.skipped),
            skip_justification=check.justification,
            tests_gate=check.tests_gate,
            pr_number=row.pr_number if row else None,
            pr_title=new_title,
        )

    return q.db.write(work)


def _store(conn: Connection, issue: Any, row: Any, values: dict[str, Any], now: datetime) -> None:
    """Write the workflow row of ``issue``; ``row`` None (no live workflow) starts it afresh."""
    exists = conn.execute(
        select(workflows.c.issue_id).where(workflows.c.issue_id == issue.id)
    ).first()
    if row is None:  # a first change for this claim: start afresh
        values = {**values, "pr_number": None, "started_by": issue.claimed_by, "started_at": now}
    if exists is None:
        conn.execute(insert(workflows).values(issue_id=issue.id, **values))
    else:
        conn.execute(update(workflows).where(workflows.c.issue_id == issue.id).values(values))


def _recorded(
    check: TransitionCheck,
    row: Any,
    branch: str | None,
    title: str | None,
    gates_shown: dict[str, Any],
) -> dict[str, Any]:
    """What the workflow event records of a move: the phase reached, what changed, how the
    tests gate judged it."""
    recorded: dict[str, Any] = {"phase": check.current.value}
    if branch and (row is None or row.branch_name != branch):
        recorded["branch_name"] = branch
    if check.tests_passed is not None:
        recorded["tests_passed"] = check.tests_passed
    if check.justification:
        recorded["skip_justification"] = check.justification
    if check.skipped:
        recorded["skipped"] = [p.value for p in check.skipped]
    if check.tests_gate:
        recorded["tests_gate"] = check.tests_gate
    if check.tests_gate == "passed" and gates_shown:
        recorded["gates"] = gates_shown
    if title and (row is None or row.pr_title != title):
        recorded["pr_title"] = title
    return recorded
