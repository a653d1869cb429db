"""The pull request opened for an issue (by submit_pr): recorded, read with the issue, and
settled once when a sync sees it merged, which completes the issue."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pydantic import BaseModel
from sqlalchemy import Connection, bindparam, delete, insert, select, update

from workq.db.engine import retry_lost_read
from workq.db.prepared import Prepared
from workq.db.tables import github_pulls
from workq.domain import fields
from workq.domain.authority import Authority
from workq.domain.decisions import Action
from workq.schemas import Completed
from workq.services.handle import Queue, load, record
from workq.services.queue import claims, door

MERGED_KIND = "pull_request_merged"
OPENED_KIND = "pull_request_opened"


class PullLink(BaseModel):
    number: int  # the workq issue
    repo: str
    pr_number: int
    url: str
    branch: str
    opened_at: datetime
    merged_at: datetime | None


def _link(row: object) -> PullLink:
    return PullLink.model_validate(dict(row._mapping))  # type: ignore[attr-defined]


def opened(
    q: Queue,
    number: int,
    *,
    repo: str,
    pr_number: int,
    url: str,
    branch: str,
    by: Authority,
    actor: str | None = None,
) -> PullLink:
    """Record that pull request ``pr_number`` of ``repo`` now carries issue ``number`` (it
    replaces an earlier one), if the door still lets ``by`` land it."""
    fields.number(number)

    def work(conn: Connection) -> PullLink:
        let = door.admit(q, conn, Action.LAND, number, by)
        row, now = let.row, let.now
        conn.execute(delete(github_pulls).where(github_pulls.c.issue_id == row.id))
        values = {
            "issue_id": row.id,
            "number": number,
            "repo": repo,
            "pr_number": pr_number,
            "url": url,
            "branch": branch,
            "opened_at": now,
            "merged_at": None,
        }
        conn.execute(insert(github_pulls).values(values))
        record(
            q,
            conn,
            kind=OPENED_KIND,
            issue_id=row.id,
            number=number,
            actor=actor,
            now=now,
            after={"repo": repo, "pr_number": pr_number, "url": url, "branch": branch},
        )
        return PullLink(
            number=number,
            repo=repo,
            pr_number=pr_number,
            url=url,
            branch=branch,
            opened_at=now,
            merged_at=None,
        )

    return q.db.write(work)


# What a PullLink is read from.
_LINK = (
    github_pulls.c.number,
    github_pulls.c.repo,
    github_pulls.c.pr_number,
    github_pulls.c.url,
    github_pulls.c.branch,
    github_pulls.c.opened_at,
    github_pulls.c.merged_at,
)


# Asked by every issue_get: prepared (db/prepared.py), not compiled per call.
_of_issue = Prepared(select(*_LINK).where(github_pulls.c.issue_id == bindparam("issue_id")))


def of_issue_conn(conn: Connection, issue_id: str) -> PullLink | None:
    rows = _of_issue.rows(conn, {"issue_id": issue_id})
    return PullLink.model_validate(rows[0]._asdict()) if rows else None


@retry_lost_read
def of_issue(q: Queue, number: int) -> PullLink | None:
    with q.db.read() as conn:
        row = load(conn, fields.number(number))
        return of_issue_conn(conn, row.id)


@retry_lost_read
def unmerged(q: Queue, repo: str) -> Sequence[PullLink]:
    """The pull requests of ``repo`` not yet seen merged, oldest first."""
    with q.db.read() as conn:
        rows = conn.execute(
            select(*_LINK)
            .where(github_pulls.c.repo == repo, github_pulls.c.merged_at.is_(None))
            .order_by(github_pulls.c.opened_at)
        ).all()
    return [_link(r) for r in rows]


def merged(q: Queue, link: PullLink, merged_at: datetime, *, actor: str) -> Completed | None:
    """The pull request was merged upstream: complete the issue (whoever holds it) and mark
    the pull request merged, once. None when an earlier pass already did."""
    upstream = Authority.overriding("its pull request was merged", who=actor)
    done = claims.complete(q, link.number, upstream, actor=actor)

    def work(conn: Connection) -> bool:
        row = load(conn, link.number)
        changed = conn.execute(
            update(github_pulls)
            .where(
                github_pulls.c.issue_id == row.id,
                github_pulls.c.pr_number == link.pr_number,
                github_pulls.c.merged_at.is_(None),
            )
            .values(merged_at=merged_at)
        ).rowcount
        if changed:
            record(
                q,
                conn,
                kind=MERGED_KIND,
                issue_id=row.id,
                number=link.number,
                actor=actor,
                now=q.now(),
                after={"pr_number": link.pr_number, "url": link.url},
            )
        return bool(changed)

    return done if q.db.write(work) else None
