"""The one owner of ``issues.open_blockers``: how many of an issue's blockers are not done.

Ready is an indexed query only because this count is kept right on every write: an edge
added or removed, a blocker finished, reopened or deleted. Every change of the count goes
through this module, in the caller's transaction; ``doctor`` recounts from the graph.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from sqlalchemy import Connection, bindparam, select, update

from workq.db.prepared import Prepared
from workq.db.tables import dependencies as deps
from workq.db.tables import issues
from workq.domain import readiness
from workq.schemas import Status


class Dependent(NamedTuple):
    """An issue whose count changed, as it is after the change."""

    number: int
    open_blockers: int
    is_blocked: bool
    status: str


_dependents_of = select(deps.c.blocked_id).where(deps.c.blocker_id == bindparam("issue_id"))


def _shift_dependents(delta: int) -> Prepared[Dependent]:
    return Prepared(
        update(issues)
        .where(issues.c.id.in_(_dependents_of))
        .values(open_blockers=issues.c.open_blockers + delta)
        .returning(issues.c.number, issues.c.open_blockers, issues.c.is_blocked, issues.c.status),
        Dependent,
    )


_finished = _shift_dependents(-1)
_unfinished = _shift_dependents(+1)


def blocker_finished(conn: Connection, issue_id: str) -> list[Dependent]:
    """``issue_id`` is done (or gone while not done): its dependents wait for one less."""
    return _finished.rows(conn, {"issue_id": issue_id})


def blocker_reopened(conn: Connection, issue_id: str) -> list[Dependent]:
    """``issue_id`` is not done any more: its dependents wait for it again."""
    return _unfinished.rows(conn, {"issue_id": issue_id})


def now_ready(changed: list[Dependent]) -> list[int]:
    """The numbers among ``changed`` that wait for nothing any more, in order."""
    return sorted(
        d.number for d in changed if readiness.unblocked(d) and d.status != Status.DONE.value
    )


_shift_one = Prepared(
    update(issues)
    .where(issues.c.id == bindparam("issue_id"))
    .values(open_blockers=issues.c.open_blockers + bindparam("delta"))
)


def edge_added(conn: Connection, *, blocker_status: str, blocked_id: str) -> None:
    """An edge blocker -> blocked was inserted: blocked waits for one more if the blocker
    is not done."""
    if blocker_status != Status.DONE.value:
        _shift_one.count(conn, {"issue_id": blocked_id, "delta": 1})


def edge_removed(conn: Connection, *, blocker_status: str, blocked_id: str) -> None:
    """An edge blocker -> blocked was deleted: blocked waits for one less if the blocker
    was not done."""
    if blocker_status != Status.DONE.value:
        _shift_one.count(conn, {"issue_id": blocked_id, "delta": -1})


def recount(conn: Connection, issue_id: str, value: int) -> None:
    """Set the count to what the graph says (``doctor --repair``)."""
    conn.execute(update(issues).where(issues.c.id == issue_id).values(open_blockers=value))


_blocker = issues.alias("blocker")
_waits_on = Prepared(
    select(_blocker.c.number)
    .join(deps, deps.c.blocker_id == _blocker.c.id)
    .where(deps.c.blocked_id == bindparam("issue_id"), _blocker.c.status != Status.DONE.value)
    .order_by(_blocker.c.number)
)


def waits_on(conn: Connection, row: Any) -> list[int]:
    """The numbers of the unfinished issues ``row`` waits on (none to look up when its
    count says so)."""
    if not row.open_blockers:
        return []
    return [r.number for r in _waits_on.rows(conn, {"issue_id": row.id})]
