"""Dependencies between issues: the blocker must be done before the blocked is ready."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, delete, insert, literal, select, update

from workq.db import dialect
from workq.db.tables import dependencies as deps
from workq.db.tables import issues
from workq.domain import fields
from workq.errors import DependencyCycle, InvalidInput
from workq.schemas import Issue
from workq.services.handle import Queue, load, record
from workq.services.queue import blockers
from workq.services.queue.issues import detail


def _reaches(conn: Connection, start: str, target: str) -> bool:
    """True if ``target`` waits, directly or not, on ``start``."""
    down = select(literal(start).label("id")).cte("down", recursive=True)
    down = down.union(select(deps.c.blocked_id).join(down, deps.c.blocker_id == down.c.id))
    return conn.execute(select(down.c.id).where(down.c.id == target).limit(1)).first() is not None


def add_edge(
    q: Queue,
    conn: Connection,
    *,
    blocker_id: str,
    blocker_status: str,
    blocked_id: str,
    now: datetime,
    actor: str | None,
    numbers: tuple[int, int],
) -> None:
    """Insert the edge blocker -> blocked with its event, in the caller's transaction
    (which has checked that it makes no cycle)."""
    conn.execute(insert(deps).values(blocker_id=blocker_id, blocked_id=blocked_id, created_at=now))
    blockers.edge_added(conn, blocker_status=blocker_status, blocked_id=blocked_id)
    record(
        q,
        conn,
        kind="dependency_added",
        issue_id=blocked_id,
        number=numbers[1],
        actor=actor,
        now=now,
        after={"blocker": numbers[0], "blocked": numbers[1]},
    )


def depend(q: Queue, *, blocker: int, blocked: int, actor: str | None = None) -> Issue:
    """Make ``blocked`` wait for ``blocker``. Adding an existing edge changes nothing."""
    fields.number(blocker, "blocker")
    fields.number(blocked, "blocked")
    if blocker == blocked:
        raise InvalidInput("an issue cannot depend on itself", field="blocker")

    def work(conn: Connection) -> Issue:
        dialect.lock_graph(conn)
        # Locked, so the blocker cannot be completed between reading its status and
        # counting it as open (PostgreSQL; SQLite's write lock serialises anyway).
        first = load(conn, blocker, for_update=True)
        second = load(conn, blocked, for_update=True)
        exists = conn.execute(
            select(deps).where(deps.c.blocker_id == first.id, deps.c.blocked_id == second.id)
        ).first()
        if exists is None:
            if _reaches(conn, second.id, first.id):
                raise DependencyCycle(
                    f"#{blocked} already blocks #{blocker}, directly or through others",
                    blocker=blocker,
                    blocked=blocked,
                )
            now = q.now()
            add_edge(
                q,
                conn,
                blocker_id=first.id,
                blocker_status=first.status,
                blocked_id=second.id,
                now=now,
                actor=actor,
                numbers=(blocker, blocked),
            )
            conn.execute(update(issues).where(issues.c.id == second.id).values(updated_at=now))
        return detail(conn, blocked)

    return q.db.write(work)


def undepend(q: Queue, *, blocker: int, blocked: int, actor: str | None = None) -> Issue:
    """Stop ``blocked`` waiting for ``blocker``. Removing a missing edge changes nothing."""
    fields.number(blocker, "blocker")
    fields.number(blocked, "blocked")

    def work(conn: Connection) -> Issue:
        dialect.lock_graph(conn)
        first = load(conn, blocker, for_update=True)  # as in depend
        second = load(conn, blocked, for_update=True)
        gone = conn.execute(
            delete(deps).where(deps.c.blocker_id == first.id, deps.c.blocked_id == second.id)
        ).rowcount
        if gone:
            now = q.now()
            blockers.edge_removed(conn, blocker_status=first.status, blocked_id=second.id)
            conn.execute(update(issues).where(issues.c.id == second.id).values(updated_at=now))
            record(
                q,
                conn,
                kind="dependency_removed",
                issue_id=second.id,
                number=blocked,
                actor=actor,
                now=now,
                before={"blocker": blocker, "blocked": blocked},
            )
        return detail(conn, blocked)

    return q.db.write(work)
