"""The GitHub repository a database mirrors to (the ``github_mirror`` row): configuring it,
forgetting it, and what the worker notes on it (cursors, last push and import, last error).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel
from sqlalchemy import Connection, delete, func, insert, select, update

from workq.db.tables import github_comments, github_links, github_mirror, github_outbox
from workq.errors import Conflict, InvalidInput
from workq.services.handle import Queue, record
from workq.services.sync import outbox_rows


class Mirror(BaseModel):
    repo: str
    created_at: datetime
    import_since: datetime | None = None
    import_etag: str | None = None
    last_push_at: datetime | None = None
    last_import_at: datetime | None = None
    last_error: str | None = None
    worker: str | None = None
    worker_expires_at: datetime | None = None


def mirror(q: Queue) -> Mirror | None:
    """The configured mirror, if any."""
    with q.db.read() as conn:
        row = conn.execute(select(github_mirror)).first()
    return Mirror.model_validate(dict(row._mapping)) if row else None


def configure(q: Queue, repo: str) -> tuple[Mirror, int]:
    """Make ``repo`` this database's mirror, if it is not already, and queue every issue
    GitHub has not seen. Returns the mirror and how many rows were queued.

    Raises:
        Conflict: the database already mirrors another repository.
    """

    def work(conn: Connection) -> tuple[Mirror, int]:
        now = q.now()
        rows = list(conn.execute(select(github_mirror)))
        others = [r.repo for r in rows if r.repo.lower() != repo.lower()]
        if others:
            raise Conflict(
                f"this database already mirrors {others[0]}",
                hint=f"run 'workq sync forget --repo {others[0]}' first to mirror elsewhere",
                repo=others[0],
            )
        if not rows:
            conn.execute(insert(github_mirror).values(repo=repo, created_at=now))
        queued = outbox_rows.queue_unlinked(conn, now)
        found = conn.execute(select(github_mirror)).one()
        return Mirror.model_validate(dict(found._mapping)), queued

    return q.db.write(work)


def forget(q: Queue, repo: str) -> int:
    """Stop mirroring ``repo``: drop its outbox, links and comment links. GitHub is not
    touched. Returns how many links were dropped."""

    def work(conn: Connection) -> int:
        found = conn.execute(
            select(github_mirror.c.repo).where(func.lower(github_mirror.c.repo) == repo.lower())
        ).first()
        if found is None:
            raise InvalidInput(f"this database does not mirror {repo}", field="repo")
        conn.execute(delete(github_outbox))
        conn.execute(delete(github_comments))
        dropped = conn.execute(delete(github_links)).rowcount or 0
        conn.execute(delete(github_mirror))
        return int(dropped)

    return q.db.write(work)


def note_mirror(q: Queue, repo: str, **values: Any) -> None:
    """Record cursor, ETag, last push/import or last error on the mirror row."""
    allowed = {"import_since", "import_etag", "last_push_at", "last_import_at", "last_error"}
    unknown = set(values) - allowed
    if unknown:
        raise ValueError(f"not mirror fields: {sorted(unknown)}")

    def work(conn: Connection) -> None:
        conn.execute(update(github_mirror).where(github_mirror.c.repo == repo).values(**values))

    q.db.write(work)


def stopped(q: Queue, repo: str, reason: str) -> None:
    """Record that the GitHub worker for ``repo`` stopped because GitHub refused its token
    (an audit event of the queue: the ``github_stopped`` notice)."""

    def work(conn: Connection) -> None:
        record(
            q,
            conn,
            kind="sync_stopped",
            issue_id=None,
            number=None,
            actor="workq sync",
            now=q.now(),
            after={"repo": repo, "reason": reason},
        )

    q.db.write(work)
