"""The hot path: ready, claim, claim_next, heartbeat, complete; and block, release, force.

Every claim is a compare-and-set inside one write transaction (BEGIN IMMEDIATE on SQLite,
row locks with SKIP LOCKED on PostgreSQL), so exactly one of N racing claimers wins.
Statements are built once at import; only their parameters change per call.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Connection,
    Select,
    and_,
    bindparam,
    exists,
    or_,
    select,
    update,
)

from workq.db.engine import retry_lost_read
from workq.db.prepared import Prepared
from workq.db.tables import dependencies as deps
from workq.db.tables import issues
from workq.db.tables import labels as labels_t
from workq.domain import fields
from workq.errors import (
    AlreadyClaimed,
    InvalidConfirmation,
    InvalidInput,
    NotClaimable,
    NotHolder,
    OpenBlockers,
)
from workq.schemas import (
    FORCE_CLAIM_CONFIRMATION,
    PAGE_MAX,
    Claim,
    Completed,
    Issue,
    IssueType,
    NextClaim,
    Priority,
    ReadyFilter,
    ReadyIssue,
    Status,
)
from workq.services.context import Queue, load, record, to_issue

OPEN, IN_PROGRESS, DONE = Status.OPEN.value, Status.IN_PROGRESS.value, Status.DONE.value


_READY_COLUMNS = (
    issues.c.id,
    issues.c.number,
    issues.c.title,
    issues.c.description,
    issues.c.priority,
    issues.c.issue_type,
    issues.c.agent,
    issues.c.created_at,
    issues.c.status,
    issues.c.claimed_by,
    issues.c.claimed_at,
    issues.c.open_blockers,
)
_ORDER = (issues.c.priority, issues.c.created_at, issues.c.number)
_unblocked = and_(issues.c.is_blocked == False, issues.c.open_blockers == 0)  # noqa: E712


def _filtered(stmt: Select[Any], shape: tuple[bool, int, int, int]) -> Select[Any]:
    has_agent, n_include, n_exclude, n_labels = shape
    if has_agent:
        stmt = stmt.where(issues.c.agent == bindparam("agent"))
    if n_include:
        stmt = stmt.where(issues.c.issue_type.in_(bindparam("include", expanding=True)))
    if n_exclude:
        stmt = stmt.where(issues.c.issue_type.not_in(bindparam("exclude", expanding=True)))
    for i in range(n_labels):
        stmt = stmt.where(
            exists().where(
                labels_t.c.issue_id == issues.c.id, labels_t.c.name == bindparam(f"label{i}")
            )
        )
    return stmt


_statements: dict[tuple[Any, ...], tuple[Prepared, Prepared]] = {}


def _ready_statements(shape: tuple[bool, int, int, int], lock: bool) -> tuple[Prepared, Prepared]:
    """(open and unclaimed, claimed but lease expired), each in ready order."""
    key = (*shape, lock)
    cached = _statements.get(key)
    if cached is None:
        fresh: Select[Any] = select(*_READY_COLUMNS).where(issues.c.status == OPEN, _unblocked)
        stale: Select[Any] = select(*_READY_COLUMNS).where(
            issues.c.status == IN_PROGRESS,
            issues.c.lease_expires_at <= bindparam("now"),
            _unblocked,
        )
        fresh = _filtered(fresh, shape).order_by(*_ORDER).limit(bindparam("limit"))
        stale = _filtered(stale, shape).order_by(*_ORDER).limit(bindparam("limit"))
        if lock:
            fresh = fresh.with_for_update(skip_locked=True)
            stale = stale.with_for_update(skip_locked=True)
        cached = _statements[key] = (Prepared(fresh), Prepared(stale))
    return cached


def _params(f: ReadyFilter | None) -> tuple[tuple[bool, int, int, int], dict[str, Any]]:
    if f is None:
        return (False, 0, 0, 0), {}
    params: dict[str, Any] = {}
    if f.agent:
        params["agent"] = f.agent
    if f.include_types:
        params["include"] = [t.value for t in f.include_types]
    if f.exclude_types:
        params["exclude"] = [t.value for t in f.exclude_types]
    for i, name in enumerate(f.labels or ()):
        params[f"label{i}"] = name
    shape = (
        bool(f.agent),
        len(f.include_types or ()),
        len(f.exclude_types or ()),
        len(f.labels or ()),
    )
    return shape, params


def _ready_rows(
    conn: Connection, f: ReadyFilter | None, limit: int, now: datetime, *, lock: bool = False
) -> list[Any]:
    shape, params = _params(f)
    fresh, stale = _ready_statements(shape, lock and conn.dialect.name != "sqlite")
    params.update(limit=limit, now=now)
    if shape[1] or shape[2]:  # type lists expand at execution: not precompilable
        rows = list(conn.execute(fresh.stmt, params))
        rows.extend(conn.execute(stale.stmt, params))
    else:
        rows = fresh.rows(conn, params)
        rows.extend(stale.rows(conn, params))
    rows.sort(key=lambda r: (r.priority, r.created_at, r.number))
    return rows[:limit]


@retry_lost_read
def ready(q: Queue, f: ReadyFilter | None = None, *, limit: int = 1) -> list[ReadyIssue]:
    """Ready issues in claim order: priority, then oldest, then number."""
    if not 1 <= limit <= PAGE_MAX:
        raise InvalidInput(f"limit must be between 1 and {PAGE_MAX}", field="limit")
    with q.db.read() as conn:
        rows = _ready_rows(conn, f, limit, q.now())
    return [_ready_issue(r) for r in rows]


def _ready_issue(r: Any) -> ReadyIssue:
    return ReadyIssue(
        number=r.number,
        title=r.title,
        description=r.description,
        priority=Priority.from_rank(r.priority),
        issue_type=IssueType(r.issue_type),
        agent=r.agent,
        created_at=r.created_at,
    )


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
    )
)


def _take_claim(
    q: Queue, conn: Connection, row: Any, run_id: str, now: datetime, *, kind: str = "claimed"
) -> Claim | None:
    """Compare-and-set the claim on ``row``; None if someone else got there first."""
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
        after={"claimed_by": run_id, "lease_expires_at": until},
    )
    return Claim(
        number=row.number,
        title=row.title,
        claimed_by=run_id,
        claimed_at=now,
        lease_expires_at=until,
        previous_holder=previous,
    )


def claim(q: Queue, number: int, run_id: str) -> Claim:
    fields.number(number)
    fields.run_id(run_id)

    def work(conn: Connection) -> Claim:
        row = load(conn, number, for_update=True)
        now = q.now()
        if row.claimed_by == run_id and row.status == IN_PROGRESS:
            # The holder's own claim stays its own, whatever it has come to wait on.
            return _renewal(q, conn, row, run_id, now)
        _check_claimable(row, number)
        if row.claimed_by is not None and row.lease_expires_at and row.lease_expires_at > now:
            raise AlreadyClaimed(
                f"Issue #{number} is held by {row.claimed_by} until "
                f"{row.lease_expires_at:%Y-%m-%d %H:%M:%SZ}",
                number=number,
                holder=row.claimed_by,
                lease_expires_at=row.lease_expires_at.isoformat(),
            )
        taken = _take_claim(q, conn, row, run_id, now)
        if taken is None:  # pragma: no cover - the row lock makes this unreachable
            raise AlreadyClaimed(f"Issue #{number} was claimed by someone else", number=number)
        return taken

    return q.db.write(work)


_blocker = issues.alias("blocker")
_waits_on = Prepared(
    select(_blocker.c.number)
    .join(deps, deps.c.blocker_id == _blocker.c.id)
    .where(deps.c.blocked_id == bindparam("issue_id"), _blocker.c.status != DONE)
    .order_by(_blocker.c.number)
)


def waits_on(conn: Connection, row: Any) -> list[int]:
    """The numbers of the unfinished issues ``row`` waits on (none to look up when its
    count says so)."""
    if not row.open_blockers:
        return []
    return [r.number for r in _waits_on.rows(conn, {"issue_id": row.id})]


def _renewal(q: Queue, conn: Connection, row: Any, holder: str, now: datetime) -> Claim:
    """Renew ``holder``'s own claim on ``row``: a new lease, the same claim (no event, and
    ``claimed_at`` kept), with what it now waits on."""
    until = q.lease_until(now)
    _renew.count(conn, {"issue_id": row.id, "holder": holder, "until": until})
    return Claim(
        number=row.number,
        title=row.title,
        claimed_by=holder,
        claimed_at=row.claimed_at,
        lease_expires_at=until,
        already_held=True,
        waits_on=waits_on(conn, row),
    )


def clear_claim(
    conn: Connection, issue_id: str, *, now: datetime, status: str = OPEN, **changes: Any
) -> None:
    """Drop an issue's claim (and lease), putting it in ``status``, with ``changes`` too."""
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


