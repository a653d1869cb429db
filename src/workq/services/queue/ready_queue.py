"""What is ready to be claimed, in claim order, and why the rest is not: the statements
``ready``, ``explain`` and every claim path read the queue with (ready and lapsed rows,
filtered, in priority order; the reservations of live claims kept out)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from sqlalchemy import (
    ARRAY,
    ColumnElement,
    Connection,
    Integer,
    ScalarSelect,
    Select,
    String,
    all_,
    any_,
    bindparam,
    exists,
    select,
    union_all,
)

from workq.db.engine import retry_lost_read
from workq.db.prepared import Prepared
from workq.db.tables import issues, repositories, touches
from workq.db.tables import labels as labels_t
from workq.domain import dates, readiness
from workq.errors import InvalidInput
from workq.schemas import PAGE_MAX, IssueType, NotReady, Priority, ReadyFilter, ReadyIssue, Status
from workq.services.handle import Queue
from workq.services.queue import blockers, door, predicates, reservations

OPEN, DONE = Status.OPEN.value, Status.DONE.value


# The columns a ready issue is made of (``ready_issue``), in its fields' order: what every
# statement that answers with issues selects or returns first.
ISSUE_COLUMNS = (
    issues.c.id,
    issues.c.number,
    issues.c.title,
    issues.c.description,
    issues.c.priority,
    issues.c.issue_type,
    issues.c.agent,
    issues.c.created_at,
)


def worktree_per_claim(repository: ColumnElement[Any]) -> ScalarSelect[Any]:
    """Whether the repository named by ``repository`` makes a worktree for every claim:
    read in a claim's own statement, so that nothing is read after it to know."""
    return (
        select(repositories.c.auto_worktree)
        .where(repositories.c.name == repository)
        .scalar_subquery()
    )


# Where a claimed issue is: its repository, and whether that makes a worktree per claim.
PLACEMENT_COLUMNS = (
    issues.c.repository,
    worktree_per_claim(issues.c.repository).label("worktree_per_claim"),
)

