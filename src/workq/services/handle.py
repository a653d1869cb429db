"""What every service needs: the database, the lease length, a clock, and the hooks by which
the rooms above the queue act inside its changes.

The queue is the floor: no module of ``services/queue`` imports a room above it. A room that
must act when the queue changes registers a hook here, where it is wired up
(``services/runtime.py``): the GitHub outbox is a :class:`ChangeHook`, the worktrees'
"unmerged work" refusal is an ``ending`` hook, the hand-off that saves a claim's work when
it ends is an ``ended`` hook.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple, Protocol

from sqlalchemy import Connection, Select, bindparam, insert, select
from sqlalchemy.sql.dml import Insert

from workq.db.engine import Database
from workq.db.prepared import Prepared
from workq.db.tables import IssueRecord, events, issues
from workq.domain import dates, leases
from workq.errors import NotFound
from workq.schemas import Issue, IssueType, Priority, Status

log = logging.getLogger("workq.services")


def utcnow() -> datetime:
    return datetime.now(UTC)


class ChangeHook(Protocol):
    """Acts inside every transaction that changes an issue (after its audit event)."""

    def __call__(self, conn: Connection, issue_id: str, number: int, kind: str) -> None: ...

    def chained(self, changes: Select[Any]) -> Insert | None:
        """The same write as one part of a single-statement change (PostgreSQL's claim):
        an INSERT (with a RETURNING clause) fed by ``changes``, whose columns are the issue's id and
        number, the change's kind and the time. None if this hook cannot be a part: then
        such changes take the general path, which calls the hook."""
        ...


class Ending(NamedTuple):
    """Asked before a claim ends by completion or release. ``concerns``, inside the change's
    transaction once the door let it through: whether the hook has anything to look at for
    the issue (one small read; a change whose issue concerns no hook asks nothing more and
    commits). If it has, the transaction is left unwritten and ``ask`` is called outside
    any (it may ask git) with the issue's number, what ends it ("completing",
    "releasing") and a check to run first, only if it finds something to refuse (who holds
    the claim: that refusal must win); it refuses by raising, else the change runs again.
    """

    concerns: Callable[[Connection, int], bool]
    ask: Callable[[Queue, int, str, Callable[[], None]], None]


# Called after a claim ended without completing, once the change that ended it has
# committed (outside any transaction: a hook may ask git): the issue's number, how it
# ended and who held it. How: "released", "blocked", "taken_over" (a lapsed lease taken by
# the next claim), "forced" (force_claim). A hook that fails is logged, never raised: the
# change it follows is done (``claim_ended``). The hand-off saves the claim's work here.
Ended = Callable[["Queue", int, str, "str | None"], None]

# Called inside the transaction of every audit event of one kind (``Queue.on_event``): the
# connection, the event's kind and its issue's number (None: an event of the queue, not of
# an issue). The notices' outbox hangs here. Never asked for a claim's own events
# ("claimed", "claim_takeover"): PostgreSQL's one-statement claim writes those in SQL.
EventHook = Callable[[Connection, str, int | None], None]


@dataclass
class Queue:
    """The handle every service takes. Cheap to build; holds no connection."""

    db: Database
    lease_seconds: int = 30 * 60
    clock: Callable[[], datetime] = field(default=utcnow)
    # Inside every mutating transaction (the GitHub outbox hangs here). Empty by default.
    on_change: list[ChangeHook] = field(default_factory=list)
    # Before a claim ends (the worktrees refuse to lose unmerged commits). Empty by default.
    ending: list[Ending] = field(default_factory=list)
    # After a claim ended without completing (the hand-off saves its work). Empty by default.
    ended: list[Ended] = field(default_factory=list)
    # After the audit event of a kind in the map (the notices' outbox). Empty by default.
    on_event: dict[str, list[EventHook]] = field(default_factory=dict)
    # "enforce" or "warn": what another holder's reserved paths do to a claim.
    reservations: str = "enforce"
    # "evidence" or "trust": whether testsPassed and merges need stored gate runs
    # (services/coding/gates.py). Serving and the CLI take Settings.tests_gate ("evidence").
    tests_gate: str = "trust"
    # The gate preset of a repository without a gate table ("none": no gates).
    default_gates: str = "none"

    def now(self) -> datetime:
        return self.clock()

    def lease_until(self, now: datetime) -> datetime:
        return leases.until(now, self.lease_seconds)


def claim_ended(q: Queue, number: int, how: str, holder: str | None) -> None:
    """Tell ``q``'s ``ended`` hooks that ``holder``'s claim of issue ``number`` ended
    (``how``), after the change committed. A hook's failure (git broken, a disk full) is
    logged and the next hook asked: the change it follows stands."""
    for hook in q.ended:
        try:
            hook(q, number, how, holder)
        except Exception:  # logged: the claim that ended is not undone by it
            log.warning(
                "after issue #%s's claim ended (%s): a hook failed", number, how, exc_info=True
            )


def new_id() -> str:
    return uuid.uuid4().hex


_record_event = Prepared(
    insert(events).values(
        issue_id=bindparam("issue_id"),
        number=bindparam("number"),
        kind=bindparam("kind"),
        actor=bindparam("actor"),
        before=bindparam("before"),
        after=bindparam("after"),
        created_at=bindparam("created_at"),
    )
)


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
    _record_event.count(
        conn,
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
    for follow in q.on_event.get(kind, ()):
        follow(conn, kind, number)


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return dates.iso(value)
    return str(value)


# One encoder for every event (json.dumps builds one per call when given options).
_encoder = json.JSONEncoder(default=_json_default, sort_keys=True)


def _dump(data: dict[str, Any] | None) -> str | None:
    return None if data is None else _encoder.encode(data)


_load = Prepared(select(issues).where(issues.c.number == bindparam("number")), IssueRecord)
_load_locked = Prepared(
    select(issues).where(issues.c.number == bindparam("number")).with_for_update(), IssueRecord
)


def locks_rows(conn: Connection) -> bool:
    """Whether a read for a change must lock its row: on PostgreSQL; SQLite's write
    transaction has locked the whole file already."""
    return conn.dialect.name != "sqlite"


def load(conn: Connection, number: int, *, for_update: bool = False) -> IssueRecord:
    """The issue row with this number (attribute access by column name), or NotFound.

    ``for_update`` locks the row where that is needed (``locks_rows``).
    """
    stmt = _load_locked if for_update and locks_rows(conn) else _load
    found = stmt.rows(conn, {"number": number})
    if not found:
        raise not_found(number)
    return found[0]


def not_found(number: int) -> NotFound:
    return NotFound(f"Issue #{number} not found", number=number)


def to_issue(
    row: Any,
    *,
    labels: list[str] | None = None,
    blocked_by: list[int] | None = None,
    blocks: list[int] | None = None,
    touches: list[str] | None = None,
) -> Issue:
    return Issue(
        id=row.id,
        number=row.number,
        title=row.title,
        description=row.description,
        status=Status(row.status),
        priority=Priority.from_rank(row.priority),
        issue_type=IssueType(row.issue_type),
        agent=row.agent,
        is_blocked=bool(row.is_blocked),
        blocked_reason=row.blocked_reason,
        open_blockers=row.open_blockers,
        claimed_by=row.claimed_by,
        claimed_at=row.claimed_at,
        lease_expires_at=row.lease_expires_at,
        created_at=row.created_at,
        updated_at=row.updated_at,
        closed_at=row.closed_at,
        labels=labels or [],
        blocked_by=blocked_by or [],
        blocks=blocks or [],
        repository=getattr(row, "repository", None),
        touches=touches or [],
    )
