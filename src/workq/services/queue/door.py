"""The one door every change to claimed work goes through: load the facts of an issue
inside the transaction that changes it, and apply the decision table (domain/decisions.py).

``admit`` is called first thing in a write transaction; it raises the table's refusal, so
a refused call changes nothing. ``ask`` is the same question in a read of its own, for a
long step (git, gates, a GitHub call) to ask before it starts and before each external
write; the transaction that records the step's outcome asks again with ``admit``.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any, NamedTuple

from sqlalchemy import ColumnElement, Connection, String, any_, bindparam, exists, select
from sqlalchemy.dialects import postgresql

from workq.db.prepared import Prepared
from workq.db.tables import IssueRecord, issues, plans
from workq.domain import decisions
from workq.domain.authority import Authority
from workq.domain.decisions import Action, Facts
from workq.domain.plan import PlanPhase
from workq.errors import WorkqError
from workq.services.handle import Queue, locks_rows, not_found
from workq.services.handle import load as load_row
from workq.services.queue import blockers


class _Planning(NamedTuple):
    run_id: str
    slug: str
    phase: str


# Whether one of a caller's run ids (any number of them) is in plan mode: the plan gate,
# asked on every claim and completion, so a prepared statement (db/prepared.py) for each
# count of run ids up to _PREPARED, in chunks beyond.
_PREPARED = 8


def _in_plan(runs: int) -> ColumnElement[bool]:
    """Whether one of ``runs`` run ids, parameters g0, g1, ... (``gate_params``), is in
    plan mode. One statement per count: an IN list SQLite reads as one equality for one
    run id, where eight slots (the unused ones NULL) cost a claim more than its scan."""
    return plans.c.active_run.in_([bindparam(f"g{i}", type_=String) for i in range(runs)])


_planning_of = {
    n: Prepared(
        select(plans.c.run_id, plans.c.slug, plans.c.phase).where(_in_plan(n)).limit(1),
        _Planning,
    )
    for n in range(1, _PREPARED + 1)
}
# The same inside PostgreSQL's one prepared claim statement: an array, not an expanded list.
planning_any = plans.c.active_run == any_(bindparam("runs", type_=postgresql.ARRAY(String)))


@cache
def gate_open(runs: int) -> ColumnElement[bool]:
    """The plan gate as a condition of another statement on any engine (a claim's ready
    scan): true while none of ``runs`` run ids (``gate_params``) is in plan mode."""
    return ~exists().where(_in_plan(runs))


@cache
def _load_gated(runs: int, lock: bool) -> Prepared[Any]:
    """The issue's row with the plan gate as a column of its own read (``load``): the run
    id of a plan one of ``runs`` run ids is in, or NULL; the plan's slug and phase are
    asked only when there is one. ``lock``: the row locked (``handle.locks_rows``)."""
    planning_run = (
        select(plans.c.active_run)
        .where(_in_plan(runs))
        .limit(1)
        .scalar_subquery()
        .label("planning_run")
    )
    stmt = select(*issues.c, planning_run).where(issues.c.number == bindparam("number"))
    return Prepared(stmt.with_for_update(of=issues) if lock else stmt, _Gated)


_Gated = namedtuple("_Gated", [*IssueRecord._fields, "planning_run"])  # type: ignore[misc]


class GateRead(NamedTuple):
    """The plan gate as the issue's read found it: the run id of the caller's that is in
    plan mode, or None."""

    planning_run: str | None


def load(
    conn: Connection, number: int, action: Action, by: Authority
) -> tuple[IssueRecord, GateRead | None]:
    """The issue's row, locked for a change, with the plan gate ``action`` asks (for
    ``by``) read in the same statement; None: not read (not asked, or more run ids than
    the statement holds: ``check`` asks it then).

    Raises:
        NotFound: no such issue.
    """
    params = (
        gate_params(planners(by))
        if decisions.RULES[action].planning and by.override is None
        else None
    )
    if params is None:
        return load_row(conn, number, for_update=True), None
    if not params:  # no run id to ask for: the gate is open
        return load_row(conn, number, for_update=True), GateRead(None)
    stmt = _load_gated(len(params), locks_rows(conn))
    found = stmt.rows(conn, {"number": number, **params})
    if not found:
        raise not_found(number)
    values: tuple[Any, ...] = tuple(found[0])
    return IssueRecord(*values[:-1]), GateRead(values[-1])


def gate_params(run_ids: Collection[str]) -> dict[str, str] | None:
    """``gate_open``'s parameters for ``run_ids``, as many as there are (the statement is
    ``gate_open(len(params))``); None when there are more than _PREPARED (then ask
    ``planning``)."""
    if len(run_ids) > _PREPARED:
        return None
    return {f"g{i}": run for i, run in enumerate(sorted(run_ids))}


@dataclass(frozen=True)
class Admitted:
    """What the door let through: the issue's row as it was, and whose claim the change
    acts on (the holder ``by`` acts as, or whoever held it when an override acts)."""

    row: IssueRecord
    holder: str | None
    now: datetime
    overridden: bool  # an override acted on a claim that is not the caller's
    mine: bool  # the claim is one of the caller's run ids'


def planning(conn: Connection, run_ids: Collection[str]) -> tuple[str, str, str] | None:
    """(run id, slug, phase) of a plan one of ``run_ids`` is in, or None: one lookup."""
    runs = sorted(run_ids)
    for start in range(0, len(runs), _PREPARED):
        chunk = runs[start : start + _PREPARED]
        found = _planning_of[len(chunk)].rows(conn, gate_params(chunk) or {})
        if found:
            return found[0].run_id, found[0].slug, PlanPhase(found[0].phase).display
    return None


def planners(by: Authority) -> frozenset[str]:
    """The run ids whose plan mode refuses ``by``: those it acts for, the one it claims
    under, and the caller's own (a server's plan is under its run id, its claims may be
    under an agent id)."""
    return by.run_ids | {r for r in (by.acts_as, by.who) if r}


def facts(
    conn: Connection, row: IssueRecord, action: Action, by: Authority, read: GateRead | None = None
) -> Facts:
    """The facts ``action``'s row of the table reads, loaded in ``conn``'s transaction
    (the plan gate and what the issue waits on only when that row asks; the gate as
    ``read`` found it, when ``load`` read it)."""
    rule = decisions.RULES[action]
    waits: tuple[int, ...] = ()
    if rule.waiting and row.open_blockers:
        waits = tuple(blockers.waits_on(conn, row))
    found = None
    if rule.planning and by.override is None:
        if read is None:
            found = planning(conn, planners(by))
        elif read.planning_run is not None:
            found = planning(conn, [read.planning_run])
    return Facts(
        number=row.number,
        status=row.status,
        holder=row.claimed_by,
        fence=row.fence,
        lease_expires_at=row.lease_expires_at,
        blocked_reason=row.blocked_reason if row.is_blocked else None,
        open_blockers=row.open_blockers,
        waits_on=waits,
        planning=found,
    )


def admit(q: Queue, conn: Connection, action: Action, number: int, by: Authority) -> Admitted:
    """The issue's row, locked for the change, once the table lets ``by`` do ``action``.

    Raises:
        NotFound: no such issue.
        WorkqError: the table's refusal (NotHolder, StaleClaim, LeaseLapsed,
            PlanModeActive, OpenBlockers, NotClaimable, ...).
    """
    row, read = load(conn, number, action, by)
    return check(q, conn, row, action, by, read)


def check(
    q: Queue,
    conn: Connection,
    row: IssueRecord,
    action: Action,
    by: Authority,
    read: GateRead | None = None,
) -> Admitted:
    """``admit`` for a row the transaction has already loaded (and locked); ``read``: the
    plan gate, if ``load`` read it with the row."""
    now = q.now()
    refusal = decisions.decide(action, facts(conn, row, action, by, read), by, now)
    if refusal is not None:
        raise refusal
    return _admitted(row, by, now)


def ask(q: Queue, action: Action, number: int, by: Authority) -> Admitted:
    """``admit``'s answer in a read of its own (nothing locked): before a long step and
    each of its external writes."""
    with q.db.read() as conn:
        row = load_row(conn, number)
        now = q.now()
        refusal = decisions.decide(action, facts(conn, row, action, by), by, now)
    if refusal is not None:
        raise refusal
    return _admitted(row, by, now)


def refusal(q: Queue, action: Action, number: int, by: Authority) -> WorkqError | None:
    """What ``ask`` would raise, or None."""
    try:
        ask(q, action, number, by)
    except WorkqError as exc:
        return exc
    return None


def refuse_planning(conn: Connection, by: Authority, action: Action) -> None:
    """The plan gate alone, for a change that names no issue yet (claim_next).

    Raises:
        PlanModeActive: one of ``by``'s run ids is in plan mode.
    """
    if by.override is not None:
        return
    found = planning(conn, planners(by))
    if found is not None:
        raise decisions.plan_mode_active(found, decisions.verb(action))


def _admitted(row: IssueRecord, by: Authority, now: datetime) -> Admitted:
    mine = row.claimed_by is not None and row.claimed_by in by.run_ids
    return Admitted(
        row=row,
        holder=row.claimed_by,
        now=now,
        overridden=by.override is not None and not mine,
        mine=mine,
    )
