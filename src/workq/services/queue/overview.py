"""What the board reads: its columns (one snapshot), the agents holding claims, and the
change feed from the events table. Reads only; the board's actions use the CLI's services."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Select, func, literal_column, select
from sqlalchemy.sql.elements import ColumnElement

from workq.db.engine import retry_lost_read
from workq.db.tables import agents as agents_t
from workq.db.tables import dependencies as deps
from workq.db.tables import events, issues, workflows
from workq.db.tables import labels as labels_t
from workq.schemas import (
    AgentClaim,
    BoardAgent,
    BoardCard,
    BoardChange,
    BoardColumn,
    BoardFilter,
    BoardView,
    GraphNode,
    IssueType,
    Priority,
    Status,
)
from workq.services.handle import Queue
from workq.services.queue import predicates, progress

COLUMNS = ("ready", "in_progress", "waiting", "blocked", "done")
PAGE = 50
COUNT_CAP = 10_000
PAGE_LIMIT = 2_000  # deep pages of an offset scan cost more than anyone reads
_ORDER = (issues.c.priority, issues.c.created_at, issues.c.number)
_OPEN = Status.OPEN.value
_IN_PROGRESS = Status.IN_PROGRESS.value
_DONE = Status.DONE.value
_free = predicates.unblocked
_blocker = issues.alias("blocker")
# What a card shows: every column but the description.
_CARD = tuple(c for c in issues.c if c.name != "description")


def _where(f: BoardFilter) -> list[ColumnElement[bool]]:
    found: list[ColumnElement[bool]] = []
    if f.agent:
        found.append(issues.c.agent == f.agent)
    if f.issue_type:
        found.append(issues.c.issue_type == f.issue_type.value)
    if f.label:
        # From the label's index: a rare label costs little.
        found.append(issues.c.id.in_(select(labels_t.c.issue_id).where(labels_t.c.name == f.label)))
    return found


def _conditions(column: str, now: datetime) -> list[list[ColumnElement[bool]]]:
    """Each column as one or more disjoint conditions, each an indexed range of its own
    (an OR of them would sort the whole table instead of walking the ready index)."""
    if column == "ready":
        # Expired claims are found on the lease index (usually few), then filtered.
        expired = select(issues.c.id).where(predicates.claim_lapsed(now))
        return [[issues.c.status == _OPEN, _free], [issues.c.id.in_(expired), _free]]
    if column == "in_progress":
        return [[predicates.claim_live(now)]]
    if column == "waiting":
        return [
            [
                issues.c.status == _OPEN,
                issues.c.is_blocked == False,  # noqa: E712
                issues.c.open_blockers > 0,
            ]
        ]
    if column == "blocked":
        return [
            [issues.c.status == status, issues.c.is_blocked == True]  # noqa: E712
            for status in (_OPEN, _IN_PROGRESS)
        ]
    return [[issues.c.status == _DONE]]


def _count(conn: Connection, column: str, f: BoardFilter, now: datetime) -> int:
    """How many, counted up to COUNT_CAP (past it the board says "10000+")."""
    total = 0
    for cond in _conditions(column, now):
        some: Select[Any] = (  # a constant: the count reads the index alone where it can
            select(literal_column("1"))
            .select_from(issues)
            .where(*cond, *_where(f))
            .limit(COUNT_CAP - total)
        )
        total += conn.execute(select(func.count()).select_from(some.subquery())).scalar_one()
        if total >= COUNT_CAP:
            break
    return total


def _rows(
    conn: Connection, column: str, f: BoardFilter, now: datetime, page: int, size: int = PAGE
) -> list[Any]:
    """One page and one row more (to know whether there is a next page)."""
    start, want = page * size, size + 1
    if column == "done":
        return _done_rows(conn, f, start, want)
    # Leases in the order they run out: the lease index's own order, so no sort.
    order: tuple[Any, ...] = (issues.c.lease_expires_at,) if column == "in_progress" else _ORDER
    rows: list[Any] = []
    for cond in _conditions(column, now):
        stmt: Select[Any] = (
            select(*_CARD).where(*cond, *_where(f)).order_by(*order).limit(start + want)
        )
        rows.extend(conn.execute(stmt))
    if column in ("ready", "blocked"):
        rows.sort(key=lambda r: (r.priority, r.created_at, r.number))
    return rows[start : start + want]


def _done_rows(conn: Connection, f: BoardFilter, start: int, want: int) -> list[Any]:
    """Done issues, most recently completed first: walked from the newest completion event
    backwards (the events' primary key), so no sort over every done issue."""
    stmt = (
        select(*_CARD)
        .join(events, events.c.number == issues.c.number)
        .where(events.c.kind == "completed", issues.c.status == _DONE, *_where(f))
        .order_by(events.c.id.desc())
        .limit(2 * (start + want))
    )
    seen: set[int] = set()
    rows: list[Any] = []
    for row in conn.execute(stmt):
        if row.number not in seen:  # completed, reopened and completed again
            seen.add(row.number)
            rows.append(row)
    return rows[start : start + want]


def _cards(conn: Connection, column: str, rows: list[Any], now: datetime) -> list[BoardCard]:
    ids = [r.id for r in rows]
    label_map: dict[str, list[str]] = {}
    phases: dict[str, str] = {}
    waits: dict[str, list[int]] = {}
    since: dict[int, datetime] = {}
    stalls: dict[int, datetime] = {}
    if ids:
        for issue_id, name in conn.execute(
            select(labels_t.c.issue_id, labels_t.c.name)
            .where(labels_t.c.issue_id.in_(ids))
            .order_by(labels_t.c.name)
        ):
            label_map.setdefault(issue_id, []).append(name)
        if column == "in_progress":
            found = conn.execute(
                select(workflows.c.issue_id, workflows.c.phase).where(workflows.c.issue_id.in_(ids))
            )
            phases = {str(r[0]): str(r[1]) for r in found}
            stalls = _stalls(conn, now, [r.number for r in rows])
        if column == "waiting":
            for issue_id, number in conn.execute(
                select(deps.c.blocked_id, _blocker.c.number)
                .join(deps, deps.c.blocker_id == _blocker.c.id)
                .where(deps.c.blocked_id.in_(ids), _blocker.c.status != _DONE)
                .order_by(_blocker.c.number)
            ):
                waits.setdefault(issue_id, []).append(number)
        if column == "blocked":
            numbers = [r.number for r in rows]
            latest = conn.execute(
                select(events.c.number, func.max(events.c.created_at))
                .where(events.c.number.in_(numbers), events.c.kind == "blocked")
                .group_by(events.c.number)
            )
            since = {int(r[0]): r[1] for r in latest}
    return [
        BoardCard(
            number=r.number,
            title=r.title,
            priority=Priority.from_rank(r.priority),
            issue_type=IssueType(r.issue_type),
            agent=r.agent,
            labels=label_map.get(r.id, []),
            claimed_by=r.claimed_by if column == "in_progress" else None,
            lease_expires_at=r.lease_expires_at if column == "in_progress" else None,
            phase=phases.get(r.id),
            waiting_on=waits.get(r.id, []),
            blocked_reason=r.blocked_reason if column == "blocked" else None,
            since=r.closed_at if column == "done" else _stamp(since.get(r.number)),
            stalled_since=stalls.get(r.number),
        )
        for r in rows
    ]


def _stalls(
    conn: Connection, now: datetime, numbers: list[int] | None = None
) -> dict[int, datetime]:
    """The stalled live claims (of ``numbers``), and since when each is stalled."""
    found: dict[int, datetime] = {}
    for p in progress.of_claims(conn, now, numbers):
        if p.stalled(now) and p.stalled_since is not None:
            found[p.number] = p.stalled_since
    return found


def _stamp(value: Any) -> datetime | None:
    """``max()`` over a datetime column comes back as the stored text on SQLite."""
    if value is None or isinstance(value, datetime):
        return value
    from workq.db.times import from_sqlite

    return from_sqlite(value)


def first_cards(conn: Connection, column: str, now: datetime, limit: int) -> list[BoardCard]:
    """The first ``limit`` cards of a column, in its order, unfiltered."""
    return _cards(conn, column, _rows(conn, column, BoardFilter(), now, 0, limit)[:limit], now)


@retry_lost_read
def view(q: Queue, f: BoardFilter | None = None, pages: dict[str, int] | None = None) -> BoardView:
    """Every column: its count and one page of cards, all from one snapshot."""
    f = f or BoardFilter()
    pages = pages or {}
    now = q.now()
    with q.db.read() as conn:
        last = conn.execute(select(func.coalesce(func.max(events.c.id), 0))).scalar_one()
        columns = []
        for name in COLUMNS:
            page = min(max(pages.get(name, 0), 0), PAGE_LIMIT // PAGE)
            rows = _rows(conn, name, f, now, page)
            columns.append(
                BoardColumn(
                    name=name,
                    count=_count(conn, name, f, now),
                    cards=_cards(conn, name, rows[:PAGE], now),
                    page=page,
                    has_more=len(rows) > PAGE,
                )
            )
    return BoardView(columns=columns, last_event=last, now=now)


@retry_lost_read
def agents(q: Queue, *, limit: int = 500) -> list[BoardAgent]:
    """The run ids that hold live claims, with their claims, then the registered agents
    that hold none. A registered agent's last heartbeat is its own (``agents``); a plain
    run id's is its newest lease renewal: the lease's end less the lease this queue grants."""
    now = q.now()
    by_run: dict[str, list[AgentClaim]] = {}
    with q.db.read() as conn:
        stalls = _stalls(conn, now)
        for r in conn.execute(
            select(
                issues.c.claimed_by,
                issues.c.number,
                issues.c.title,
                issues.c.claimed_at,
                issues.c.lease_expires_at,
            )
            .where(issues.c.status == _IN_PROGRESS, issues.c.claimed_by.is_not(None))
            .order_by(issues.c.claimed_by, issues.c.number)
            .limit(limit)
        ):
            by_run.setdefault(r.claimed_by, []).append(
                AgentClaim(
                    number=r.number,
                    title=r.title,
                    claimed_at=r.claimed_at,
                    lease_expires_at=r.lease_expires_at,
                    stalled_since=stalls.get(r.number),
                )
            )
        seen: dict[str, datetime] = {
            r.id: r.last_seen_at
            for r in conn.execute(
                select(agents_t.c.id, agents_t.c.last_seen_at)
                .order_by(agents_t.c.last_seen_at.desc())
                .limit(limit)
            )
        }
    lease = timedelta(seconds=q.lease_seconds)
    found = []
    for run_id, claims in by_run.items():
        ends = [c.lease_expires_at for c in claims if c.lease_expires_at]
        beat = seen.get(run_id) or (min(max(ends) - lease, now) if ends else None)
        found.append(BoardAgent(run_id=run_id, claims=claims, last_heartbeat=beat))
    found.extend(
        BoardAgent(run_id=agent_id, claims=[], last_heartbeat=beat)
        for agent_id, beat in seen.items()
        if agent_id not in by_run
    )
    return found


@retry_lost_read
def last_change(q: Queue) -> int:
    """The newest event id (0 on an empty queue): the feed's one cheap query per tick."""
    with q.db.read() as conn:
        return int(conn.execute(select(func.coalesce(func.max(events.c.id), 0))).scalar_one())


@retry_lost_read
def changes(q: Queue, after: int, *, limit: int = 500) -> list[BoardChange]:
    """Events newer than ``after``, oldest first."""
    with q.db.read() as conn:
        rows = conn.execute(
            select(events.c.id, events.c.number, events.c.kind, events.c.actor)
            .where(events.c.id > after)
            .order_by(events.c.id)
            .limit(limit)
        )
        return [BoardChange(id=r.id, number=r.number, kind=r.kind, actor=r.actor) for r in rows]


@retry_lost_read
def open_graph(
    q: Queue, *, limit: int = 1_000
) -> tuple[list[GraphNode], list[tuple[int, int]], bool]:
    """What blocks what among unfinished issues: the nodes, the (blocker, blocked) edges,
    and whether more edges than ``limit`` exist."""
    blocked = issues.alias("blocked")
    with q.db.read() as conn:
        rows = list(
            conn.execute(
                select(_blocker.c.number, blocked.c.number)
                .select_from(deps)
                .join(_blocker, deps.c.blocker_id == _blocker.c.id)
                .join(blocked, deps.c.blocked_id == blocked.c.id)
                .where(_blocker.c.status != _DONE, blocked.c.status != _DONE)
                .order_by(blocked.c.number, _blocker.c.number)
                .limit(limit + 1)
            )
        )
        edges = [(int(a), int(b)) for a, b in rows[:limit]]
        numbers = sorted({n for e in edges for n in e})
        nodes: list[GraphNode] = []
        for start in range(0, len(numbers), 500):
            nodes.extend(
                GraphNode(
                    number=r.number,
                    title=r.title,
                    status=Status(r.status),
                    is_blocked=r.is_blocked,
                )
                for r in conn.execute(
                    select(issues.c.number, issues.c.title, issues.c.status, issues.c.is_blocked)
                    .where(issues.c.number.in_(numbers[start : start + 500]))
                    .order_by(issues.c.number)
                )
            )
    return nodes, edges, len(rows) > limit
