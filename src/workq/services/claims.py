"""The hot path: ready, claim, claim_next, heartbeat, complete; and block, release, force.

Every claim is a compare-and-set inside one write transaction (BEGIN IMMEDIATE on SQLite,
row locks with SKIP LOCKED on PostgreSQL), so exactly one of N racing claimers wins.
Statements are built once at import; only their parameters change per call.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Collection
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import (
    ARRAY,
    Connection,
    Select,
    String,
    Text,
    all_,
    and_,
    any_,
    bindparam,
    case,
    cast,
    exists,
    func,
    insert,
    literal_column,
    null,
    or_,
    select,
    union_all,
    update,
)
from sqlalchemy.sql.elements import ColumnClause

from workq.db.engine import retry_lost_read
from workq.db.models import UTCDateTime
from workq.db.prepared import Prepared
from workq.db.tables import IssueRecord, events, github_outbox, issues, touches
from workq.db.tables import labels as labels_t
from workq.domain import fields, readiness
from workq.domain.authority import Authority, as_authority
from workq.errors import (
    AlreadyClaimed,
    InvalidConfirmation,
    InvalidInput,
    LeaseLapsed,
    NotClaimable,
    NotFound,
    NotHolder,
    OpenBlockers,
    StaleClaim,
    Step,
)
from workq.schemas import (
    FORCE_CLAIM_CONFIRMATION,
    PAGE_MAX,
    Claim,
    ClaimedIssue,
    Completed,
    Issue,
    IssueType,
    NotReady,
    Priority,
    ReadyFilter,
    ReadyIssue,
    Status,
)
from workq.services import blockers, notes, outbox, plans, predicates, reservations
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
    issues.c.fence,
    # Whether it declares paths (then a claim reserves them): the rare case that needs
    # the live reservations read.
    exists().where(touches.c.issue_id == issues.c.id).label("touching"),
)


class ReadyRow(NamedTuple):
    id: str
    number: int
    title: str
    description: str
    priority: int
    issue_type: str
    agent: str
    created_at: datetime
    status: str
    claimed_by: str | None
    claimed_at: datetime | None
    open_blockers: int
    fence: int
    touching: bool


_ORDER = (issues.c.priority, issues.c.created_at, issues.c.number)
# A filter's form: agent?, how many types included, excluded, labels, and the repository
# condition (0 none, 1 this one, 2 any). Statements are compiled once per form.
Shape = tuple[bool, int, int, int, int]
_unblocked = predicates.unblocked


def _filtered(stmt: Select[Any], shape: Shape, *, arrays: bool = False) -> Select[Any]:
    """``stmt`` with the filter's conditions. ``arrays``: type lists as one array parameter
    each (PostgreSQL), so the statement compiles once."""
    has_agent, n_include, n_exclude, n_labels, has_repository = shape
    if has_agent:
        stmt = stmt.where(issues.c.agent == bindparam("agent"))
    if has_repository == 1:
        stmt = stmt.where(issues.c.repository == bindparam("repository"))
    elif has_repository == 2:
        stmt = stmt.where(issues.c.repository.is_not(None))
    if n_include:
        stmt = stmt.where(
            issues.c.issue_type == any_(bindparam("include", type_=ARRAY(String)))
            if arrays
            else issues.c.issue_type.in_(bindparam("include", expanding=True))
        )
    if n_exclude:
        stmt = stmt.where(
            issues.c.issue_type != all_(bindparam("exclude", type_=ARRAY(String)))
            if arrays
            else issues.c.issue_type.not_in(bindparam("exclude", expanding=True))
        )
    for i in range(n_labels):
        stmt = stmt.where(
            exists().where(
                labels_t.c.issue_id == issues.c.id, labels_t.c.name == bindparam(f"label{i}")
            )
        )
    return stmt


_statements: dict[tuple[Any, ...], tuple[Prepared[ReadyRow], Prepared[ReadyRow]]] = {}


def _ready_statements(shape: Shape, lock: bool) -> tuple[Prepared[ReadyRow], Prepared[ReadyRow]]:
    """(open and unclaimed, claimed but lease expired), each in ready order."""
    key = (*shape, lock)
    cached = _statements.get(key)
    if cached is None:
        fresh: Select[Any] = select(*_READY_COLUMNS).where(issues.c.status == OPEN, _unblocked)
        stale: Select[Any] = select(*_READY_COLUMNS).where(
            predicates.claim_lapsed(bindparam("now")), _unblocked
        )
        fresh = _filtered(fresh, shape).order_by(*_ORDER).limit(bindparam("limit"))
        stale = _filtered(stale, shape).order_by(*_ORDER).limit(bindparam("limit"))
        if lock:
            fresh = fresh.with_for_update(skip_locked=True)
            stale = stale.with_for_update(skip_locked=True)
        cached = _statements[key] = (Prepared(fresh, ReadyRow), Prepared(stale, ReadyRow))
    return cached


def _params(f: ReadyFilter | None) -> tuple[Shape, dict[str, Any]]:
    if f is None:
        return (False, 0, 0, 0, 0), {}
    params: dict[str, Any] = {}
    if f.agent:
        params["agent"] = f.agent
    if f.include_types:
        params["include"] = [t.value for t in f.include_types]
    if f.exclude_types:
        params["exclude"] = [t.value for t in f.exclude_types]
    for i, name in enumerate(f.labels or ()):
        params[f"label{i}"] = name
    if f.repository:
        params["repository"] = f.repository
    shape = (
        bool(f.agent),
        len(f.include_types or ()),
        len(f.exclude_types or ()),
        len(f.labels or ()),
        1 if f.repository else 2 if f.in_a_repository else 0,
    )
    return shape, params


def _ready_rows(
    conn: Connection, f: ReadyFilter | None, limit: int, now: datetime, *, lock: bool = False
) -> list[ReadyRow]:
    shape, params = _params(f)
    fresh, stale = _ready_statements(shape, lock and conn.dialect.name != "sqlite")
    params.update(limit=limit, now=now)
    if shape[1] or shape[2]:  # type lists expand at execution: not precompilable
        rows = [ReadyRow(*r) for r in conn.execute(fresh.stmt, params)]
        rows.extend(ReadyRow(*r) for r in conn.execute(stale.stmt, params))
    else:
        rows = fresh.rows(conn, params)
        rows.extend(stale.rows(conn, params))
    rows.sort(key=lambda r: (r.priority, r.created_at, r.number))
    return rows[:limit]


def _claimable_rows(
    q: Queue,
    conn: Connection,
    f: ReadyFilter | None,
    limit: int,
    now: datetime,
    holder: str,
    *,
    lock: bool = False,
) -> list[ReadyRow]:
    """Up to ``limit`` ready rows in claim order that ``holder`` may claim: without those
    whose paths another holder has reserved (unless reservations only warn)."""
    gate = reservations.Gate(q, conn, now, writes=lock)
    fetch = limit
    while True:
        rows = _ready_rows(conn, f, fetch, now, lock=lock)
        kept = [
            r for r in rows if not gate.enforce or not gate.blocking(r.id, bool(r.touching), holder)
        ]
        if len(kept) >= limit or len(rows) < fetch:
            return kept[:limit]
        fetch *= 8


@retry_lost_read
def ready(
    q: Queue, f: ReadyFilter | None = None, *, limit: int = 1, holder: str = ""
) -> list[ReadyIssue]:
    """Ready issues in claim order: priority, then oldest, then number; without those whose
    paths a holder other than ``holder`` has reserved."""
    if not 1 <= limit <= PAGE_MAX:
        raise InvalidInput(f"limit must be between 1 and {PAGE_MAX}", field="limit")
    with q.db.read() as conn:
        rows = _claimable_rows(q, conn, f, limit, q.now(), holder)
    return [_ready_issue(r) for r in rows]


@retry_lost_read
def explain(q: Queue, *, holder: str = "", limit: int = PAGE_MAX) -> list[NotReady]:
    """Why unfinished issues are not ready, in claim order (the first ``limit`` of them):
    blocked, waiting on #N, claimed by X until T, paths reserved by Y."""
    with q.db.read() as conn:
        now = q.now()
        gate = reservations.Gate(q, conn, now, writes=False)
        rows = conn.execute(
            select(issues).where(issues.c.status != DONE).order_by(*_ORDER).limit(limit)
        )
        found: list[NotReady] = []
        for row in rows:
            reasons: list[str] = []
            if row.is_blocked:
                reasons.append(f"blocked: {row.blocked_reason}")
            waiting = blockers.waits_on(conn, row)
            if waiting:
                reasons.append("waiting on " + ", ".join(f"#{n}" for n in waiting))
            if readiness.claim_live(row, now):
                reasons.append(
                    f"claimed by {row.claimed_by} until {row.lease_expires_at:%Y-%m-%d %H:%M:%SZ}"
                )
            else:
                taken = gate.blocking(row.id, True, holder)
                if taken:
                    note = "" if gate.enforce else " (warning only)"
                    reasons.append(f"paths reserved by {reservations.describe(taken)}{note}")
            if reasons:
                found.append(NotReady(number=row.number, title=row.title, reasons=reasons))
    return found


