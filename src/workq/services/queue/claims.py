"""The claim lifecycle: claim, claim_next, heartbeat, complete, release, force. Who may
act on a claim (the holder, its fence, an override) is the door's (door.py, asking
domain/decisions.py).

What is ready lives in ready_queue.py, PostgreSQL's one-statement claim_next in
claim_statement.py, block and unblock in blocking.py.

Every claim is a compare-and-set inside one write transaction (BEGIN IMMEDIATE on SQLite,
row locks with SKIP LOCKED on PostgreSQL), so exactly one of N racing claimers wins.
Statements are built once at import; only their parameters change per call.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection
from datetime import datetime
from typing import Any, NamedTuple, TypeVar

from sqlalchemy import Connection, bindparam, or_, select, update

from workq.db.engine import retry_lost_read
from workq.db.prepared import Prepared
from workq.db.tables import IssueRecord, issues
from workq.domain import decisions, fields, readiness
from workq.domain.authority import Authority
from workq.domain.decisions import Action
from workq.errors import (
    AlreadyClaimed,
    InvalidConfirmation,
    NotFound,
    NotHolder,
    OpenBlockers,
)
from workq.nowait import before_waiting
from workq.schemas import (
    FORCE_CLAIM_CONFIRMATION,
    Claim,
    ClaimedIssue,
    CommentKind,
    Completed,
    Issue,
    ReadyFilter,
    Status,
)
from workq.services.handle import Queue, claim_ended, load, record, to_issue
from workq.services.queue import (
    blockers,
    claim_statement,
    door,
    notes,
    predicates,
    ready_queue,
    reservations,
)

OPEN, IN_PROGRESS, DONE = Status.OPEN.value, Status.IN_PROGRESS.value, Status.DONE.value
T = TypeVar("T")


_take = Prepared(
    update(issues)
    .where(
        issues.c.id == bindparam("issue_id"),
        or_(issues.c.claimed_by.is_(None), issues.c.claimed_by == bindparam("previous")),
    )
    .values(
        status=IN_PROGRESS,
        claimed_by=bindparam("run_id"),
        claimed_at=bindparam("now"),
        lease_expires_at=bindparam("until"),
        updated_at=bindparam("now"),
        fence=issues.c.fence + 1,
    )
)


class _Taken(NamedTuple):
    """A claim just taken, as its transaction wrote it: the model is built after COMMIT
    (``claim_of``), so that the write lock is not held while pydantic works."""

    number: int
    title: str
    claimed_by: str
    claimed_at: datetime
    lease_expires_at: datetime
    fence: int
    previous_holder: str | None

    def claim(self) -> Claim:
        return Claim(**self._asdict())


def _claim_row(
    q: Queue,
    conn: Connection,
    row: ready_queue.ReadyRow | IssueRecord,
    run_id: str,
    now: datetime,
    *,
    kind: str = "claimed",
    recorded: dict[str, Any] | None = None,
) -> _Taken | None:
    """Compare-and-set the claim on ``row``; None if someone else got there first.
    ``recorded``: what the event records of an override (who forced it, and why)."""
    until = q.lease_until(now)
    previous = row.claimed_by
    taken = _take.count(
        conn,
        {"issue_id": row.id, "previous": previous, "run_id": run_id, "now": now, "until": until},
    )
    if taken != 1:
        return None
    if previous is not None and kind == "claimed":
        kind = "claim_takeover"
    record(
        q,
        conn,
        kind=kind,
        issue_id=row.id,
        number=row.number,
        actor=run_id,
        now=now,
        before={"claimed_by": previous, "status": row.status} if previous else None,
        after={"claimed_by": run_id, "lease_expires_at": until, **(recorded or {})},
    )
    # The row is locked by this transaction: its fence is the one read, plus this claim's.
    return _Taken(row.number, row.title, run_id, now, until, row.fence + 1, previous)


def claim(q: Queue, number: int, by: Authority) -> Claim:
    """Claim issue ``number`` under ``by``'s run id; again by the same run renews the lease.
    Refused (domain/decisions.py, ``claim``) while another caller's claim is live, while
    the issue is done, blocked or waits on unfinished issues, and while one of ``by``'s
    run ids is in plan mode."""
    fields.number(number)
    run_id = claimer(by)

    def work(conn: Connection) -> Claim | _Taken:
        row = load(conn, number, for_update=True)
        now = q.now()
        paths = reservations.Gate(q, conn, now, writes=True)
        if row.claimed_by == run_id and row.status == IN_PROGRESS:
            # The holder's own claim stays its own, whatever it has come to wait on; once
            # its lease has lapsed, under a new fencing token (the caller may be a restart)
            # and only if no one reserved its paths meanwhile, as for any claim.
            door.refuse_planning(conn, by, Action.CLAIM)
            lapsed = readiness.claim_lapsed(row, now)
            if lapsed:
                paths.refuse(number, paths.blocking(row.id, True, run_id))
            return _renewal(q, conn, row, run_id, now, refence=lapsed)
        door.check(q, conn, row, Action.CLAIM, by)
        paths.refuse(number, paths.blocking(row.id, True, run_id))
        taken = _claim_row(q, conn, row, run_id, now)
        if taken is None:  # pragma: no cover - the row lock makes this unreachable
            raise AlreadyClaimed(f"Issue #{number} was claimed by someone else", number=number)
        return taken

    done = q.db.write(work)
    if not isinstance(done, _Taken):
        return done
    taken = done.claim()
    _took_over(q, taken)
    return taken


def _took_over(q: Queue, taken: Claim, how: str = "taken_over") -> None:
    """After a claim that took another holder's (a lapsed lease, or forced) committed: that
    holder's claim ended (the ``ended`` hooks: its work is saved)."""
    if taken.previous_holder is not None and not taken.already_held:
        claim_ended(q, taken.number, how, taken.previous_holder)


