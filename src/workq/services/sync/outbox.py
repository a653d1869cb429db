"""Feeding the GitHub mirror's transactional outbox: what GitHub has not seen yet.

Every mutation of an issue runs :func:`queue_change` inside its own transaction (a
``Queue.on_change`` hook, installed by :func:`install`). It upserts one row per issue, so a
burst of edits collapses into one push. The statement carries its own guard: it inserts
nothing unless a mirror is configured (a row in ``github_mirror``), so every process that
writes to the database feeds the outbox the moment a mirror exists, and costs one indexed
lookup of an empty table while none does.

A row's ``version`` grows with each change. The worker pushes the state it read at version
``v`` and then deletes the row only if it is still at ``v``; a change made meanwhile leaves
the row pending, so it is pushed again and never lost. The rows and what the worker does
with them are :mod:`workq.services.sync.outbox_rows`'s.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Select, bindparam, case, exists, literal_column, select
from sqlalchemy.sql.dml import Insert
from sqlalchemy.sql.elements import ColumnClause

from workq.db import dialect
from workq.db.prepared import Prepared
from workq.db.tables import github_links, github_mirror, github_outbox, issues
from workq.services.handle import Queue
from workq.services.sync.outbox_rows import DEAD, FED_COLUMNS, PENDING


def feed(issue_id: Any, number: Any, kind: Any, now: Any) -> Select[Any]:
    """The outbox row for one change, as a SELECT that yields nothing while no mirror is
    configured. Its arguments are columns or parameters (a claim's CTE feeds its own rows)."""
    one: ColumnClause[Any] = literal_column("1")
    pending: ColumnClause[Any] = literal_column(f"'{PENDING}'")
    zero: ColumnClause[Any] = literal_column("0")
    return select(issue_id, number, kind, one, pending, zero, now, now).where(
        exists().where(github_mirror.c.repo.is_not(None))
    )


def upsert(dialect_name: str, source: Select[Any]) -> Insert:
    """Insert ``source``'s rows (see :func:`feed`) or refresh the issue's pending row: a
    newer version, due as it was, or due now if it had been parked as dead."""
    stmt = dialect.insert_for(dialect_name)(github_outbox).from_select(
        FED_COLUMNS,
        source,
    )
    o, excluded = github_outbox.c, stmt.excluded
    was_dead = o.state == literal_column(f"'{DEAD}'")
    return stmt.on_conflict_do_update(
        index_elements=[o.issue_id],
        set_={
            "number": excluded.number,
            "kind": excluded.kind,
            "version": o.version + literal_column("1"),
            "changed_at": excluded.changed_at,
            "state": literal_column(f"'{PENDING}'"),
            "attempts": case((was_dead, literal_column("0")), else_=o.attempts),
            "next_attempt_at": case((was_dead, excluded.next_attempt_at), else_=o.next_attempt_at),
        },
    )


_one = feed(bindparam("issue_id"), bindparam("number"), bindparam("kind"), bindparam("now"))
# Built for a dialect when first used: a SQLite process never loads PostgreSQL's dialect.
_queue: dict[str, Prepared[Any]] = {}


def queue_change(conn: Connection, issue_id: str, number: int, kind: str, now: datetime) -> None:
    """Queue (or refresh) the issue's outbox row, in the caller's transaction.

    A row parked as dead comes back to life: the new change may be what it needed. A row
    waiting for a rate limit keeps its wait.
    """
    params = {"issue_id": issue_id, "number": number, "kind": kind, "now": now}
    queue_statement(conn.dialect.name).count(conn, params)


def queue_statement(dialect_name: str) -> Prepared[Any]:
    """:func:`queue_change`'s statement for a dialect."""
    found = _queue.get(dialect_name)
    if found is None:
        found = _queue[dialect_name] = Prepared(upsert(dialect_name, _one))
    return found


def hook_of(q: Queue) -> Hook | None:
    """The outbox's hook on the queue, if installed."""
    return next((hook for hook in q.on_change if isinstance(hook, Hook)), None)


def install(q: Queue) -> None:
    """Hang the outbox on the queue's mutations (once)."""
    if hook_of(q) is None:
        q.on_change.append(Hook(q))


class Hook:
    """The outbox on the queue's changes (a ``ChangeHook``)."""

    def __init__(self, q: Queue) -> None:
        self.q = q

    def __call__(self, conn: Connection, issue_id: str, number: int, kind: str) -> None:
        queue_change(conn, issue_id, number, kind, self.q.now())

    def chained(self, changes: Select[Any]) -> Insert:
        rows = changes.subquery("changes")
        issue_id, number, kind, now = rows.c
        source = feed(issue_id, number, kind, now).select_from(rows)
        return upsert(self.q.db.dialect, source).returning(github_outbox.c.issue_id)


def queue_all(q: Queue) -> int:
    """Queue every issue and every linked deleted issue again (a full re-check). Pushes of
    unchanged issues make no request, so this costs reads of the local database only."""

    def work(conn: Connection) -> int:
        now = q.now()
        count = 0
        for issue_id, number in conn.execute(select(issues.c.id, issues.c.number)):
            queue_change(conn, issue_id, number, "rescan", now)
            count += 1
        gone = select(github_links.c.issue_id, github_links.c.number).where(
            ~select(issues.c.id).where(issues.c.id == github_links.c.issue_id).exists()
        )
        for issue_id, number in conn.execute(gone):
            queue_change(conn, issue_id, number, "rescan", now)
            count += 1
        return count

    return q.db.write(work)
