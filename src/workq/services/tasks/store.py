"""The tasks table: a tool call answered later (the MCP Tasks extension; the face is
server/tasks.py). A task lives in the database, so any process of a server, and a
restarted one, answers for it.

- A task belongs to its ``owner`` (the caller's run id): for anyone else it does not exist
  (``TaskNotFound``, the same answer as for an id never issued).
- Its id is unguessable (``secrets.token_urlsafe``): 192 random bits.
- ``working`` becomes a terminal status once, by a compare-and-set on the status: what
  completes a task (a claim, in the claim's own transaction, see kinds) and what cancels it
  race on one row, and exactly one wins.
- Its time to live runs from its creation: long enough for its wait and for reading its
  answer. A claim completed for it and not read by then goes back to the queue, recorded
  in the issue's history (``sweep``); so does a claim whose task was cancelled before its
  answer was read. A settled task is deleted a while after its time to live.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Collection, Iterable
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from sqlalchemy import Connection, and_, delete, func, or_, select, update

from workq.db.engine import retry_lost_read
from workq.db.tables import tasks
from workq.domain import dates
from workq.errors import TaskExpired, TaskNotFound
from workq.schemas import TaskStatus, TaskView
from workq.services.handle import Queue
from workq.services.tasks import kicks

WORKING, COMPLETED, FAILED, CANCELLED = (
    TaskStatus.WORKING.value,
    TaskStatus.COMPLETED.value,
    TaskStatus.FAILED.value,
    TaskStatus.CANCELLED.value,
)
# How often a client should poll a task (the extension's pollIntervalMs): a waiting claim
# is completed by the server the moment work arrives; polling only fetches it.
POLL_MS = 1000
# How long after its wait a task's answer may still be read (its ttl is the wait plus this).
READ_GRACE_SECONDS = 600
# How long a task is kept past its time to live before it is deleted.
PURGE_AFTER_SECONDS = 3600
# How the answer of a task reads while what completes it is still being finished (a claim's
# worktree and briefing, made after the claim committed): the face finishes it first.
UNFINISHED = "unfinished"


class TaskRecord(NamedTuple):
    """A row of ``tasks``, every column in table order."""

    id: str
    owner: str
    kind: str
    arguments: str
    status: str
    status_message: str | None
    result: str | None
    error: str | None
    created_at: datetime
    updated_at: datetime
    ttl_ms: int | None
    poll_interval_ms: int
    deadline: datetime | None
    number: int | None
    fence: int | None
    read_at: datetime | None
    released: bool

    def args(self) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(self.arguments)
        return found

    def answer(self) -> dict[str, Any] | None:
        if self.result is None:
            return None
        found: dict[str, Any] = json.loads(self.result)
        return found

    def expires_at(self) -> datetime | None:
        if self.ttl_ms is None:
            return None
        return self.created_at + timedelta(milliseconds=self.ttl_ms)

    def expired(self, now: datetime) -> bool:
        ends = self.expires_at()
        return ends is not None and now >= ends

    def unfinished(self) -> bool:
        found = self.answer()
        return bool(found and found.get(UNFINISHED))

    def view(self) -> TaskView:
        answer = self.answer()
        if answer is not None:
            answer = {k: v for k, v in answer.items() if k != UNFINISHED}
        return TaskView(
            id=self.id,
            kind=self.kind,
            status=TaskStatus(self.status),
            status_message=self.status_message,
            created_at=self.created_at,
            updated_at=self.updated_at,
            ttl_ms=self.ttl_ms,
            poll_interval_ms=self.poll_interval_ms,
            answer=answer,
            error=json.loads(self.error) if self.error else None,
            number=self.number,
            fence=self.fence,
        )


def dump(data: dict[str, Any]) -> str:
    return json.dumps(data, default=_json_default, sort_keys=True)


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return dates.iso(value)
    return str(value)


def new_id() -> str:
    """An unguessable task id: 24 random bytes, URL-safe (32 characters)."""
    return secrets.token_urlsafe(24)


def _record(row: Any) -> TaskRecord:
    return TaskRecord(**row._mapping)


def create(
    q: Queue,
    *,
    owner: str,
    kind: str,
    arguments: dict[str, Any],
    wait_seconds: float | None,
    status_message: str | None = None,
) -> TaskRecord:
    """A new working task of ``owner``, durable when this returns (a ``tasks/get`` of it
    from any process finds it); its wait ends after ``wait_seconds`` (None: no deadline),
    and its ttl is that wait plus ``READ_GRACE_SECONDS``."""
    task_id = new_id()
    wait = timedelta(seconds=wait_seconds or 0)

    def work(conn: Connection) -> TaskRecord:
        now = q.now()
        values: dict[str, Any] = {
            "id": task_id,
            "owner": owner,
            "kind": kind,
            "arguments": dump(arguments),
            "status": WORKING,
            "status_message": status_message,
            "result": None,
            "error": None,
            "created_at": now,
            "updated_at": now,
            "ttl_ms": int((wait.total_seconds() + READ_GRACE_SECONDS) * 1000),
            "poll_interval_ms": POLL_MS,
            "deadline": now + wait if wait_seconds is not None else None,
            "number": None,
            "fence": None,
            "read_at": None,
            "released": False,
        }
        conn.execute(tasks.insert().values(**values))
        return TaskRecord(**values)

    made = q.db.write(work)
    kicks.kick()
    return made


@retry_lost_read
def load(q: Queue, task_id: str) -> TaskRecord | None:
    with q.db.read() as conn:
        row = conn.execute(select(tasks).where(tasks.c.id == task_id)).first()
    return _record(row) if row is not None else None


def owned(q: Queue, task_id: str, owner: str) -> TaskRecord:
    """Task ``task_id`` of ``owner``.

    Raises:
        TaskNotFound: no such task, or another caller's (the same answer: whether it
            exists is not told).
        TaskExpired: its time to live is over.
    """
    if not isinstance(task_id, str) or not 0 < len(task_id) <= 64:
        raise TaskNotFound()
    found = load(q, task_id)
    if found is None or not secrets.compare_digest(found.owner, owner):
        raise TaskNotFound()
    if found.expired(q.now()):
        raise TaskExpired()
    return found


def complete(
    conn: Connection,
    task_id: str,
    now: datetime,
    answer: dict[str, Any],
    *,
    message: str | None = None,
    number: int | None = None,
    fence: int | None = None,
) -> bool:
    """Complete working task ``task_id`` with ``answer`` (and the claim it received, if
    any), inside the caller's transaction; False if it is no longer working (cancelled,
    completed by another process)."""
    done = conn.execute(
        update(tasks)
        .where(tasks.c.id == task_id, tasks.c.status == WORKING)
        .values(
            status=COMPLETED,
            status_message=message,
            result=dump(answer),
            number=number,
            fence=fence,
            updated_at=now,
        )
    )
    return done.rowcount == 1


def complete_now(
    q: Queue, task_id: str, answer: dict[str, Any], *, message: str | None = None
) -> bool:
    """``complete`` in a transaction of its own."""
    return q.db.write(lambda conn: complete(conn, task_id, q.now(), answer, message=message))


def finished(q: Queue, task_id: str, answer: dict[str, Any], *, message: str | None = None) -> bool:
    """Replace the unfinished answer of completed task ``task_id`` with ``answer``."""

    def work(conn: Connection) -> bool:
        done = conn.execute(
            update(tasks)
            .where(tasks.c.id == task_id, tasks.c.status == COMPLETED, tasks.c.read_at.is_(None))
            .values(result=dump(answer), status_message=message, updated_at=q.now())
        )
        return done.rowcount == 1

    return q.db.write(work)


def mark_read(q: Queue, task_id: str) -> bool:
    """The answer of completed task ``task_id`` is being delivered: from now on it is the
    client's (not released when its ttl ends). False if it is no longer completed (a
    cancel won the race): then it must not be delivered."""

    def work(conn: Connection) -> bool:
        now = q.now()
        done = conn.execute(
            update(tasks)
            .where(tasks.c.id == task_id, tasks.c.status == COMPLETED)
            .values(read_at=func.coalesce(tasks.c.read_at, now))
        )
        return done.rowcount == 1

    return q.db.write(work)


def cancel(q: Queue, task_id: str, message: str) -> TaskRecord | None:
    """Cancel task ``task_id``: a working one, or a completed one whose answer nobody read
    yet (its claim is then to be released: ``released`` is false). None when there is
    nothing to cancel (already settled, or its answer was read: the cancel loses)."""

    def work(conn: Connection) -> TaskRecord | None:
        now = q.now()
        done = conn.execute(
            update(tasks)
            .where(
                tasks.c.id == task_id,
                or_(
                    tasks.c.status == WORKING,
                    and_(tasks.c.status == COMPLETED, tasks.c.read_at.is_(None)),
                ),
            )
            .values(status=CANCELLED, status_message=message, updated_at=now)
        )
        if done.rowcount != 1:
            return None
        row = conn.execute(select(tasks).where(tasks.c.id == task_id)).one()
        return _record(row)

    return q.db.write(work)


@retry_lost_read
def unsettled_of(q: Queue, owner: str) -> list[str]:
    """The ids of ``owner``'s tasks still working, or completed and not read."""
    with q.db.read() as conn:
        rows = conn.execute(
            select(tasks.c.id).where(
                tasks.c.owner == owner,
                or_(
                    tasks.c.status == WORKING,
                    and_(tasks.c.status == COMPLETED, tasks.c.read_at.is_(None)),
                ),
            )
        )
        return [r.id for r in rows]