def claimer(by: Authority) -> str:
    """The run id ``by`` claims under.

    Raises:
        NotHolder: ``by`` names none (the board, an override without a run id).
        InvalidInput: it is not a valid run id.
    """
    if by.acts_as is None:
        raise NotHolder(
            "a claim is made under a run id, and none was given",
            hint="name the run id to claim under (--run-id, or run_id=...)",
        )
    return fields.run_id(by.acts_as)


def _renewal(
    q: Queue, conn: Connection, row: Any, holder: str, now: datetime, *, refence: bool = False
) -> Claim:
    """Renew ``holder``'s own claim on ``row``: a new lease, the same claim (no event, and
    ``claimed_at`` kept), with what it now waits on. ``refence``: under a new fencing token
    (its lease had lapsed: whoever held the old one must not act on it any more)."""
    until = q.lease_until(now)
    renew = _renew_refenced if refence else _renew
    renew.count(conn, {"issue_id": row.id, "holder": holder, "until": until})
    return Claim(
        number=row.number,
        title=row.title,
        claimed_by=holder,
        claimed_at=row.claimed_at or now,
        lease_expires_at=until,
        fence=row.fence + 1 if refence else row.fence,
        already_held=True,
        waits_on=blockers.waits_on(conn, row),
    )


def clear_claim(
    conn: Connection, issue_id: str, *, now: datetime, status: str = OPEN, **changes: Any
) -> None:
    """Drop an issue's claim (and lease), putting it in ``status``, with ``changes`` too;
    the claim's explicit reservations go with it."""
    reservations.clear(conn, issue_id)
    conn.execute(
        update(issues)
        .where(issues.c.id == issue_id)
        .values(
            status=status,
            claimed_by=None,
            claimed_at=None,
            lease_expires_at=None,
            updated_at=now,
            **changes,
        )
    )


# Called inside claim_next's transaction with the claim it made, before it commits (a room
# above the queue that must receive the claim in the same transaction: a task, see
# services/tasks). It may raise to take the claim back: the whole transaction rolls back.
Received = Callable[[Connection, ClaimedIssue], None]


