"""claim_next on PostgreSQL as one statement.

The plan gate, both ready scans (SKIP LOCKED), the compare-and-set, the audit event and the
outbox row are one chain of CTEs, sent as a transaction of its own (autocommit): one round
trip, as the raw claim statement. Its writes commit together or not at all. The hooks on
the queue (the GitHub outbox) join the chain as parts of their own (``ChangeHook.chained``);
a hook that cannot leaves claiming to the general path. If the
connection is lost under it, the claim is looked up by the mark it chose before sending:
its run id and the exact lease end it sent (see _SETTLED).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import (
    Connection,
    String,
    Text,
    and_,
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

from workq.db.prepared import Prepared
from workq.db.tables import events, issues, touches
from workq.db.times import UTCDateTime
from workq.domain import dates
from workq.domain.authority import Authority
from workq.domain.decisions import Action
from workq.schemas import Claim, ClaimedIssue, IssueType, Priority, ReadyFilter, Status
from workq.services.handle import ChangeHook, Queue
from workq.services.queue import door, predicates, ready_queue

OPEN, IN_PROGRESS = Status.OPEN.value, Status.IN_PROGRESS.value


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
    repository: str | None
    worktree_per_claim: bool | None


_PICK_COLUMNS = (
    issues.c.id,
    issues.c.priority,
    issues.c.created_at,
    issues.c.number,
    issues.c.status,
    issues.c.claimed_by,
)
_chains: dict[tuple[Any, ...], Prepared[ChainRow]] = {}
# Whether each kind of hook can be a part of the chain (see ChangeHook.chained).
_chainable: dict[type[Any], bool] = {}


def _sql(constant: str) -> ColumnClause[Any]:
    return literal_column(constant)


def chainable(q: Queue) -> bool:
    """Whether every hook on ``q`` can be a part of the one-statement claim."""
    for hook in q.on_change:
        kind = type(hook)
        if kind not in _chainable:
            probe = select(issues.c.id, issues.c.number, issues.c.status, issues.c.updated_at)
            _chainable[kind] = hook.chained(probe) is not None
        if not _chainable[kind]:
            return False
    return True


def _chain(shape: ready_queue.Shape, hooks: list[ChangeHook]) -> Prepared[ChainRow]:
    key = (*shape, *(type(h) for h in hooks))
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
        ("fresh", (issues.c.status == _sql(f"'{OPEN}'"),), ready_queue.ORDER),
        (
            "stale",
            (predicates.claim_lapsed(select(bindparam("now")).scalar_subquery()),),
            by_lease,
        ),
    ):
        scan = select(*_PICK_COLUMNS).where(*where, unblocked)
        scan = ready_queue.filtered(scan, shape, arrays=True).order_by(*order).limit(_sql("1"))
        scans.append(select(scan.with_for_update(skip_locked=True).cte(name)))
    pick = union_all(*scans).order_by("priority", "created_at", "number").limit(_sql("1"))
    chosen = pick.cte("pick")
    taken = (
        update(issues)
        .where(
            issues.c.id == chosen.c.id,
            or_(issues.c.claimed_by.is_(None), issues.c.claimed_by == chosen.c.claimed_by),
            ~exists().where(door.planning_any),  # the plan gate
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
            *ready_queue.ISSUE_COLUMNS,
            chosen.c.claimed_by.label("previous"),
            chosen.c.status.label("previous_status"),
            issues.c.claimed_at,
            issues.c.fence,
            issues.c.repository,
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
    changes = select(taken.c.id, taken.c.number, kind, bindparam("now", type_=UTCDateTime)).where(
        changed
    )
    for i, hook in enumerate(hooks):
        part = hook.chained(changes)
        assert part is not None, "claim_next_alone needs chainable(q)"
        extra.append(part.cte(f"hook{i}"))
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
        taken.c.repository,
        ready_queue.worktree_per_claim(taken.c.repository).label("worktree_per_claim"),
    ).add_cte(*extra)
    cached = _chains[key] = Prepared(result, ChainRow)
    return cached


# A claim's mark: its holder and the exact lease end it sent (a renewal of the holder's own
# expired claim keeps its claimed_at and writes no event, but sets the lease too).
_SETTLED = (
    select(
        *ready_queue.ISSUE_COLUMNS,
        issues.c.claimed_at,
        issues.c.fence,
        *ready_queue.PLACEMENT_COLUMNS,
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


def claim_next_alone(
    q: Queue, by: Authority, run_id: str, f: ReadyFilter | None, gate: Collection[str]
) -> ClaimedIssue | None:
    """``claims.claim_next`` on PostgreSQL, in one statement (when ``chainable(q)``):
    ``gate``, the run ids whose plan mode closes the scans (none for an override)."""
    shape, filters = ready_queue.filter_params(f)
    # The hooks' writes (the outbox's row) are parts of the chain: the claim cannot commit
    # without them.
    chain = _chain(shape, q.on_change)
    sent: dict[str, Any] = {}

    def run(conn: Connection) -> ClaimedIssue | None:
        now = q.now()
        until = q.lease_until(now)
        after = {"claimed_by": run_id, "lease_expires_at": dates.iso(until)}
        params = {
            **filters,
            "runs": list(gate),
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
        chained = ChainRow(
            *row[:8],
            previous,
            row.claimed_at,
            row.fence,
            row.repository,
            row.worktree_per_claim,
        )
        return _claim_of(chained, run_id, sent["now"], sent["until"])

    claimed = q.db.write_alone(run, settle)
    if claimed is None:
        # Nothing claimed: nothing ready, or the gate closed the scans (then say why).
        with q.db.read() as conn:
            door.refuse_planning(conn, by, Action.CLAIM)
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
        return claimed(row, renewed)
    taken = Claim(
        number=row.number,
        title=row.title,
        claimed_by=run_id,
        claimed_at=now,
        lease_expires_at=until,
        fence=row.fence,
        previous_holder=row.previous,
    )
    return claimed(row, taken)


def claimed(row: ready_queue.ReadyRow | ChainRow, taken: Claim | Mapping[str, Any]) -> ClaimedIssue:
    """The claim ``taken`` (a Claim, or its fields) of ``row``, with what the issue asks."""
    return ClaimedIssue(
        **(dict(taken) if isinstance(taken, Claim) else taken),
        description=row.description,
        priority=Priority.from_rank(row.priority),
        issue_type=IssueType(row.issue_type),
        agent=row.agent,
        placement=(row.repository, bool(row.worktree_per_claim)),
    )