def _ready_issue(r: ReadyRow | ChainRow) -> ReadyIssue:
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
        fence=issues.c.fence + 1,
    )
)


def _take_claim(
    q: Queue,
    conn: Connection,
    row: ReadyRow | IssueRecord,
    run_id: str,
    now: datetime,
    *,
    kind: str = "claimed",
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
        fence=row.fence + 1,  # the row is locked by this transaction
        previous_holder=previous,
    )


def claim(
    q: Queue,
    number: int,
    run_id: str,
    *,
    plan_runs: Collection[str] = (),
    ignore_plan_mode: bool = False,
) -> Claim:
    """Claim issue ``number`` for ``run_id``; again by the same run renews the lease.
    Refused while ``run_id`` or one of ``plan_runs`` is in plan mode (see claim_next)."""
    fields.number(number)
    fields.run_id(run_id)
    gate = () if ignore_plan_mode else {run_id, *plan_runs}

    def work(conn: Connection) -> Claim:
        plans.refuse_while_planning(conn, gate, "claiming")
        row = load(conn, number, for_update=True)
        now = q.now()
        paths = reservations.Gate(q, conn, now, writes=True)
        if row.claimed_by == run_id and row.status == IN_PROGRESS:
            # The holder's own claim stays its own, whatever it has come to wait on; once
            # its lease has lapsed, under a new fencing token (the caller may be a restart)
            # and only if no one reserved its paths meanwhile, as for any claim.
            lapsed = readiness.claim_lapsed(row, now)
            if lapsed:
                paths.refuse(number, paths.blocking(row.id, True, run_id))
            return _renewal(q, conn, row, run_id, now, refence=lapsed)
        _check_claimable(row, number)
        until = row.lease_expires_at
        if readiness.claim_live(row, now) and until is not None:
            raise AlreadyClaimed(
                f"Issue #{number} is held by {row.claimed_by} until {until:%Y-%m-%d %H:%M:%SZ}",
                number=number,
                holder=row.claimed_by,
                lease_expires_at=until.isoformat(),
            )
        paths.refuse(number, paths.blocking(row.id, True, run_id))
        taken = _take_claim(q, conn, row, run_id, now)
        if taken is None:  # pragma: no cover - the row lock makes this unreachable
            raise AlreadyClaimed(f"Issue #{number} was claimed by someone else", number=number)
        return taken

    return q.db.write(work)


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