@retry_lost_read
def working(q: Queue, kinds: Collection[str], *, limit: int = 10_000) -> list[TaskRecord]:
    """The working tasks of ``kinds``, oldest first (who waited longest is served first)."""
    with q.db.read() as conn:
        rows = conn.execute(
            select(tasks)
            .where(tasks.c.status == WORKING, tasks.c.kind.in_(list(kinds)))
            .order_by(tasks.c.created_at, tasks.c.id)
            .limit(limit)
        )
        return [_record(r) for r in rows]


@retry_lost_read
def any_working(q: Queue, kinds: Collection[str]) -> bool:
    with q.db.read() as conn:
        found = conn.execute(
            select(tasks.c.id)
            .where(tasks.c.status == WORKING, tasks.c.kind.in_(list(kinds)))
            .limit(1)
        ).first()
    return found is not None


@retry_lost_read
def unclaimed_leftovers(q: Queue) -> list[TaskRecord]:
    """Tasks holding a claim nobody will receive: completed and unread past their ttl, or
    cancelled (failed) with their claim not yet released."""
    now = q.now()
    with q.db.read() as conn:
        rows = conn.execute(
            select(tasks).where(
                tasks.c.number.is_not(None),
                tasks.c.released.is_(False),
                tasks.c.read_at.is_(None),
                tasks.c.status.in_([COMPLETED, CANCELLED, FAILED]),
            )
        )
        found = [_record(r) for r in rows]
    return [t for t in found if t.status != COMPLETED or t.expired(now)]


