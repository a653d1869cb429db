"""The GitHub mirror's transactional outbox: what GitHub has not seen yet, and when to retry.

Every mutation of an issue runs :func:`queue_change` inside its own transaction (a
``Queue.on_change`` hook, installed by :func:`install`). It upserts one row per issue, so a
burst of edits collapses into one push. The statement carries its own guard: it inserts
nothing unless a mirror is configured (a row in ``github_mirror``), so every process that
writes to the database feeds the outbox the moment a mirror exists, and costs one indexed
lookup of an empty table while none does.

A row's ``version`` grows with each change. The worker pushes the state it read at version
``v`` and then deletes the row only if it is still at ``v``; a change made meanwhile leaves
the row pending, so it is pushed again and never lost.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel
from sqlalchemy import (
    Connection,
    Select,
    and_,
    bindparam,
    case,
    delete,
    exists,
    func,
    insert,
    literal,
    literal_column,
    or_,
    select,
    update,
)
from sqlalchemy.sql.dml import Insert
from sqlalchemy.sql.elements import ColumnClause

from workq.db import dialect
from workq.db.prepared import Prepared
from workq.db.tables import github_comments, github_links, github_mirror, github_outbox, issues
from workq.domain import leases
from workq.errors import Conflict, InvalidInput
from workq.services.handle import Queue
from workq.services.queue import processes

PENDING = "pending"
DEAD = "dead"


# The outbox columns a :func:`feed` SELECT fills, in its order.
FED_COLUMNS = [
    "issue_id",
    "number",
    "kind",
    "version",
    "state",
    "attempts",
    "next_attempt_at",
    "changed_at",
]


def feed(issue_id: Any, number: Any, kind: Any, now: Any) -> Select[Any]:
    """The outbox row for one change, as a SELECT that yields nothing while no mirror is
    configured. Its arguments are columns or parameters (a claim's CTE feeds its own rows)."""
    one: ColumnClause[Any] = literal_column("1")
    pending: ColumnClause[Any] = literal_column(f"'{PENDING}'")
    zero: ColumnClause[Any] = literal_column("0")
    return select(issue_id, number, kind, one, pending, zero, now, now).where(
        exists().where(github_mirror.c.repo.is_not(None))
    )


def upsert(dialect_name: str, source: Select[Any]) -> Insert:
    """Insert ``source``'s rows (see :func:`feed`) or refresh the issue's pending row: a
    newer version, due as it was, or due now if it had been parked as dead."""
    stmt = dialect.insert_for(dialect_name)(github_outbox).from_select(
        FED_COLUMNS,
        source,
    )
    o, excluded = github_outbox.c, stmt.excluded
    was_dead = o.state == literal_column(f"'{DEAD}'")
    return stmt.on_conflict_do_update(
        index_elements=[o.issue_id],
        set_={
            "number": excluded.number,
            "kind": excluded.kind,
            "version": o.version + literal_column("1"),
            "changed_at": excluded.changed_at,
            "state": literal_column(f"'{PENDING}'"),
            "attempts": case((was_dead, literal_column("0")), else_=o.attempts),
            "next_attempt_at": case((was_dead, excluded.next_attempt_at), else_=o.next_attempt_at),
        },
    )


_one = feed(bindparam("issue_id"), bindparam("number"), bindparam("kind"), bindparam("now"))
# Built for a dialect when first used: a SQLite process never loads PostgreSQL's dialect.
_queue: dict[str, Prepared[Any]] = {}


def queue_change(conn: Connection, issue_id: str, number: int, kind: str, now: datetime) -> None:
    """Queue (or refresh) the issue's outbox row, in the caller's transaction.

    A row parked as dead comes back to life: the new change may be what it needed. A row
    waiting for a rate limit keeps its wait.
    """
    params = {"issue_id": issue_id, "number": number, "kind": kind, "now": now}
    queue_statement(conn.dialect.name).count(conn, params)


def queue_statement(dialect_name: str) -> Prepared[Any]:
    """:func:`queue_change`'s statement for a dialect."""
    found = _queue.get(dialect_name)
    if found is None:
        found = _queue[dialect_name] = Prepared(upsert(dialect_name, _one))
    return found


def hook_of(q: Queue) -> Hook | None:
    """The outbox's hook on the queue, if installed."""
    return next((hook for hook in q.on_change if isinstance(hook, Hook)), None)


def install(q: Queue) -> None:
    """Hang the outbox on the queue's mutations (once)."""
    if hook_of(q) is None:
        q.on_change.append(Hook(q))


class Hook:
    def __init__(self, q: Queue) -> None:
        self.q = q

    def __call__(self, conn: Connection, issue_id: str, number: int, kind: str) -> None:
        queue_change(conn, issue_id, number, kind, self.q.now())


# --------------------------------------------------------------------------------------------
# The mirror target


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


def worker_live(q: Queue, repo: str) -> bool:
    """Whether a worker holds the mirror of GitHub repository ``repo`` now."""
    found = mirror(q)
    return (
        found is not None
        and found.repo.lower() == repo.lower()
        and found.worker is not None
        and leases.live(found.worker_expires_at, q.now())
    )


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
        queued = _queue_unlinked(conn, now)
        found = conn.execute(select(github_mirror)).one()
        return Mirror.model_validate(dict(found._mapping)), queued

    return q.db.write(work)


def _queue_unlinked(conn: Connection, now: datetime) -> int:
    """Queue every issue without a link that has no outbox row (a first push)."""
    unlinked = (
        select(
            issues.c.id,
            issues.c.number,
            literal("initial"),
            literal(1),
            literal(PENDING),
            literal(0),
            issues.c.created_at,
            issues.c.created_at,
        )
        .where(
            ~select(github_links.c.issue_id).where(github_links.c.issue_id == issues.c.id).exists()
        )
        .where(
            ~select(github_outbox.c.issue_id)
            .where(github_outbox.c.issue_id == issues.c.id)
            .exists()
        )
    )
    stmt = (
        insert(github_outbox)
        .from_select(
            FED_COLUMNS,
            unlinked,
        )
        .returning(github_outbox.c.issue_id)
    )
    return len(conn.execute(stmt).all())


def queue_all(q: Queue) -> int:
    """Queue every issue and every linked deleted issue again (a full re-check). Pushes of
    unchanged issues make no request, so this costs reads of the local database only."""

    def work(conn: Connection) -> int:
        now = q.now()
        count = 0
        for issue_id, number in conn.execute(select(issues.c.id, issues.c.number)):
            queue_change(conn, issue_id, number, "rescan", now)
            count += 1
        gone = select(github_links.c.issue_id, github_links.c.number).where(
            ~select(issues.c.id).where(issues.c.id == github_links.c.issue_id).exists()
        )
        for issue_id, number in conn.execute(gone):
            queue_change(conn, issue_id, number, "rescan", now)
            count += 1
        return count

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


# --------------------------------------------------------------------------------------------
# The worker's lease: one worker per mirror, so that one request at a time goes out


def take_worker_lease(
    q: Queue,
    repo: str,
    worker: str,
    until: datetime,
    *,
    holder_is_gone: Callable[[str], bool] = processes.gone,
) -> str | None:
    """Hold the mirror for ``worker`` until ``until``. Returns None when held, else the other
    live worker. A lease that expired, or whose holder ``holder_is_gone`` says died, is
    taken over."""

    def work(conn: Connection) -> str | None:
        row = conn.execute(select(github_mirror).where(github_mirror.c.repo == repo)).first()
        if row is None:
            raise InvalidInput(f"this database does not mirror {repo}", field="repo")
        alive = row.worker is not None and not holder_is_gone(row.worker)
        if row.worker != worker and not leases.takeable(
            row.worker, row.worker_expires_at, q.now(), alive
        ):
            return str(row.worker)
        conn.execute(
            update(github_mirror)
            .where(github_mirror.c.repo == repo)
            .values(worker=worker, worker_expires_at=until)
        )
        return None

    return q.db.write(work)


def release_worker_lease(q: Queue, repo: str, worker: str) -> None:
    def work(conn: Connection) -> None:
        conn.execute(
            update(github_mirror)
            .where(github_mirror.c.repo == repo, github_mirror.c.worker == worker)
            .values(worker=None, worker_expires_at=None)
        )

    q.db.write(work)


# --------------------------------------------------------------------------------------------
# Rows


class OutboxItem(BaseModel):
    issue_id: str
    number: int
    kind: str
    version: int
    state: str
    attempts: int
    next_attempt_at: datetime
    changed_at: datetime
    create_started_at: datetime | None
    last_error: str | None

    @property
    def uncertain(self) -> bool:
        """A create was sent and its outcome is unknown."""
        return self.create_started_at is not None


def _item(row: Any) -> OutboxItem:
    return OutboxItem.model_validate(dict(row._mapping))


def due(q: Queue, *, limit: int = 100) -> list[OutboxItem]:
    """Pending rows whose time has come, oldest wait first."""
    now = q.now()
    with q.db.read() as conn:
        rows = conn.execute(
            select(github_outbox)
            .where(github_outbox.c.state == PENDING, github_outbox.c.next_attempt_at <= now)
            .order_by(github_outbox.c.next_attempt_at, github_outbox.c.number)
            .limit(limit)
        )
        return [_item(r) for r in rows]


def next_due_at(q: Queue) -> datetime | None:
    """When the earliest pending row becomes due (None: nothing pending)."""
    with q.db.read() as conn:
        value = conn.execute(
            select(func.min(github_outbox.c.next_attempt_at)).where(
                github_outbox.c.state == PENDING
            )
        ).scalar()
    return value if isinstance(value, datetime) else None


def get(q: Queue, issue_id: str) -> OutboxItem | None:
    with q.db.read() as conn:
        row = conn.execute(
            select(github_outbox).where(github_outbox.c.issue_id == issue_id)
        ).first()
    return _item(row) if row else None


def _set(q: Queue, issue_id: str, values: Mapping[str, Any]) -> None:
    def work(conn: Connection) -> None:
        conn.execute(
            update(github_outbox).where(github_outbox.c.issue_id == issue_id).values(**values)
        )

    q.db.write(work)


def create_started(q: Queue, issue_id: str) -> None:
    """Durably note that a create is about to be sent (before sending it)."""
    _set(q, issue_id, {"create_started_at": q.now()})


def create_settled(q: Queue, issue_id: str) -> None:
    """The create's outcome is known (done, found, or certainly not applied)."""
    _set(q, issue_id, {"create_started_at": None})


def finish(q: Queue, item: OutboxItem) -> bool:
    """The state read at ``item.version`` is on GitHub. Deletes the row unless it changed
    meanwhile (then it stays pending, due now). True if the row is gone."""

    def work(conn: Connection) -> bool:
        gone = conn.execute(
            delete(github_outbox).where(
                github_outbox.c.issue_id == item.issue_id,
                github_outbox.c.version == item.version,
            )
        ).rowcount
        if not gone:
            conn.execute(
                update(github_outbox)
                .where(github_outbox.c.issue_id == item.issue_id)
                .values(attempts=0, last_error=None, create_started_at=None)
            )
        return bool(gone)

    return q.db.write(work)


def reschedule(
    q: Queue,
    issue_id: str,
    at: datetime,
    error: str,
    *,
    count_attempt: bool,
    max_attempts: int,
) -> OutboxItem | None:
    """Try the row again at ``at``. A counted failure that reaches ``max_attempts`` parks
    the row as dead (a later change of the issue revives it)."""

    def work(conn: Connection) -> OutboxItem | None:
        row = conn.execute(
            select(github_outbox).where(github_outbox.c.issue_id == issue_id)
        ).first()
        if row is None:
            return None
        attempts = row.attempts + (1 if count_attempt else 0)
        state = DEAD if count_attempt and attempts >= max_attempts else PENDING
        conn.execute(
            update(github_outbox)
            .where(github_outbox.c.issue_id == issue_id)
            .values(attempts=attempts, state=state, next_attempt_at=at, last_error=error[:2000])
        )
        found = conn.execute(
            select(github_outbox).where(github_outbox.c.issue_id == issue_id)
        ).one()
        return _item(found)

    return q.db.write(work)


def park(q: Queue, issue_id: str, error: str) -> None:
    """Park the row as dead now: retrying it unchanged cannot succeed."""
    _set(q, issue_id, {"state": DEAD, "last_error": error[:2000]})


def revive(q: Queue, *, waiting: bool = False) -> int:
    """Put every dead row back in the queue, due now; with ``waiting``, also make the rows
    that wait for a retry due now (after an outage is over)."""

    def work(conn: Connection) -> int:
        now = q.now()
        chosen = github_outbox.c.state == DEAD
        if waiting:
            chosen = or_(chosen, github_outbox.c.next_attempt_at > now)
        return int(
            conn.execute(
                update(github_outbox)
                .where(chosen)
                .values(state=PENDING, attempts=0, next_attempt_at=now)
            ).rowcount
            or 0
        )

    return q.db.write(work)


# --------------------------------------------------------------------------------------------
# Status


class RowProblem(BaseModel):
    number: int
    state: str
    uncertain: bool
    attempts: int
    next_attempt_at: datetime
    last_error: str | None


class SyncStatus(BaseModel):
    repo: str | None
    pending: int
    due_now: int
    uncertain: int
    dead: int
    linked: int
    next_attempt_at: datetime | None
    last_push_at: datetime | None
    last_import_at: datetime | None
    last_error: str | None
    worker: str | None
    worker_expires_at: datetime | None
    problems: list[RowProblem]


def status(q: Queue, *, problems: int = 10) -> SyncStatus:
    """Counts of pending, uncertain and dead rows, and the rows that failed most recently."""
    now = q.now()
    o = github_outbox
    with q.db.read() as conn:
        m = conn.execute(select(github_mirror)).first()
        counts = conn.execute(
            select(
                func.count().filter(o.c.state == PENDING),
                func.count().filter(and_(o.c.state == PENDING, o.c.next_attempt_at <= now)),
                func.count().filter(o.c.create_started_at.is_not(None)),
                func.count().filter(o.c.state == DEAD),
                func.min(o.c.next_attempt_at).filter(o.c.state == PENDING),
            )
        ).one()
        linked = conn.execute(select(func.count()).select_from(github_links)).scalar_one()
        failing = conn.execute(
            select(o)
            .where(
                or_(
                    o.c.last_error.is_not(None),
                    o.c.state == DEAD,
                    o.c.create_started_at.is_not(None),
                )
            )
            .order_by(o.c.state, o.c.next_attempt_at)
            .limit(problems)
        )
        listed = [
            RowProblem(
                number=r.number,
                state=r.state,
                uncertain=r.create_started_at is not None,
                attempts=r.attempts,
                next_attempt_at=r.next_attempt_at,
                last_error=r.last_error,
            )
            for r in failing
        ]
    next_at = counts[4]
    return SyncStatus(
        repo=m.repo if m else None,
        pending=counts[0],
        due_now=counts[1],
        uncertain=counts[2],
        dead=counts[3],
        linked=int(linked),
        next_attempt_at=next_at if isinstance(next_at, datetime) else None,
        last_push_at=m.last_push_at if m else None,
        last_import_at=m.last_import_at if m else None,
        last_error=m.last_error if m else None,
        worker=m.worker if m else None,
        worker_expires_at=m.worker_expires_at if m else None,
        problems=listed,
    )