def _check_claimable(row: IssueRecord, number: int) -> None:
    if row.status == DONE:
        raise NotClaimable(f"Issue #{number} is done", number=number, status=row.status)
    if row.is_blocked:
        raise NotClaimable(
            f"Issue #{number} is blocked: {row.blocked_reason}",
            number=number,
            blocked_reason=row.blocked_reason,
            hint=("unblock it with ", Step.UNBLOCK, ", or pick another with ", Step.READY),
        )
    if row.open_blockers:
        raise NotClaimable(
            f"Issue #{number} waits on {row.open_blockers} unfinished issue(s)",
            number=number,
            open_blockers=row.open_blockers,
            hint=(
                "finish its blockers first (see ",
                Step.SHOW_ISSUE,
                "), or pick another with ",
                Step.READY,
            ),
        )


def claim_next(
    q: Queue,
    run_id: str,
    f: ReadyFilter | None = None,
    *,
    plan_runs: Collection[str] = (),
    ignore_plan_mode: bool = False,
) -> ClaimedIssue | None:
    """Ready and claim in one transaction. None when nothing is ready (a normal result).
    The claim comes with the issue it took, as ``ready`` shows it.

    Refused (PlanModeActive) while ``run_id``, or one of ``plan_runs`` (the server's own run),
    is in plan mode, unless ``ignore_plan_mode`` (an admin's override)."""
    fields.run_id(run_id)
    gate = () if ignore_plan_mode else {run_id, *plan_runs}

    if q.db.dialect == "postgresql" and all(isinstance(h, outbox.Hook) for h in q.on_change):
        claimed = _claim_next_alone(q, run_id, f, gate)
        if claimed is not None or not _touching_ready(q, f):
            return claimed
        # The one statement leaves issues that declare paths alone: claim with the checks.

    def work(conn: Connection) -> ClaimedIssue | None:
        now = q.now()
        plans.refuse_while_planning(conn, gate, "claiming")
        while True:
            rows = _claimable_rows(q, conn, f, 1, now, run_id, lock=True)
            if not rows:
                return None
            if rows[0].claimed_by == run_id:  # its own expired claim: a renewal, as claim's
                return _claimed(rows[0], _renewal(q, conn, rows[0], run_id, now, refence=True))
            taken = _take_claim(q, conn, rows[0], run_id, now)
            if taken is not None:
                return _claimed(rows[0], taken)

    return q.db.write(work)