def _check_claimable(row: Any, number: int) -> None:
    if row.status == DONE:
        raise NotClaimable(f"Issue #{number} is done", number=number, status=row.status)
    if row.is_blocked:
        raise NotClaimable(
            f"Issue #{number} is blocked: {row.blocked_reason}",
            number=number,
            blocked_reason=row.blocked_reason,
            hint="unblock it with issue_unblock, or pick another with issue_ready",
        )
    if row.open_blockers:
        raise NotClaimable(
            f"Issue #{number} waits on {row.open_blockers} unfinished issue(s)",
            number=number,
            open_blockers=row.open_blockers,
            hint="finish its blockers first (see issue_get), or pick another with issue_ready",
        )


def claim_next(q: Queue, run_id: str, f: ReadyFilter | None = None) -> NextClaim | None:
    """Ready and claim in one transaction. None when nothing is ready (a normal result).
    The claim carries the issue it took, as ``ready`` shows it."""
    fields.run_id(run_id)

    def work(conn: Connection) -> NextClaim | None:
        now = q.now()
        while True:
            rows = _ready_rows(conn, f, 1, now, lock=True)
            if not rows:
                return None
            if rows[0].claimed_by == run_id:  # its own expired claim: a renewal, as claim's
                renewed = _renewal(q, conn, rows[0], run_id, now)
                return NextClaim(**renewed.model_dump(), issue=_ready_issue(rows[0]))
            taken = _take_claim(q, conn, rows[0], run_id, now)
            if taken is not None:
                return NextClaim(**taken.model_dump(), issue=_ready_issue(rows[0]))

    return q.db.write(work)


