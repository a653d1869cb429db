"""Comments on issues, and the audit history of an issue."""

from __future__ import annotations

import json

from sqlalchemy import Connection, insert, select

from workq.db.engine import retry_lost_read
from workq.db.tables import IssueRecord, events
from workq.db.tables import comments as comments_t
from workq.domain import fields
from workq.errors import InvalidInput, NotFound
from workq.schemas import PAGE_MAX, Comment, CommentKind, Event
from workq.services.handle import Queue, load, record


def comment(
    q: Queue,
    number: int,
    body: str,
    *,
    kind: str | CommentKind = CommentKind.NOTE,
    author: str | None = None,
) -> Comment:
    fields.number(number)
    text = fields.comment(body)
    try:
        kind = CommentKind(kind)
    except ValueError:
        allowed = ", ".join(k.value for k in CommentKind)
        raise InvalidInput(f"kind must be one of {allowed}", field="kind") from None
    if author is not None:
        fields.name(author, "author", limit=128)

    chosen = kind

    def work(conn: Connection) -> Comment:
        return add(q, conn, load(conn, number, for_update=True), text, kind=chosen, author=author)

    return q.db.write(work)


def add(
    q: Queue,
    conn: Connection,
    row: IssueRecord,
    text: str,
    *,
    kind: CommentKind = CommentKind.NOTE,
    author: str | None,
) -> Comment:
    """Store a comment (``text`` already checked with ``fields.comment``) in the caller's
    transaction: a comment that belongs to a change goes in with it, or not at all."""
    now = q.now()
    new_id = conn.execute(
        insert(comments_t)
        .values(issue_id=row.id, kind=kind.value, body=text, author=author, created_at=now)
        .returning(comments_t.c.id)
    ).scalar_one()
    record(
        q,
        conn,
        kind="commented",
        issue_id=row.id,
        number=row.number,
        actor=author,
        now=now,
        after={"comment_id": new_id, "kind": kind.value},
    )
    return Comment(
        id=new_id, number=row.number, kind=kind, body=text, author=author, created_at=now
    )


@retry_lost_read
def comments(q: Queue, number: int, *, limit: int = 50) -> list[Comment]:
    fields.number(number)
    if not 1 <= limit <= PAGE_MAX:
        raise InvalidInput(f"limit must be between 1 and {PAGE_MAX}", field="limit")
    with q.db.read() as conn:
        row = load(conn, number)
        rows = conn.execute(
            select(comments_t)
            .where(comments_t.c.issue_id == row.id)
            .order_by(comments_t.c.id.desc())
            .limit(limit)
        )
        found = [
            Comment(
                id=r.id,
                number=number,
                kind=CommentKind(r.kind),
                body=r.body,
                author=r.author,
                created_at=r.created_at,
            )
            for r in rows
        ]
    return found[::-1]


@retry_lost_read
def history(q: Queue, number: int, *, limit: int = 50, after_id: int = 0) -> list[Event]:
    """Events of an issue, oldest first. Works for deleted issues too."""
    fields.number(number)
    if not 1 <= limit <= PAGE_MAX:
        raise InvalidInput(f"limit must be between 1 and {PAGE_MAX}", field="limit")
    with q.db.read() as conn:
        rows = conn.execute(
            select(events)
            .where(events.c.number == number, events.c.id > after_id)
            .order_by(events.c.id)
            .limit(limit)
        )
        found = [
            Event(
                id=r.id,
                number=number,
                kind=r.kind,
                actor=r.actor,
                before=json.loads(r.before) if r.before else None,
                after=json.loads(r.after) if r.after else None,
                created_at=r.created_at,
            )
            for r in rows
        ]
    if not found and after_id == 0:
        raise NotFound(f"Issue #{number} has no history: it never existed", number=number)
    return found