def _touching_ready(q: Queue, f: ReadyFilter | None) -> bool:
    """Whether a ready issue declares paths (which _claim_next_alone does not claim)."""
    with q.db.read() as conn:
        rows = _ready_rows(conn, f, 1, q.now())
    return any(r.touching for r in rows)


# --- claim_next on PostgreSQL: one statement ---------------------------------------------
#
# The plan gate, both ready scans (SKIP LOCKED), the compare-and-set, the audit event and the
# outbox row are one chain of CTEs, sent as a transaction of its own (autocommit): one round
# trip, as the raw claim statement. Its writes commit together or not at all. If the
# connection is lost under it, the claim is looked up by the mark it chose before sending:
# its run id and the exact lease end it sent (see _SETTLED).
# The scans carry only what the choice needs; the issue comes back from the UPDATE.


class ChainRow(NamedTuple):
    id: str
    number: int
    title: str
    description: str
    priority: int
    issue_type: str
    agent: str
    created_at: datetime
    previous: str | None
    claimed_at: datetime
    fence: int


_PICK_COLUMNS = (
    issues.c.id,
    issues.c.priority,
    issues.c.created_at,
    issues.c.number,
    issues.c.status,
    issues.c.claimed_by,
)
_chains: dict[tuple[Any, ...], Prepared[ChainRow]] = {}


def _sql(constant: str) -> ColumnClause[Any]:
    return literal_column(constant)


