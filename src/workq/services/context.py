"""What every service needs: the database, the lease length and a clock."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Row, insert, select

from workq.db.engine import Database
from workq.db.tables import events, issues
from workq.errors import NotFound
from workq.schemas import Issue, IssueType, Priority, Status


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class Queue:
    """The handle every service takes. Cheap to build; holds no connection."""

    db: Database
    lease_seconds: int = 30 * 60
    clock: Callable[[], datetime] = field(default=utcnow)
    # Called with (conn, issue_id, number, kind) inside every mutating transaction
    # (the GitHub outbox hangs here). Empty by default.
    on_change: list[Callable[[Connection, str, int, str], None]] = field(default_factory=list)

    def now(self) -> datetime:
        return self.clock()

    def lease_until(self, now: datetime) -> datetime:
        return now + timedelta(seconds=self.lease_seconds)


def new_id() -> str:
    return uuid.uuid4().hex


_record_event = insert(events)


def record(
    q: Queue,
    conn: Connection,
    *,
    kind: str,
    issue_id: str | None,
    number: int | None,
    actor: str | None,
    now: datetime,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
) -> None:
    """Write the audit event of a mutation, in the mutation's own transaction."""
    conn.execute(
        _record_event,
        {
            "issue_id": issue_id,
            "number": number,
            "kind": kind,
            "actor": actor,
            "before": _dump(before),
            "after": _dump(after),
            "created_at": now,
        },
    )
    if issue_id is not None and number is not None:
        for hook in q.on_change:
            hook(conn, issue_id, number, kind)


def _dump(data: dict[str, Any] | None) -> str | None:
    if data is None:
        return None
    return json.dumps(data, default=_json_default, sort_keys=True)


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def load(conn: Connection, number: int, *, for_update: bool = False) -> Row[Any]:
    """The issue row with this number, or NotFound."""
    stmt = select(issues).where(issues.c.number == number)
    if for_update and conn.dialect.name != "sqlite":
        stmt = stmt.with_for_update()
    row = conn.execute(stmt).first()
    if row is None:
        raise NotFound(f"Issue #{number} not found", number=number)
    return row


def to_issue(
    row: Row[Any],
    *,
    labels: list[str] | None = None,
    blocked_by: list[int] | None = None,
    blocks: list[int] | None = None,
) -> Issue:
    m = row._mapping
    return Issue(
        id=m["id"],
        number=m["number"],
        title=m["title"],
        description=m["description"],
        status=Status(m["status"]),
        priority=Priority.from_rank(m["priority"]),
        issue_type=IssueType(m["issue_type"]),
        agent=m["agent"],
        is_blocked=bool(m["is_blocked"]),
        blocked_reason=m["blocked_reason"],
        open_blockers=m["open_blockers"],
        claimed_by=m["claimed_by"],
        claimed_at=m["claimed_at"],
        lease_expires_at=m["lease_expires_at"],
        created_at=m["created_at"],
        updated_at=m["updated_at"],
        closed_at=m["closed_at"],
        labels=labels or [],
        blocked_by=blocked_by or [],
        blocks=blocks or [],
    )