_renew = Prepared(
    update(issues)
    .where(
        issues.c.id == bindparam("issue_id"),
        issues.c.claimed_by == bindparam("holder"),
        issues.c.status == IN_PROGRESS,
    )
    .values(lease_expires_at=bindparam("until"))
)


def _held(row: Any, holders: Collection[str] | None, number: int, action: str) -> str:
    """The holder the caller acts as, or NotHolder."""
    if row.claimed_by is None or row.status != IN_PROGRESS:
        raise NotHolder(
            f"Issue #{number} is not claimed",
            number=number,
            hint=f"claim it with issue_claim before you {action} it",
        )
    if holders is not None and row.claimed_by not in holders:
        raise NotHolder(
            f"Issue #{number} is held by {row.claimed_by}, not by you",
            number=number,
            holder=row.claimed_by,
            lease_expires_at=row.lease_expires_at.isoformat() if row.lease_expires_at else None,
        )
    return str(row.claimed_by)


def heartbeat(q: Queue, number: int, holders: Collection[str]) -> Claim:
    """Extend the lease of a claim the caller holds."""
    fields.number(number)

    def work(conn: Connection) -> Claim:
        row = load(conn, number, for_update=True)
        return _renewal(q, conn, row, _held(row, holders, number, "heartbeat"), q.now())

    return q.db.write(work)


_renew_all = (
    update(issues)
    .where(issues.c.claimed_by.in_(bindparam("holders", expanding=True)))
    .where(issues.c.status == IN_PROGRESS)
    .values(lease_expires_at=bindparam("until"))
)


def renew_leases(q: Queue, holders: Collection[str]) -> int:
    """Extend every lease these run ids hold (the server's background heartbeat)."""
    if not holders:
        return 0
    return q.db.write(
        lambda conn: (
            conn.execute(
                _renew_all, {"holders": list(holders), "until": q.lease_until(q.now())}
            ).rowcount
        )
    )


@retry_lost_read
def waiting(q: Queue, holders: Collection[str]) -> dict[int, list[int]]:
    """The claims these run ids hold that wait on unfinished issues: number -> those."""
    if not holders:
        return {}
    with q.db.read() as conn:
        rows = list(
            conn.execute(
                select(issues.c.id, issues.c.number, issues.c.open_blockers)
                .where(issues.c.claimed_by.in_(list(holders)))
                .where(issues.c.status == IN_PROGRESS, issues.c.open_blockers > 0)
                .order_by(issues.c.number)
            )
        )
        return {row.number: waits_on(conn, row) for row in rows}


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
_dependents = select(deps.c.blocked_id).where(deps.c.blocker_id == bindparam("issue_id"))
_release_dependents = Prepared(
    update(issues)
    .where(issues.c.id.in_(_dependents))
    .values(open_blockers=issues.c.open_blockers - 1)
    .returning(issues.c.number, issues.c.open_blockers, issues.c.is_blocked, issues.c.status)
)