def _chain(shape: Shape, feed_outbox: bool) -> Prepared[ChainRow]:
    key = (*shape, feed_outbox)
    cached = _chains.get(key)
    if cached is not None:
        return cached
    # Constants are written into the SQL, not bound: the planner then sees what a custom
    # plan would, and keeps one generic plan for the prepared statement.
    unblocked = predicates.unblocked
    # The expired-lease scan: what the lease index finds (usually nothing), then sorted.
    # Ordered as the ready index is, or with the time as a plain parameter, the prepared
    # statement's generic plan walks every claimed issue in ready order testing its lease
    # (a cost that grows with the number of claims), or PostgreSQL plans it anew each time.
    by_lease = (issues.c.priority + _sql("0"), issues.c.created_at, issues.c.number)
    scans = []
    for name, where, order in (
        ("fresh", (issues.c.status == _sql(f"'{OPEN}'"),), _ORDER),
        (
            "stale",
            (predicates.claim_lapsed(select(bindparam("now")).scalar_subquery()),),
            by_lease,
        ),
    ):
        scan = select(*_PICK_COLUMNS).where(*where, unblocked)
        scan = _filtered(scan, shape, arrays=True).order_by(*order).limit(_sql("1"))
        scans.append(select(scan.with_for_update(skip_locked=True).cte(name)))
    pick = union_all(*scans).order_by("priority", "created_at", "number").limit(_sql("1"))
    chosen = pick.cte("pick")
    taken = (
        update(issues)
        .where(
            issues.c.id == chosen.c.id,
            or_(issues.c.claimed_by.is_(None), issues.c.claimed_by == chosen.c.claimed_by),
            ~exists().where(plans.planning),  # the plan gate
            # An issue that declares paths is claimed with the reservation checks instead.
            ~exists().where(touches.c.issue_id == chosen.c.id),
        )
        .values(
            status=_sql(f"'{IN_PROGRESS}'"),
            claimed_by=bindparam("run_id"),
            # The holder's own expired claim is renewed: the claim keeps its start.
            claimed_at=case(
                (chosen.c.claimed_by == bindparam("run_id"), issues.c.claimed_at),
                else_=bindparam("now"),
            ),
            lease_expires_at=bindparam("until"),
            updated_at=bindparam("now"),
            # Every claim the chain makes follows an open issue or a lapsed lease.
            fence=issues.c.fence + _sql("1"),
        )
        .returning(
            issues.c.id,
            issues.c.number,
            issues.c.title,
            issues.c.description,
            issues.c.priority,
            issues.c.issue_type,
            issues.c.agent,
            issues.c.created_at,
            chosen.c.claimed_by.label("previous"),
            chosen.c.status.label("previous_status"),
            issues.c.claimed_at,
            issues.c.fence,
        )
        .cte("taken")
    )
    # A renewal (the holder's own claim) changes only the lease: no event, no outbox row.
    changed = taken.c.previous.is_distinct_from(bindparam("run_id", type_=String))
    kind = case((taken.c.previous.is_(None), _sql("'claimed'")), else_=_sql("'claim_takeover'"))
    # As record() writes it: json.dumps(sort_keys=True) of the holder and status before.
    before = case(
        (taken.c.previous.is_(None), null()),
        else_=func.concat(
            _sql("""'{"claimed_by": '"""),
            cast(func.to_json(taken.c.previous), Text),
            _sql("""', "status": '"""),
            cast(func.to_json(taken.c.previous_status), Text),
            _sql("'}'"),
        ),
    )
    event = (
        insert(events)
        .from_select(
            ["issue_id", "number", "kind", "actor", "before", "after", "created_at"],
            select(
                taken.c.id,
                taken.c.number,
                kind,
                bindparam("run_id", type_=String),
                before,
                bindparam("after", type_=Text),
                bindparam("now", type_=UTCDateTime),
            ).where(changed),
        )
        .returning(events.c.id)
        .cte("event")
    )
    extra = [event]
    if feed_outbox:
        source = (
            outbox.feed(taken.c.id, taken.c.number, kind, bindparam("now", type_=UTCDateTime))
            .select_from(taken)
            .where(changed)
        )
        extra.append(
            outbox.upsert("postgresql", source).returning(github_outbox.c.issue_id).cte("queued")
        )
    result = select(
        taken.c.id,
        taken.c.number,
        taken.c.title,
        taken.c.description,
        taken.c.priority,
        taken.c.issue_type,
        taken.c.agent,
        taken.c.created_at,
        taken.c.previous,
        taken.c.claimed_at,
        taken.c.fence,
    ).add_cte(*extra)
    cached = _chains[key] = Prepared(result, ChainRow)
    return cached


# A claim's mark: its holder and the exact lease end it sent (a renewal of the holder's own
# expired claim keeps its claimed_at and writes no event, but sets the lease too).
_SETTLED = (
    select(
        issues.c.id,
        issues.c.number,
        issues.c.title,
        issues.c.description,
        issues.c.priority,
        issues.c.issue_type,
        issues.c.agent,
        issues.c.created_at,
        issues.c.claimed_at,
        issues.c.fence,
        events.c.before,
        events.c.id.label("event"),
    )
    .outerjoin(
        events,
        and_(
            events.c.number == issues.c.number,
            events.c.actor == bindparam("run_id"),
            events.c.created_at == bindparam("now", type_=UTCDateTime),
            events.c.kind.in_(("claimed", "claim_takeover")),
        ),
    )
    .where(
        issues.c.claimed_by == bindparam("run_id"),
        issues.c.lease_expires_at == bindparam("until", type_=UTCDateTime),
    )
)