def claim_next(
    q: Queue,
    by: Authority,
    f: ReadyFilter | None = None,
    *,
    then: Received | None = None,
) -> ClaimedIssue | None:
    """Ready and claim in one transaction, under ``by``'s run id. None when nothing is
    ready (a normal result). The claim comes with the issue it took, as ``ready`` shows it.
    ``then``: called with the claim inside its transaction (see ``Received``).

    Refused (PlanModeActive) while one of ``by``'s run ids is in plan mode, unless ``by``
    overrides (an admin's ``--ignore-plan-mode``)."""
    run_id = claimer(by)
    gate = () if by.override is not None else sorted(door.planners(by))

    if q.db.dialect == "postgresql" and then is None and claim_statement.chainable(q):
        claimed = claim_statement.claim_next_alone(q, by, run_id, f, gate)
        if claimed is not None:
            _took_over(q, claimed)  # the one statement's takeover: after its commit too
            return claimed
        if not _touching_ready(q, f):
            return None
        # The one statement leaves issues that declare paths alone: claim with the checks.

    # The plan gate inside the scan (one statement less); asked alone when the scan finds
    # nothing (to tell which), or first when there are more run ids than the gate holds.
    closed = door.gate_params(gate) if gate else None

    def work(conn: Connection) -> ClaimedIssue | tuple[ready_queue.ReadyRow, _Taken] | None:
        now = q.now()
        if closed is None:  # (an override's asks nothing)
            door.refuse_planning(conn, by, Action.CLAIM)
        while True:
            rows = ready_queue.claimable_rows(q, conn, f, 1, now, run_id, lock=True, gate=closed)
            if not rows:
                if closed is not None:
                    door.refuse_planning(conn, by, Action.CLAIM)
                return None
            found = _claim_first(q, conn, rows[0], run_id, now, then)
            if found is not None:
                return found

    done = q.db.write(work)
    if isinstance(done, tuple):  # built after COMMIT: the write lock is not held for it
        claimed = claim_statement.claimed(done[0], done[1]._asdict())
        _took_over(q, claimed)
        return claimed
    return done


def _claim_first(
    q: Queue,
    conn: Connection,
    row: ready_queue.ReadyRow,
    run_id: str,
    now: datetime,
    then: Received | None,
) -> ClaimedIssue | tuple[ready_queue.ReadyRow, _Taken] | None:
    """claim_next's claim of ``row``, the first ready one; None if another got there."""
    if row.claimed_by == run_id:  # its own expired claim: a renewal, as claim's
        renewed = claim_statement.claimed(row, _renewal(q, conn, row, run_id, now, refence=True))
        if then is not None:
            then(conn, renewed)
        return renewed
    if row.claimed_by is not None:
        before_waiting("taking over a lapsed claim (its holder's work is saved after)")
    if row.worktree_per_claim:
        before_waiting("a claim in a repository that makes a worktree per claim")
    taken = _claim_row(q, conn, row, run_id, now)
    if taken is None:
        return None
    if then is not None:
        then(conn, claim_statement.claimed(row, taken._asdict()))
    return row, taken


def _touching_ready(q: Queue, f: ReadyFilter | None) -> bool:
    """Whether a ready issue declares paths (which _claim_next_alone does not claim)."""
    with q.db.read() as conn:
        rows = ready_queue.ready_rows(conn, f, 1, q.now())
    return any(r.touching for r in rows)


_renew = Prepared(
    update(issues)
    .where(
        issues.c.id == bindparam("issue_id"),
        issues.c.claimed_by == bindparam("holder"),
        issues.c.status == IN_PROGRESS,
    )
    .values(lease_expires_at=bindparam("until"))
)
_renew_refenced = Prepared(
    update(issues)
    .where(
        issues.c.id == bindparam("issue_id"),
        issues.c.claimed_by == bindparam("holder"),
        issues.c.status == IN_PROGRESS,
    )
    .values(lease_expires_at=bindparam("until"), fence=issues.c.fence + 1)
)


def heartbeat(q: Queue, number: int, by: Authority, *, note: str | None = None) -> Claim:
    """Extend the lease of a live claim ``by`` holds (with its fence: that very claim).
    A lapsed lease is not revived: its reservations ended, and another claim may hold
    them now (LeaseLapsed; claiming again checks them). A ``note`` (what the work has come
    to) is kept as a progress comment: it moves the claim's progress clock, which a bare
    heartbeat does not (services/queue/progress.py)."""
    fields.number(number)
    fields.fence(by.fence)
    text = fields.comment(note) if note is not None else None

    def work(conn: Connection) -> Claim:
        let = door.admit(q, conn, Action.HEARTBEAT, number, by)
        assert let.holder is not None
        if text is not None:
            notes.add(q, conn, let.row, text, kind=CommentKind.PROGRESS, author=let.holder)
        return _renewal(q, conn, let.row, let.holder, let.now)

    return q.db.write(work)


_renew_all = (
    update(issues)
    .where(predicates.held_by(bindparam("run_ids", expanding=True), bindparam("now")))
    .values(lease_expires_at=bindparam("until"))
)