def expire_unread(q: Queue, task_id: str, message: str, error: dict[str, Any]) -> bool:
    """Completed task ``task_id``, whose answer nobody read within its ttl, fails: its claim
    is to be released. False if it was read (or settled) meanwhile."""

    def work(conn: Connection) -> bool:
        done = conn.execute(
            update(tasks)
            .where(tasks.c.id == task_id, tasks.c.status == COMPLETED, tasks.c.read_at.is_(None))
            .values(status=FAILED, status_message=message, error=dump(error), updated_at=q.now())
        )
        return done.rowcount == 1

    return q.db.write(work)


def mark_released(q: Queue, task_id: str) -> None:
    q.db.write(
        lambda conn: conn.execute(
            update(tasks).where(tasks.c.id == task_id).values(released=True, updated_at=q.now())
        )
    )


def purge(q: Queue) -> int:
    """Delete the tasks whose time to live ended more than ``PURGE_AFTER_SECONDS`` ago and
    that hold no claim still to be given back."""

    def work(conn: Connection) -> int:
        now = q.now()
        rows = conn.execute(
            select(tasks.c.id, tasks.c.created_at, tasks.c.ttl_ms).where(
                tasks.c.ttl_ms.is_not(None),
                tasks.c.created_at < now - timedelta(seconds=PURGE_AFTER_SECONDS),
                or_(
                    tasks.c.number.is_(None),
                    tasks.c.released.is_(True),
                    tasks.c.read_at.is_not(None),
                ),
            )
        ).all()
        gone = [
            r.id
            for r in rows
            if r.created_at + timedelta(milliseconds=r.ttl_ms + PURGE_AFTER_SECONDS * 1000) < now
        ]
        for chunk in _chunks(gone, 500):
            conn.execute(delete(tasks).where(tasks.c.id.in_(chunk)))
        return len(gone)

    return q.db.write(work)


def _chunks(items: list[str], size: int) -> Iterable[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


@retry_lost_read
def next_deadline(q: Queue, kinds: Collection[str]) -> datetime | None:
    """When the earliest wait of a working task of ``kinds`` ends."""
    with q.db.read() as conn:
        found: datetime | None = conn.execute(
            select(func.min(tasks.c.deadline)).where(
                tasks.c.status == WORKING, tasks.c.kind.in_(list(kinds))
            )
        ).scalar()
    return found