READY_COLUMNS = (
    *ISSUE_COLUMNS,
    issues.c.status,
    issues.c.claimed_by,
    issues.c.claimed_at,
    issues.c.open_blockers,
    issues.c.fence,
    # Whether it declares paths (then a claim reserves them): the rare case that needs
    # the live reservations read.
    exists().where(touches.c.issue_id == issues.c.id).label("touching"),
    *PLACEMENT_COLUMNS,
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
    repository: str | None
    worktree_per_claim: bool | None


ORDER = (issues.c.priority, issues.c.created_at, issues.c.number)
# A filter's form: agent?, how many types included, excluded, labels, and the repository
# condition (0 none, 1 this one, 2 any). Statements are compiled once per form.
Shape = tuple[bool, int, int, int, int]
_unblocked = predicates.unblocked


def filtered(stmt: Select[Any], shape: Shape, *, arrays: bool = False) -> Select[Any]:
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
_together: dict[tuple[Any, ...], Prepared[ReadyRow]] = {}


def _scans(shape: Shape, gated: int = 0) -> tuple[Select[Any], Select[Any]]:
    """(open and unclaimed, claimed but lease expired), each in ready order, limited.
    ``gated``: empty while the plan gate of that many run ids is closed (door.gate_open, a
    claim's own scan)."""
    fresh: Select[Any] = select(*READY_COLUMNS).where(issues.c.status == OPEN, _unblocked)
    stale: Select[Any] = select(*READY_COLUMNS).where(
        predicates.claim_lapsed(bindparam("now")), _unblocked
    )
    if gated:
        gate = door.gate_open(gated)
        fresh, stale = fresh.where(gate), stale.where(gate)
    return (
        filtered(fresh, shape).order_by(*ORDER).limit(bindparam("limit", type_=Integer)),
        filtered(stale, shape).order_by(*ORDER).limit(bindparam("limit", type_=Integer)),
    )


def ready_statements(
    shape: Shape, lock: bool, gated: int = 0
) -> tuple[Prepared[ReadyRow], Prepared[ReadyRow]]:
    """``_scans`` prepared (with ``lock``: their rows locked, skipping locked ones)."""
    key = (*shape, lock, gated)
    cached = _statements.get(key)
    if cached is None:
        fresh, stale = _scans(shape, gated)
        if lock:
            fresh = fresh.with_for_update(skip_locked=True)
            stale = stale.with_for_update(skip_locked=True)
        cached = _statements[key] = (Prepared(fresh, ReadyRow), Prepared(stale, ReadyRow))
    return cached


def ready_statement(shape: Shape, gated: int = 0) -> Prepared[ReadyRow]:
    """Both scans as one statement, in ready order: one step instead of two inside a
    claim's write transaction (SQLite, where a claim holds the file's one write lock; on
    PostgreSQL a locking scan cannot be part of a UNION)."""
    key = (*shape, gated)
    cached = _together.get(key)
    if cached is None:
        fresh, stale = _scans(shape, gated)
        both = union_all(select(fresh.subquery()), select(stale.subquery())).subquery("ready")
        ordered = select(*both.c).order_by(both.c.priority, both.c.created_at, both.c.number)
        cached = _together[key] = Prepared(
            ordered.limit(bindparam("limit", type_=Integer)), ReadyRow
        )
    return cached


def filter_params(f: ReadyFilter | None) -> tuple[Shape, dict[str, Any]]:
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


def ready_rows(
    conn: Connection,
    f: ReadyFilter | None,
    limit: int,
    now: datetime,
    *,
    lock: bool = False,
    gate: Mapping[str, str] | None = None,
) -> list[ReadyRow]:
    """Ready rows in claim order. ``gate``: the plan gate's parameters (door.gate_params): none
    while one of its run ids is in plan mode (a claim's scan, which then asks why)."""
    shape, params = filter_params(f)
    params.update(limit=limit, now=now)
    if gate is not None:
        params.update(gate)
    gated = len(gate) if gate is not None else 0
    if conn.dialect.name == "sqlite":
        together = ready_statement(shape, gated)
        if shape[1] or shape[2]:  # type lists expand at execution: not precompilable
            return [ReadyRow(*r) for r in conn.execute(together.stmt, params)]
        return together.rows(conn, params)
    fresh, stale = ready_statements(shape, lock, gated)
    if shape[1] or shape[2]:
        rows = [ReadyRow(*r) for r in conn.execute(fresh.stmt, params)]
        rows.extend(ReadyRow(*r) for r in conn.execute(stale.stmt, params))
    else:
        rows = fresh.rows(conn, params)
        rows.extend(stale.rows(conn, params))
    rows.sort(key=lambda r: (r.priority, r.created_at, r.number))
    return rows[:limit]


def claimable_rows(
    q: Queue,
    conn: Connection,
    f: ReadyFilter | None,
    limit: int,
    now: datetime,
    holder: str,
    *,
    lock: bool = False,
    gate: Mapping[str, str] | None = None,
) -> list[ReadyRow]:
    """Up to ``limit`` ready rows in claim order that ``holder`` may claim: without those
    whose paths another holder has reserved (unless reservations only warn). ``gate``:
    as ``ready_rows``'."""
    paths = reservations.Gate(q, conn, now, writes=lock)
    fetch = limit
    while True:
        rows = ready_rows(conn, f, fetch, now, lock=lock, gate=gate)
        kept = [
            r
            for r in rows
            if not paths.enforce or not paths.blocking(r.id, bool(r.touching), holder)
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
        rows = claimable_rows(q, conn, f, limit, q.now(), holder)
    return [ready_issue(r) for r in rows]


@retry_lost_read
def any_ready(q: Queue, f: ReadyFilter | None = None) -> bool:
    """Whether an issue is ready under ``f``, whoever asks: reserved paths are not looked
    at, so True may still leave nothing a given holder may claim, while False holds for
    every holder (waiting calls share it: server/waits.py)."""
    with q.db.read() as conn:
        return bool(ready_rows(conn, f, 1, q.now()))


@retry_lost_read
def explain(
    q: Queue, f: ReadyFilter | None = None, *, holder: str = "", limit: int = PAGE_MAX
) -> list[NotReady]:
    """Why unfinished issues are not ready, in claim order (the first ``limit`` of them):
    outside the filter ``f`` (another repository or none, another agent, a type or labels
    not asked for), blocked, waiting on #N, claimed by X until T, paths reserved by Y."""
    with q.db.read() as conn:
        now = q.now()
        gate = reservations.Gate(q, conn, now, writes=False)
        rows = conn.execute(
            select(issues).where(issues.c.status != DONE).order_by(*ORDER).limit(limit)
        )
        found: list[NotReady] = []
        for row in rows:
            reasons = _outside(conn, row, f) if f is not None else []
            if row.is_blocked:
                reasons.append(f"blocked: {row.blocked_reason}")
            waiting = blockers.waits_on(conn, row)
            if waiting:
                reasons.append("waiting on " + ", ".join(f"#{n}" for n in waiting))
            if readiness.claim_live(row, now):
                reasons.append(
                    f"claimed by {row.claimed_by} until {dates.stamp(row.lease_expires_at)}"
                )
            else:
                taken = gate.blocking(row.id, True, holder)
                if taken:
                    note = "" if gate.enforce else " (warning only)"
                    reasons.append(f"paths reserved by {reservations.describe(taken)}{note}")
            if reasons:
                found.append(NotReady(number=row.number, title=row.title, reasons=reasons))
    return found


def _outside(conn: Connection, row: Any, f: ReadyFilter) -> list[str]:
    """How issue ``row`` falls outside filter ``f`` (the rules of ``filtered``, in words)."""
    reasons = []
    if f.repository and row.repository != f.repository:
        where = f"repository {row.repository}" if row.repository else "no repository"
        reasons.append(f"in {where}, not {f.repository}")
    elif f.in_a_repository and row.repository is None:
        reasons.append("in no repository (a worktree needs one: workq repo assign)")
    if f.agent and row.agent != f.agent:
        reasons.append(f"for agent {row.agent}, not {f.agent}")
    if (f.include_types and row.issue_type not in {t.value for t in f.include_types}) or (
        f.exclude_types and row.issue_type in {t.value for t in f.exclude_types}
    ):
        reasons.append(f"of type {row.issue_type}, not asked for")
    if f.labels:
        carried = set(
            conn.execute(select(labels_t.c.name).where(labels_t.c.issue_id == row.id)).scalars()
        )
        missing = [name for name in f.labels if name not in carried]
        if missing:
            reasons.append("without label " + ", ".join(missing))
    return reasons


def ready_issue(r: ReadyRow | IssueFields) -> ReadyIssue:
    return ReadyIssue(
        number=r.number,
        title=r.title,
        description=r.description,
        priority=Priority.from_rank(r.priority),
        issue_type=IssueType(r.issue_type),
        agent=r.agent,
        created_at=r.created_at,
    )


class IssueFields(Protocol):
    """What a ready issue is made of, whichever statement read it."""

    @property
    def number(self) -> int: ...
    @property
    def title(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def priority(self) -> int: ...
    @property
    def issue_type(self) -> str: ...
    @property
    def agent(self) -> str: ...
    @property
    def created_at(self) -> datetime: ...
