"""Listing issues: a page at a time by number, filtered, with each one's labels and what it
waits on; the cursor that continues a page."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Select, and_, exists, select

from workq.db.engine import retry_lost_read
from workq.db.tables import dependencies as deps
from workq.db.tables import issues
from workq.db.tables import labels as labels_t
from workq.domain import fields
from workq.errors import InvalidInput, bad_cursor
from workq.schemas import (
    PAGE_DEFAULT,
    PAGE_MAX,
    IssueListItem,
    IssuePage,
    IssueSummary,
    IssueType,
    Priority,
    Status,
)
from workq.services.handle import Queue, to_issue

_blocker = issues.alias("blocker")


def encode_cursor(number: int) -> str:
    return base64.urlsafe_b64encode(f"n:{number}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> int:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        kind, _, value = base64.urlsafe_b64decode(padded.encode()).decode().partition(":")
        if kind != "n":
            raise ValueError(kind)
        return int(value)
    except (ValueError, UnicodeDecodeError):
        raise bad_cursor() from None


def _filtered(
    stmt: Select[Any],
    status: str | Status | None,
    priority: str | Priority | None,
    issue_type: str | IssueType | None,
    agent: str | None,
    label: str | None,
    claimed_by: str | None,
) -> Select[Any]:
    if status is not None:
        try:
            stmt = stmt.where(issues.c.status == Status(status).value)
        except ValueError:
            raise InvalidInput(
                f"status must be one of open, in_progress, done (got {status!r})", field="status"
            ) from None
    if priority is not None:
        stmt = stmt.where(issues.c.priority == fields.priority(priority).rank)
    if issue_type is not None:
        stmt = stmt.where(issues.c.issue_type == fields.issue_type(issue_type).value)
    if agent is not None:
        stmt = stmt.where(issues.c.agent == agent)
    if claimed_by is not None:
        stmt = stmt.where(issues.c.claimed_by == claimed_by)
    if label is not None:
        stmt = stmt.where(
            exists().where(and_(labels_t.c.issue_id == issues.c.id, labels_t.c.name == label))
        )
    return stmt


def _listed(conn: Connection, page: Sequence[Any]) -> list[IssueListItem]:
    """The page's rows with their labels and the unfinished issues each waits on."""
    label_map: dict[str, list[str]] = {}
    if page:
        for issue_id, name in conn.execute(
            select(labels_t.c.issue_id, labels_t.c.name)
            .where(labels_t.c.issue_id.in_([r.id for r in page]))
            .order_by(labels_t.c.name)
        ):
            label_map.setdefault(issue_id, []).append(name)
    waiting = [r.id for r in page if r.open_blockers]
    waits_on: dict[str, list[int]] = {}
    if waiting:
        for issue_id, number in conn.execute(
            select(deps.c.blocked_id, _blocker.c.number)
            .join(deps, deps.c.blocker_id == _blocker.c.id)
            .where(deps.c.blocked_id.in_(waiting), _blocker.c.status != Status.DONE.value)
            .order_by(_blocker.c.number)
        ):
            waits_on.setdefault(issue_id, []).append(number)
    return [to_issue(r, labels=label_map.get(r.id)).listed(waits_on.get(r.id, [])) for r in page]


@retry_lost_read
def list_issues(
    q: Queue,
    *,
    status: str | Status | None = None,
    priority: str | Priority | None = None,
    issue_type: str | IssueType | None = None,
    agent: str | None = None,
    label: str | None = None,
    claimed_by: str | None = None,
    limit: int = PAGE_DEFAULT,
    cursor: str | None = None,
) -> IssuePage:
    if not 1 <= limit <= PAGE_MAX:
        raise InvalidInput(f"limit must be between 1 and {PAGE_MAX}", field="limit")
    stmt = select(issues).order_by(issues.c.number).limit(limit + 1)
    stmt = _filtered(stmt, status, priority, issue_type, agent, label, claimed_by)
    if cursor:
        stmt = stmt.where(issues.c.number > decode_cursor(cursor))
    with q.db.read() as conn:
        rows = list(conn.execute(stmt))
        page = rows[:limit]
        items = _listed(conn, page)
    has_more = len(rows) > limit
    return IssuePage(
        items=items,
        has_more=has_more,
        next_cursor=encode_cursor(page[-1].number) if has_more else None,
    )


@retry_lost_read
def summaries(q: Queue, numbers: Sequence[int]) -> list[IssueSummary]:
    with q.db.read() as conn:
        rows = conn.execute(select(issues).where(issues.c.number.in_(list(numbers))))
        return [to_issue(r).summary() for r in rows]