def _claim_next_alone(
    q: Queue, run_id: str, f: ReadyFilter | None, gate: Collection[str]
) -> ClaimedIssue | None:
    shape, filters = _params(f)
    # With the outbox installed, its row is part of the chain (it writes nothing while no
    # mirror is configured): the claim cannot commit without it.
    chain = _chain(shape, outbox.hook_of(q) is not None)
    sent: dict[str, Any] = {}

    def run(conn: Connection) -> ClaimedIssue | None:
        now = q.now()
        until = q.lease_until(now)
        after = {"claimed_by": run_id, "lease_expires_at": until.isoformat()}
        params = {
            **filters,
            **plans.gate_params(gate),
            "run_id": run_id,
            "now": now,
            "until": until,
            "after": json.dumps(after, sort_keys=True),
        }
        sent.update(now=now, until=until)
        found = chain.rows(conn, params)
        return _claim_of(found[0], run_id, now, until) if found else None

    def settle(conn: Connection) -> ClaimedIssue | None:
        params = {"run_id": run_id, "now": sent["now"], "until": sent["until"]}
        row = conn.execute(_SETTLED, params).first()
        if row is None:
            return None
        if row.event is None:  # no event: the renewal of its own expired claim
            previous: str | None = run_id
        else:
            before = json.loads(row.before) if row.before else None
            previous = before.get("claimed_by") if before else None
        chained = ChainRow(*row[:8], previous, row.claimed_at, row.fence)
        return _claim_of(chained, run_id, sent["now"], sent["until"])

    claimed = q.db.write_alone(run, settle)
    if claimed is None:
        # Nothing claimed: nothing ready, or the gate closed the scans (then say why).
        with q.db.read() as conn:
            plans.refuse_while_planning(conn, gate, "claiming")
    return claimed


def _claim_of(row: ChainRow, run_id: str, now: datetime, until: datetime) -> ClaimedIssue:
    if row.previous == run_id:  # its own expired claim: a renewal, as claim's
        renewed = Claim(
            number=row.number,
            title=row.title,
            claimed_by=run_id,
            claimed_at=row.claimed_at,
            lease_expires_at=until,
            fence=row.fence,
            already_held=True,
        )
        return _claimed(row, renewed)
    taken = Claim(
        number=row.number,
        title=row.title,
        claimed_by=run_id,
        claimed_at=now,
        lease_expires_at=until,
        fence=row.fence,
        previous_holder=row.previous,
    )
    return _claimed(row, taken)


def _claimed(row: ReadyRow | ChainRow, taken: Claim) -> ClaimedIssue:
    return ClaimedIssue(
        number=row.number,
        title=row.title,
        description=row.description,
        priority=Priority.from_rank(row.priority),
        issue_type=IssueType(row.issue_type),
        agent=row.agent,
        claimed_by=taken.claimed_by,
        claimed_at=taken.claimed_at,
        lease_expires_at=taken.lease_expires_at,
        fence=taken.fence,
        previous_holder=taken.previous_holder,
        already_held=taken.already_held,
    )


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


def _fenced(row: IssueRecord, fence: int | None, number: int) -> None:
    """StaleClaim unless ``fence`` (when given) is the token of the issue's latest claim."""
    if fence is None or fence == row.fence:
        return
    if fence > row.fence:
        raise InvalidInput(
            f"Issue #{number} has had no claim with fencing token {fence} "
            f"(its latest is {row.fence})",
            field="fence",
        )
    if row.claimed_by is not None:
        newer = f"claim {row.fence}, held by {row.claimed_by}"
    else:
        newer = f"claim {row.fence}, since ended ({row.status})"
    raise StaleClaim(
        f"Issue #{number} was claimed again after your claim {fence}: {newer}",
        number=number,
        fence=fence,
        latest_fence=row.fence,
        holder=row.claimed_by,
        status=row.status,
    )


def _held(row: IssueRecord, by: Authority, number: int, action: str) -> str:
    """The holder the caller acts as (or overrides), or NotHolder."""
    if row.claimed_by is None or row.status != IN_PROGRESS:
        raise NotHolder(
            f"Issue #{number} is not claimed",
            number=number,
            hint=("claim it with ", Step.CLAIM, f" before you {action} it"),
        )
    if not by.allows(row.claimed_by):
        anyway = {"complete": Step.COMPLETE_ANYWAY, "release": Step.RELEASE_ANYWAY}
        raise NotHolder(
            f"Issue #{number} is held by {row.claimed_by}, not by you ({by.shown()})",
            hint=(
                "ask its holder to release it, or take it over: ",
                anyway.get(action, Step.FORCE_CLAIM),
            ),
            number=number,
            holder=row.claimed_by,
            lease_expires_at=row.lease_expires_at.isoformat() if row.lease_expires_at else None,
        )
    return str(row.claimed_by)


