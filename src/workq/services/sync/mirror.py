"""The local side of the GitHub mirror: links between local and GitHub issues, what an issue
still has to push, mirrored comments, and issues that arrive from GitHub."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from pydantic import BaseModel
from sqlalchemy import Connection, func, insert, select, update

from workq.db.engine import retry_lost_read
from workq.db.tables import comments, github_comments, github_links, issues, labels
from workq.domain import fields
from workq.schemas import DESCRIPTION_MAX, TITLE_MAX, Issue, IssueType, Priority, Status
from workq.services.handle import Queue, load, record, to_issue
from workq.services.queue.issues import DEFAULT_AGENT, insert_issue


class Link(BaseModel):
    """Where a local issue lives on GitHub."""

    repo: str
    gh_number: int
    url: str


class LinkState(BaseModel):
    issue_id: str
    number: int
    repo: str
    gh_number: int
    url: str
    snapshot: str  # JSON, read by workq.github.render.Snapshot
    remote_updated_at: datetime | None


class LocalComment(BaseModel):
    id: int
    kind: str
    body: str
    author: str | None
    created_at: datetime
    in_flight_since: datetime | None  # its POST was sent (or about to be); outcome unknown


class PushState(BaseModel):
    """Everything the worker needs to push one issue, read from one snapshot."""

    issue_id: str
    issue: Issue | None  # None: deleted locally
    link: LinkState | None
    comments: list[LocalComment]  # not yet on GitHub, oldest first


def _link(row: Any) -> LinkState:
    return LinkState.model_validate(dict(row._mapping))


@retry_lost_read
def github_link(q: Queue, number: int) -> Link | None:
    """The GitHub issue of local issue ``number``, if it has been pushed."""
    with q.db.read() as conn:
        row = conn.execute(
            select(github_links.c.repo, github_links.c.gh_number, github_links.c.url)
            .where(github_links.c.number == number)
            .order_by(github_links.c.linked_at.desc())
        ).first()
    return Link(repo=row.repo, gh_number=row.gh_number, url=row.url) if row else None


def push_state(q: Queue, issue_id: str) -> PushState:
    with q.db.read() as conn:
        row = conn.execute(select(issues).where(issues.c.id == issue_id)).first()
        issue = None
        if row is not None:
            names = conn.execute(
                select(labels.c.name).where(labels.c.issue_id == issue_id).order_by(labels.c.name)
            ).scalars()
            issue = to_issue(row, labels=list(names))
        link_row = conn.execute(
            select(github_links).where(github_links.c.issue_id == issue_id)
        ).first()
        pending: list[LocalComment] = []
        if row is not None:
            found = conn.execute(
                select(comments, github_comments.c.started_at)
                .outerjoin(github_comments, github_comments.c.comment_id == comments.c.id)
                .where(comments.c.issue_id == issue_id, github_comments.c.gh_comment_id.is_(None))
                .order_by(comments.c.id)
            )
            pending = [
                LocalComment(
                    id=c.id,
                    kind=c.kind,
                    body=c.body,
                    author=c.author,
                    created_at=c.created_at,
                    in_flight_since=c.started_at,
                )
                for c in found
            ]
    return PushState(
        issue_id=issue_id,
        issue=issue,
        link=_link(link_row) if link_row else None,
        comments=pending,
    )


def link_of_gh(q: Queue, repo: str, gh_number: int) -> LinkState | None:
    with q.db.read() as conn:
        row = conn.execute(
            select(github_links).where(
                func.lower(github_links.c.repo) == repo.lower(),
                github_links.c.gh_number == gh_number,
            )
        ).first()
    return _link(row) if row else None


def link_of_issue(q: Queue, issue_id: str) -> LinkState | None:
    with q.db.read() as conn:
        row = conn.execute(select(github_links).where(github_links.c.issue_id == issue_id)).first()
    return _link(row) if row else None


def issue_by_id(q: Queue, issue_id: str) -> Issue | None:
    with q.db.read() as conn:
        row = conn.execute(select(issues).where(issues.c.id == issue_id)).first()
        if row is None:
            return None
        names = conn.execute(
            select(labels.c.name).where(labels.c.issue_id == issue_id).order_by(labels.c.name)
        ).scalars()
        return to_issue(row, labels=list(names))


def save_link(
    q: Queue,
    *,
    issue_id: str,
    number: int,
    repo: str,
    gh_number: int,
    url: str,
    snapshot: str,
    remote_updated_at: datetime | None,
) -> None:
    def work(conn: Connection) -> None:
        _write_link(
            conn,
            issue_id=issue_id,
            number=number,
            repo=repo,
            gh_number=gh_number,
            url=url,
            snapshot=snapshot,
            remote_updated_at=remote_updated_at,
            now=q.now(),
        )

    q.db.write(work)


def _write_link(conn: Connection, **values: Any) -> None:
    now = values.pop("now")
    changed = conn.execute(
        update(github_links).where(github_links.c.issue_id == values["issue_id"]).values(**values)
    ).rowcount
    if not changed:
        conn.execute(insert(github_links).values(**values, linked_at=now))


def save_snapshot(
    q: Queue, issue_id: str, snapshot: str, remote_updated_at: datetime | None
) -> None:
    def work(conn: Connection) -> None:
        values: dict[str, Any] = {"snapshot": snapshot}
        if remote_updated_at is not None:
            values["remote_updated_at"] = remote_updated_at
        conn.execute(
            update(github_links).where(github_links.c.issue_id == issue_id).values(**values)
        )

    q.db.write(work)


def comment_started(q: Queue, comment_id: int) -> None:
    """Durably note that the comment's POST is about to be sent."""

    def work(conn: Connection) -> None:
        changed = conn.execute(
            update(github_comments)
            .where(github_comments.c.comment_id == comment_id)
            .values(started_at=q.now())
        ).rowcount
        if not changed:
            conn.execute(
                insert(github_comments).values(
                    comment_id=comment_id, gh_comment_id=None, started_at=q.now()
                )
            )

    q.db.write(work)