def renew_leases(q: Queue, run_ids: Collection[str]) -> int:
    """Extend every live lease these run ids hold (the server's background heartbeat). A
    lease that lapsed meanwhile (the process was stopped, the machine slept) stays lapsed:
    the agent claims it again, under a new fencing token."""
    if not run_ids:
        return 0

    def work(conn: Connection) -> int:
        now = q.now()
        values = {"run_ids": list(run_ids), "now": now, "until": q.lease_until(now)}
        return int(conn.execute(_renew_all, values).rowcount)

    return q.db.write(work)


@retry_lost_read
def waiting(q: Queue, run_ids: Collection[str]) -> dict[int, list[int]]:
    """The live claims these run ids hold that wait on unfinished issues: number -> those."""
    if not run_ids:
        return {}
    with q.db.read() as conn:
        rows = list(
            conn.execute(
                select(issues.c.id, issues.c.number, issues.c.open_blockers)
                .where(predicates.held_by(sorted(run_ids), q.now()))
                .where(issues.c.open_blockers > 0)
                .order_by(issues.c.number)
            )
        )
        return {row.number: blockers.waits_on(conn, row) for row in rows}


_finish = Prepared(
    update(issues)
    .where(issues.c.id == bindparam("issue_id"))
    .values(
        status=DONE,
        claimed_by=None,
        lease_expires_at=None,
        closed_at=bindparam("now"),
        updated_at=bindparam("now"),
    )
)


def complete(
    q: Queue,
    number: int,
    by: Authority,
    *,
    actor: str | None = None,
    note: str | None = None,
) -> Completed:
    """Mark done. Only the holder may (with ``by``'s fence only that claim), and only once
    every issue it waits on is done; an override may do both anyway, and the event records
    who made it and why. Done is idempotent. Refused while one of ``by``'s run ids is in
    plan mode. ``note``: a comment stored with the completion (not when refused, nor on an
    issue already done)."""
    fields.number(number)
    fields.fence(by.fence)
    text = fields.comment(note) if note else None
    # An override (an admin, GitHub) knows where the work went: no ending hook is asked.
    ending = _Ending(q, number, by, Action.COMPLETE, asked=by.override is not None)

    def work(conn: Connection) -> Completed:
        row, read = door.load(conn, number, Action.COMPLETE, by)
        if row.status == DONE:
            door.check(q, conn, row, Action.COMPLETE, by, read)  # a stale fence is refused
            return Completed(number=number, title=row.title, already_done=True)
        # An override may complete an issue nobody holds (an admin, GitHub closing it).
        if not (by.override is not None and row.claimed_by is None):
            door.check(q, conn, row, Action.COMPLETE, by, read)
        ending.check(conn)
        holder = row.claimed_by
        waiting = blockers.waits_on(conn, row)
        now = q.now()
        _finish.count(conn, {"issue_id": row.id, "now": now})
        reservations.clear(conn, row.id)
        if text:
            notes.add(q, conn, row, text, author=actor or holder)
        unblocked = blockers.now_ready(blockers.blocker_finished(conn, row.id))
        record(
            q,
            conn,
            kind="completed",
            issue_id=row.id,
            number=number,
            actor=actor or (by.who if by.override else holder),
            now=now,
            before={"status": row.status, "claimed_by": row.claimed_by},
            after={"status": DONE, **_overridden(by, waiting)},
        )
        return Completed(number=number, title=row.title, unblocked=unblocked)

    return ending.write(work)


class _AskFirst(Exception):
    """The claim's end concerns an ``ending`` hook: ask it outside the transaction first."""


class _Ending:
    """The queue's ``ending`` hooks (the worktrees: unmerged commits) for one change that
    ends a claim: asked only when one of them concerns the issue, which the change's own
    transaction reads (``check``, once the door let it through); then the transaction is
    left unwritten, the hooks asked outside it, and the change run again (asking the
    door again). ``asked``: none is to be asked (an override, a release that discards)."""

    def __init__(
        self, q: Queue, number: int, by: Authority, action: Action, *, asked: bool
    ) -> None:
        self.q, self.number, self.by, self.action = q, number, by, action
        self.asked = asked or not q.ending

    def check(self, conn: Connection) -> None:
        if not self.asked and any(h.concerns(conn, self.number) for h in self.q.ending):
            raise _AskFirst

    def write(self, work: Callable[[Connection], T]) -> T:
        try:
            return self.q.db.write(work)
        except _AskFirst:
            before_waiting("asking the ending hooks (git)")
            self._ask()
            self.asked = True
            return self.q.db.write(work)

    def _ask(self) -> None:
        q, number, by, action = self.q, self.number, self.by, self.action

        def held() -> None:
            try:
                door.ask(q, action, number, by)
            except NotHolder as refused:
                if refused.facts.get("holder") is not None:
                    raise  # another caller's claim: the change itself would be refused
                # nobody holds it: the change says so itself

        doing = f"{decisions.verb(action)[:-1]}ing"
        with contextlib.suppress(NotFound):  # no such issue: the change itself says so
            for hook in q.ending:
                hook.ask(q, number, doing, held)


