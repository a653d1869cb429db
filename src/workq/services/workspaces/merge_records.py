"""Where merged work went: the events a merge records, and what a merge asked again after a
lost answer is told (``landing_of``)."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, select

from workq.db.tables import events, issues, repositories
from workq.errors import NotFound
from workq.services.handle import Queue, load, record


def record_merge(
    q: Queue,
    w: Any,
    actor: str | None,
    already: bool,
    landed: str | None,
    *,
    kept: str | None = None,
) -> None:
    """The worktree_merged event: who merged, the branch, the commit that landed it (and
    why its worktree was kept, when it was)."""

    def work(conn: Connection) -> None:
        after: dict[str, Any] = {"branch": w.branch, "commit": landed, "resumed": already}
        if kept:
            after["worktree_kept"] = kept
        record(
            q,
            conn,
            kind="worktree_merged",
            issue_id=w.issue_id,
            number=w.number,
            actor=actor,
            now=q.now(),
            after=after,
        )

    q.db.write(work)


def record_landed(q: Queue, number: int, branch: str, into: str, merged: str, actor: str) -> None:
    """merge_to_main's event for a branch of a shared checkout that landed through its
    pull request: what a merge asked again answers (``landing_of``)."""

    def work(conn: Connection) -> None:
        row = load(conn, number)
        after = {"branch": branch, "into": into, "commit": merged, "through": "pull request"}
        record(
            q,
            conn,
            kind="merged_to_main",
            issue_id=row.id,
            number=number,
            actor=actor,
            now=q.now(),
            after=after,
        )

    with contextlib.suppress(NotFound):
        q.db.write(work)


@dataclass(frozen=True)
class Landed:
    """Where a done issue's work landed, as its merge recorded it."""

    branch: str
    into: str | None
    commit: str | None


def landing_of(q: Queue, number: int) -> Landed | None:
    """The last merge recorded for issue ``number`` (a worktree's, or a shared checkout's
    merge_to_main) when the issue is done: what a merge run again after a lost answer is
    told, instead of looking for a branch that is gone."""
    with q.db.read() as conn:
        status = conn.execute(select(issues.c.status).where(issues.c.number == number)).scalar()
        if status != "done":
            return None
        found = conn.execute(
            select(events.c.after)
            .where(
                events.c.number == number,
                events.c.kind.in_(("worktree_merged", "merged_to_main")),
            )
            .order_by(events.c.id.desc())
            .limit(1)
        ).scalar()
        if found is None:
            return None
        after = json.loads(found)
        into = after.get("into")
        if into is None:  # a worktree's merge: into its repository's default branch
            into = conn.execute(
                select(repositories.c.default_branch)
                .join(issues, issues.c.repository == repositories.c.name)
                .where(issues.c.number == number)
            ).scalar()
    return Landed(branch=after["branch"], into=into, commit=after.get("commit"))