def complete(
    q: Queue,
    number: int,
    holders: Collection[str] | None,
    *,
    force: bool = False,
    actor: str | None = None,
) -> Completed:
    """Mark done. Only the holder may (``holders``), and only once every issue it waits on
    is done, unless ``force``; done is idempotent."""
    fields.number(number)

    def work(conn: Connection) -> Completed:
        row = load(conn, number, for_update=True)
        if row.status == DONE:
            return Completed(number=number, title=row.title, already_done=True)
        holder = row.claimed_by if force else _held(row, holders, number, "complete")
        waiting = waits_on(conn, row)
        if waiting and not force:
            raise _still_waiting(number, waiting)
        now = q.now()
        _finish.count(conn, {"issue_id": row.id, "now": now})
        unblocked = sorted(
            r.number
            for r in _release_dependents.rows(conn, {"issue_id": row.id})
            if r.open_blockers == 0 and not r.is_blocked and r.status != DONE
        )
        record(
            q,
            conn,
            kind="completed",
            issue_id=row.id,
            number=number,
            actor=actor or holder,
            now=now,
            before={"status": row.status, "claimed_by": row.claimed_by},
            after=(
                {"status": DONE, "forced": force, **({"waits_on": waiting} if waiting else {})}
                if force
                else {"status": DONE}
            ),
        )
        return Completed(number=number, title=row.title, unblocked=unblocked)

    return q.db.write(work)


def _still_waiting(number: int, waiting: list[int]) -> OpenBlockers:
    shown = ", ".join(f"#{n}" for n in waiting)
    verb = "is" if len(waiting) == 1 else "are"
    return OpenBlockers(
        f"Issue #{number} waits on {shown}, which {verb} not done",
        number=number,
        waits_on=waiting,
    )


def block(
    q: Queue,
    number: int,
    reason: str,
    *,
    holders: Collection[str] | None = None,
    actor: str | None = None,
) -> Issue:
    """Record why, release any claim, keep it out of ready until unblocked.

    With ``holders`` given, an issue claimed by someone else (with a live lease) is refused;
    without, that claim is overridden and the event records ``forced``.
    """
    fields.number(number)
    why = fields.reason(reason)

    def work(conn: Connection) -> Issue:
        row = load(conn, number, for_update=True)
        now = q.now()
        if row.status == DONE:
            raise NotClaimable(f"Issue #{number} is done; nothing to block", number=number)
        live = row.claimed_by and row.lease_expires_at and row.lease_expires_at > now
        overridden = bool(live) and row.claimed_by not in (holders or ())
        if holders is not None and overridden:
            _held(row, holders, number, "block")
        clear_claim(conn, row.id, now=now, is_blocked=True, blocked_reason=why)
        record(
            q,
            conn,
            kind="blocked",
            issue_id=row.id,
            number=number,
            actor=actor or row.claimed_by,
            now=now,
            before={"claimed_by": row.claimed_by, "status": row.status},
            # Blocking someone else's live claim (an admin's force) says so.
            after={"blocked_reason": why, **({"forced": True} if overridden else {})},
        )
        return to_issue(load(conn, number))

    return q.db.write(work)


def unblock(q: Queue, number: int, *, actor: str | None = None) -> Issue:
    fields.number(number)

    def work(conn: Connection) -> Issue:
        row = load(conn, number, for_update=True)
        if row.is_blocked:
            now = q.now()
            conn.execute(
                update(issues)
                .where(issues.c.id == row.id)
                .values(is_blocked=False, blocked_reason=None, updated_at=now)
            )
            record(
                q,
                conn,
                kind="unblocked",
                issue_id=row.id,
                number=number,
                actor=actor,
                now=now,
                before={"blocked_reason": row.blocked_reason},
            )
        return to_issue(load(conn, number))

    return q.db.write(work)


def release(
    q: Queue,
    number: int,
    holders: Collection[str] | None,
    *,
    reason: str | None = None,
    actor: str | None = None,
) -> Issue:
    """Give the claim up: the issue goes back to the queue. ``holders=None`` is an admin."""
    fields.number(number)
    why = fields.reason(reason) if reason else None

    def work(conn: Connection) -> Issue:
        row = load(conn, number, for_update=True)
        holder = _held(row, holders, number, "release")
        now = q.now()
        clear_claim(conn, row.id, now=now)
        record(
            q,
            conn,
            kind="released",
            issue_id=row.id,
            number=number,
            actor=actor or holder,
            now=now,
            before={"claimed_by": holder},
            after={"reason": why} if why else None,
        )
        return to_issue(load(conn, number))

    return q.db.write(work)


def force_claim(q: Queue, number: int, run_id: str, confirmation: str) -> Claim:
    """Take a claim from whoever holds it. The previous holder is recorded."""
    fields.number(number)
    fields.run_id(run_id)
    if confirmation != FORCE_CLAIM_CONFIRMATION:
        raise InvalidConfirmation(expected=FORCE_CLAIM_CONFIRMATION)

    def work(conn: Connection) -> Claim:
        row = load(conn, number, for_update=True)
        _check_claimable(row, number)
        taken = _take_claim(q, conn, row, run_id, q.now(), kind="force_claimed")
        assert taken is not None  # the row is locked by this transaction
        return taken

    return q.db.write(work)
