"""Which registered repository an issue is in: a column of the issue, set in the caller's
transaction. The repositories themselves (registering, worktrees) are the workspaces'."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, select, update

from workq.db.tables import issues, repositories
from workq.errors import NotFound
from workq.services.handle import Queue, load, record


def registered(conn: Connection, name: str) -> Any:
    """The row of registered repository ``name``, or NOT_FOUND."""
    found = conn.execute(select(repositories).where(repositories.c.name == name)).first()
    if found is None:
        raise NotFound(
            f"repository {name!r} is not registered",
            repo=name,
            hint="list them with agit_list_repos (workq repo list), or add it (workq repo add)",
        )
    return found


def place(q: Queue, conn: Connection, number: int, name: str | None, *, actor: str | None) -> None:
    """In the caller's transaction: issue ``number`` in registered repository ``name`` (None:
    in none), recorded as ``repository_set`` when that changes it. NOT_FOUND for a name no
    repository has."""
    if name is not None:
        registered(conn, name)
    issue = load(conn, number, for_update=True)
    if issue.repository == name:
        return
    now = q.now()
    conn.execute(
        update(issues).where(issues.c.id == issue.id).values(repository=name, updated_at=now)
    )
    record(
        q,
        conn,
        kind="repository_set",
        issue_id=issue.id,
        number=number,
        actor=actor,
        now=now,
        before={"repository": issue.repository},
        after={"repository": name},
    )