def _overridden(by: Authority, waiting: list[int]) -> dict[str, Any]:
    """What a completion records of the override it made, if it made one."""
    if by.override is None:
        return {}
    return {**by.recorded(), **({"waits_on": waiting} if waiting else {})}


def refuse_while_waiting(q: Queue, number: int) -> None:
    """OpenBlockers if issue ``number`` waits on issues that are not done (a merge asks
    before its work lands: completing it would then be refused, or forced)."""
    with q.db.read() as conn:
        row = load(conn, number)
        waiting = blockers.waits_on(conn, row)
    if waiting:
        raise _still_waiting(number, waiting)


def _still_waiting(number: int, waiting: list[int]) -> OpenBlockers:
    shown = ", ".join(f"#{n}" for n in waiting)
    verb = "is" if len(waiting) == 1 else "are"
    return OpenBlockers(
        f"Issue #{number} waits on {shown}, which {verb} not done",
        number=number,
        waits_on=waiting,
    )


def release(
    q: Queue,
    number: int,
    by: Authority,
    *,
    reason: str | None = None,
    actor: str | None = None,
    discard: bool = False,
) -> Issue:
    """Give the claim up: the issue goes back to the queue. Only its holder may (with
    ``by``'s fence, only that claim), or an override. Commits in its worktree that the
    default branch lacks refuse it (UnmergedWork) unless ``discard``: then the branch keeps
    them for whoever claims it next."""
    fields.number(number)
    fields.fence(by.fence)
    why = fields.reason(reason) if reason else None
    asked = discard or by.override is not None
    ending = _Ending(q, number, by, Action.RELEASE, asked=asked)
    held: list[str | None] = []

    def work(conn: Connection) -> Issue:
        let = door.admit(q, conn, Action.RELEASE, number, by)
        ending.check(conn)
        held[:] = [let.holder]
        clear_claim(conn, let.row.id, now=let.now)
        record(
            q,
            conn,
            kind="released",
            issue_id=let.row.id,
            number=number,
            actor=actor or (by.who if let.overridden else let.holder),
            now=let.now,
            before={"claimed_by": let.holder},
            after=_why(why, by),
        )
        return to_issue(load(conn, number))

    released = ending.write(work)
    if held and held[0] is not None:
        claim_ended(q, number, "released", held[0])
    return released


def _why(reason: str | None, by: Authority) -> dict[str, Any] | None:
    found: dict[str, Any] = {"reason": reason} if reason else {}
    found.update(by.recorded())
    return found or None


def force_claim(
    q: Queue,
    number: int,
    by: Authority,
    confirmation: str,
    *,
    note: str | None = None,
) -> Claim:
    """Take a claim from whoever holds it, under ``by``'s run id, with the confirmation.
    The previous holder and who forced it (``by.who``: the person, the board's user, the
    agent's server) are recorded, and ``note`` as a comment in the same transaction.
    Refused while one of ``by``'s run ids is in plan mode (unless ``by`` overrides), and
    for an issue done, blocked or waiting on unfinished issues."""
    fields.number(number)
    run_id = claimer(by)
    text = fields.comment(note) if note is not None else None
    if confirmation != FORCE_CLAIM_CONFIRMATION:
        raise InvalidConfirmation(expected=FORCE_CLAIM_CONFIRMATION)

    def work(conn: Connection) -> _Taken:
        let = door.admit(q, conn, Action.FORCE_CLAIM, number, by)
        forced = {"forced_by": by.who or run_id, **by.recorded()}
        taken = _claim_row(q, conn, let.row, run_id, let.now, kind="force_claimed", recorded=forced)
        assert taken is not None  # the row is locked by this transaction
        if text is not None:
            notes.add(q, conn, let.row, text, author=run_id)
        return taken

    taken = q.db.write(work).claim()
    _took_over(q, taken, "forced")
    return taken