def held_now(row: IssueRecord, by: Authority, number: int, now: datetime, action: str) -> str:
    """The holder (one ``by`` acts for) of the live claim on ``row``, or NotHolder (or
    StaleClaim, LeaseLapsed)."""
    _fenced(row, by.fence, number)
    holder = _held(row, by, number, action)
    if readiness.claim_lapsed(row, now):
        until = row.lease_expires_at
        at = f"at {until:%Y-%m-%d %H:%M:%SZ}" if until else "(it had no lease)"
        raise LeaseLapsed(
            f"Your claim on issue #{number} lapsed {at}; its reservations ended with it",
            number=number,
            lease_expires_at=until.isoformat() if until else None,
        )
    return holder


def heartbeat(
    q: Queue, number: int, holders: Collection[str], *, fence: int | None = None
) -> Claim:
    """Extend the lease of a live claim the caller holds (with ``fence``: that very claim).
    A lapsed lease is not revived: its reservations ended, and another claim may hold
    them now (LeaseLapsed; claiming again checks them)."""
    fields.number(number)
    fields.fence(fence)

    def work(conn: Connection) -> Claim:
        row = load(conn, number, for_update=True)
        now = q.now()
        holder = held_now(row, Authority.of(holders, fence=fence), number, now, "heartbeat")
        return _renewal(q, conn, row, holder, now)

    return q.db.write(work)


_renew_all = (
    update(issues)
    .where(issues.c.claimed_by.in_(bindparam("holders", expanding=True)))
    .where(predicates.claim_live(bindparam("now")))
    .values(lease_expires_at=bindparam("until"))
)


def renew_leases(q: Queue, holders: Collection[str]) -> int:
    """Extend every live lease these run ids hold (the server's background heartbeat). A
    lease that lapsed meanwhile (the process was stopped, the machine slept) stays lapsed:
    the agent claims it again, under a new fencing token."""
    if not holders:
        return 0

    def work(conn: Connection) -> int:
        now = q.now()
        values = {"holders": list(holders), "now": now, "until": q.lease_until(now)}
        return int(conn.execute(_renew_all, values).rowcount)

    return q.db.write(work)


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
    by: Authority | Collection[str],
    *,
    actor: str | None = None,
    note: str | None = None,
) -> Completed:
    """Mark done. Only the holder may (``by``: the run ids, with its fence only that claim),
    and only once every issue it waits on is done; an override (``by`` naming its reason)
    may do both anyway, and the event records it. Done is idempotent. Refused while one of
    ``by``'s plan runs is in plan mode. ``note``: a comment stored with the completion (not
    when refused, nor on an issue already done)."""
    auth = as_authority(by)
    fields.number(number)
    fields.fence(auth.fence)
    text = fields.comment(note) if note else None
    if auth.override is None:  # an override (an admin, GitHub) knows where the work went
        _keeps_work(q, number, auth, "complete")

    def work(conn: Connection) -> Completed:
        plans.refuse_while_planning(conn, auth.plan_runs, "completing")
        row = load(conn, number, for_update=True)
        _fenced(row, auth.fence, number)
        if row.status == DONE:
            return Completed(number=number, title=row.title, already_done=True)
        # An override may complete an issue nobody holds (an admin, GitHub closing it).
        unheld = auth.override is not None and row.claimed_by is None
        holder = None if unheld else _held(row, auth, number, "complete")
        waiting = blockers.waits_on(conn, row)
        if waiting and auth.override is None:
            raise _still_waiting(number, waiting)
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
            actor=actor or holder,
            now=now,
            before={"status": row.status, "claimed_by": row.claimed_by},
            after={"status": DONE, **_overridden(auth, waiting)},
        )
        return Completed(number=number, title=row.title, unblocked=unblocked)

    return q.db.write(work)


def _keeps_work(q: Queue, number: int, by: Authority, action: str) -> None:
    """Refuse to end a claim whose worktree holds unmerged commits (see worktrees), once
    ``by`` is known to hold it (the change asks again in its transaction)."""
    from workq.services import worktrees

    def held() -> None:
        refuse_unless_held(q, number, by, action, unclaimed_ok=True)

    with contextlib.suppress(NotFound):  # no such issue: the change itself says so
        worktrees.refuse_unmerged(q, number, f"{action[:-1]}ing", first=held)


def _overridden(by: Authority, waiting: list[int]) -> dict[str, Any]:
    """What a completion records of the override it made, if it made one."""
    if by.override is None:
        return {}
    return {"forced": True, **({"waits_on": waiting} if waiting else {}), "override": by.override}