def comment_settled(q: Queue, comment_id: int, gh_comment_id: int | None) -> None:
    """The comment is on GitHub (``gh_comment_id``), or certainly is not (None)."""

    def work(conn: Connection) -> None:
        if gh_comment_id is None:
            conn.execute(github_comments.delete().where(github_comments.c.comment_id == comment_id))
        else:
            conn.execute(
                update(github_comments)
                .where(github_comments.c.comment_id == comment_id)
                .values(gh_comment_id=gh_comment_id)
            )

    q.db.write(work)


def record_sync_event(
    q: Queue,
    issue_id: str,
    number: int,
    kind: str,
    *,
    actor: str,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    push: bool = True,
) -> None:
    """Write a history event about the mirror (e.g. ``github_conflict``) for the issue.
    ``push=False``: the event concerns GitHub only and queues nothing to push."""
    hooked = q if push else replace(q, on_change=[])

    def work(conn: Connection) -> None:
        record(
            hooked,
            conn,
            kind=kind,
            issue_id=issue_id,
            number=number,
            actor=actor,
            now=q.now(),
            before=before,
            after=after,
        )

    q.db.write(work)


def create_from_github(
    q: Queue,
    *,
    repo: str,
    gh_number: int,
    url: str,
    title: str,
    description: str,
    priority: Priority,
    issue_type: IssueType,
    label_names: Sequence[str],
    done: bool,
    snapshot: str,
    remote_updated_at: datetime,
    actor: str,
) -> Issue:
    """A new local issue for a GitHub issue, linked to it in the same transaction (so an
    interrupted import never makes the same issue twice)."""
    checked_title = fields.title(title[:TITLE_MAX])
    checked_description = fields.description(description[:DESCRIPTION_MAX])
    names = fields.labels(label_names)

    def work(conn: Connection) -> Issue:
        now = q.now()
        issue_id, number = insert_issue(
            q,
            conn,
            title=checked_title,
            description=checked_description,
            priority=priority,
            issue_type=issue_type,
            agent=DEFAULT_AGENT,
            labels=names,
            actor=actor,
            now=now,
            done=done,
            about={"status": (Status.DONE if done else Status.OPEN).value, "github": url},
        )
        _write_link(
            conn,
            issue_id=issue_id,
            number=number,
            repo=repo,
            gh_number=gh_number,
            url=url,
            snapshot=snapshot,
            remote_updated_at=remote_updated_at,
            now=now,
        )
        return to_issue(load(conn, number), labels=names)

    return q.db.write(work)