def refuse_unless_held(
    q: Queue, number: int, by: Authority, action: str, *, unclaimed_ok: bool = False
) -> str | None:
    """NotHolder (or StaleClaim) unless ``by`` may act on issue ``number``'s claim: asked
    before a long step (a merge's gates, a commit) that the transaction recording its
    outcome asks again. A done issue has no claim left to guard; ``unclaimed_ok``: nor
    has an issue nobody holds. Returns the holder ``by`` acts as, the name its history
    records (None: no claim, or an override, which records whoever made it)."""
    with q.db.read() as conn:
        row = load(conn, number)
    if row.status == DONE or (unclaimed_ok and row.claimed_by is None):
        return None
    _fenced(row, by.fence, number)
    holder = _held(row, by, number, action)
    return None if by.override is not None else holder


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


def block(
    q: Queue,
    number: int,
    reason: str,
    *,
    by: Authority | Collection[str],
    actor: str | None = None,
) -> Issue:
    """Record why, release any claim, keep it out of ready until unblocked.

    An issue with a live claim of someone else's is refused unless ``by`` overrides (the
    event then records ``forced`` and the reason); an unclaimed issue, or one whose lease
    lapsed, anyone may block. With ``by``'s fence, a claim other than that one is refused
    (StaleClaim).
    """
    auth = as_authority(by)
    fields.number(number)
    fields.fence(auth.fence)
    why = fields.reason(reason)

    def work(conn: Connection) -> Issue:
        row = load(conn, number, for_update=True)
        _fenced(row, auth.fence, number)
        now = q.now()
        if row.status == DONE:
            raise NotClaimable(f"Issue #{number} is done; nothing to block", number=number)
        overridden = readiness.claim_live(row, now) and row.claimed_by not in auth.run_ids
        if overridden:
            _held(row, auth, number, "block")
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
            after={
                "blocked_reason": why,
                **({"forced": True, "override": auth.override} if overridden else {}),
            },
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
    by: Authority | Collection[str],
    *,
    reason: str | None = None,
    actor: str | None = None,
    discard: bool = False,
) -> Issue:
    """Give the claim up: the issue goes back to the queue. Only its holder may (``by``;
    with its fence, only that claim, StaleClaim otherwise), or an override. Commits in its
    worktree that the default branch lacks refuse it (UnmergedWork) unless ``discard``:
    then the branch keeps them for whoever claims it next."""
    auth = as_authority(by)
    fields.number(number)
    fields.fence(auth.fence)
    why = fields.reason(reason) if reason else None
    if not discard and auth.override is None:
        _keeps_work(q, number, auth, "release")

    def work(conn: Connection) -> Issue:
        row = load(conn, number, for_update=True)
        _fenced(row, auth.fence, number)
        holder = _held(row, auth, number, "release")
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
            after=_why(why, auth),
        )
        return to_issue(load(conn, number))

    return q.db.write(work)


def _why(reason: str | None, by: Authority) -> dict[str, Any] | None:
    found = {"reason": reason} if reason else {}
    if by.override is not None:
        found["override"] = by.override
    return found or None


def force_claim(
    q: Queue,
    number: int,
    run_id: str,
    confirmation: str,
    *,
    plan_runs: Collection[str] = (),
    ignore_plan_mode: bool = False,
    note: str | None = None,
) -> Claim:
    """Take a claim from whoever holds it. The previous holder is recorded, and ``note``
    as a comment by ``run_id`` in the same transaction. Refused while ``run_id`` or one of
    ``plan_runs`` is in plan mode (see claim_next)."""
    fields.number(number)
    fields.run_id(run_id)
    text = fields.comment(note) if note is not None else None
    if confirmation != FORCE_CLAIM_CONFIRMATION:
        raise InvalidConfirmation(expected=FORCE_CLAIM_CONFIRMATION)
    gate = () if ignore_plan_mode else {run_id, *plan_runs}

    def work(conn: Connection) -> Claim:
        plans.refuse_while_planning(conn, gate, "claiming")
        row = load(conn, number, for_update=True)
        _check_claimable(row, number)
        taken = _take_claim(q, conn, row, run_id, q.now(), kind="force_claimed")
        assert taken is not None  # the row is locked by this transaction
        if text is not None:
            notes.add(q, conn, row, text, author=run_id)
        return taken

    return q.db.write(work)
