"""Everything that differs on PostgreSQL, in one place.

Isolation: writes run at READ COMMITTED and get their guarantees from row locks (``FOR UPDATE``,
``SKIP LOCKED`` for claims), single-statement read-modify-writes (the counter row, blocked
counts), and an advisory lock where a check spans rows (the dependency graph, migrations).
Under READ COMMITTED a statement that waited for a row lock sees the row as the other
transaction committed it, so these patterns never lose an update and never fail with a
serialization error. Reads run in a REPEATABLE READ, READ ONLY transaction: one snapshot
for every statement of a read (an export, an issue with its labels), as SQLite's WAL gives.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    Connection,
    Engine,
    Integer,
    Table,
    Text,
    cast,
    create_engine,
    event,
    exc,
    func,
    select,
    text,
)
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.pool import QueuePool

from workq.db.prepared import Prepared
from workq.errors import DriverMissing, InvalidInput

if TYPE_CHECKING:  # imported where used: a SQLite process never needs PostgreSQL's dialect
    from sqlalchemy.dialects import postgresql

WRITE_ISOLATION = "READ COMMITTED"
READ_ISOLATION = "REPEATABLE READ"

# Keys of the transaction-scoped advisory locks (pg_advisory_xact_lock).
GRAPH_LOCK = 7201
SCHEMA_LOCK = 7202


def normalize_url(url: str) -> str:
    """The URL with psycopg 3 as PostgreSQL's driver (``postgresql://`` and ``postgres://``
    mean it too); anything but SQLite and PostgreSQL is refused."""
    try:
        parsed = make_url(url)
    except exc.ArgumentError:
        raise InvalidInput(
            "not a database URL",
            hint="use postgresql+psycopg://USER:PASSWORD@HOST/DB or a SQLite file",
        ) from None
    if parsed.drivername in ("postgres", "postgresql"):
        return parsed.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        raise InvalidInput(
            f"workq runs on SQLite or PostgreSQL, not {parsed.get_backend_name()}",
            hint="use postgresql+psycopg://USER:PASSWORD@HOST/DB or a SQLite file",
        )
    return url


def require_driver(url: str) -> None:
    """Refuse a PostgreSQL URL when its driver, an optional extra, is not installed."""
    if make_url(normalize_url(url)).get_backend_name() != "postgresql":
        return
    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise DriverMissing(
            "PostgreSQL needs the psycopg driver, which is not installed",
            hint=f"install it into workq's environment: {install_line('postgres')}",
            driver="psycopg",
        ) from None


def install_line(extra: str) -> str:
    """The command that adds an extra to the environment this workq runs in (the
    distribution is ``workq-mcp``; ``workq`` on PyPI is another project)."""
    wanted = f"'workq-mcp[{extra}]'"
    if importlib.util.find_spec("pip") is None:  # made by uv (uvx, uv tool, uv venv)
        return f"uv pip install --python {sys.executable} {wanted}"
    return f"{sys.executable} -m pip install {wanted}"


def postgres_engine(
    url: str,
    *,
    lock_timeout_ms: int,
    pool_size: int,
    max_overflow: int,
    pool_timeout_s: float,
    connect_timeout_s: int,
) -> Engine:
    """A pooled engine with bounded waits everywhere: connect, pool checkout, row locks.

    A connection is pinged on checkout only after it sat idle in the pool for a while
    (``IDLE_PING_S``): a ping per checkout cost a round trip per claim, and a write already
    settles a connection lost under it (retried before its commit, asked about after)."""
    options = (
        f"-c lock_timeout={int(lock_timeout_ms)} "
        # A client that dies inside a transaction must not hold its row locks for long.
        f"-c idle_in_transaction_session_timeout={max(60_000, 6 * int(lock_timeout_ms))}"
    )
    require_driver(url)
    engine = create_engine(
        url,
        poolclass=QueuePool,
        pool_size=pool_size,
        max_overflow=max_overflow,
        pool_timeout=pool_timeout_s,
        pool_recycle=1800,
        pool_use_lifo=True,
        isolation_level=WRITE_ISOLATION,
        connect_args={
            "connect_timeout": max(2, int(connect_timeout_s)),
            "application_name": "workq",
            "options": options,
            "keepalives": 1,
            "keepalives_idle": 30,
            "keepalives_interval": 10,
            "keepalives_count": 3,
        },
    )

    @event.listens_for(engine, "connect")
    def _remember_backend(dbapi_conn: Any, record: Any) -> None:
        # Who serves this connection, to end that process if the connection is lost under
        # a statement that commits on its own (see end_backend).
        row = dbapi_conn.execute(_WHO).fetchone()
        dbapi_conn.rollback()
        record.info[_BACKEND] = Backend(int(row[0]), row[1]) if row else None

    @event.listens_for(engine, "checkin")
    def _idle_since(_dbapi_conn: Any, record: Any) -> None:
        record.info[_IDLE_SINCE] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _ping_if_idle(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        since = record.info.get(_IDLE_SINCE)
        if since is None or time.monotonic() - since < IDLE_PING_S:
            return
        try:
            alive = engine.dialect.do_ping(dbapi_conn)
        except engine.dialect.loaded_dbapi.Error:
            alive = False
        if not alive:
            raise exc.DisconnectionError("the pooled connection is gone")  # the pool replaces it

    return engine


_WHO = "SELECT pid, backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()"
_BACKEND = "workq_backend"

# A pooled connection idle for longer than this is pinged before use.
IDLE_PING_S = 2.0
_IDLE_SINCE = "workq_idle_since"


def drop_pooled(engine: Engine) -> None:
    """A connection was lost: the server may have restarted, so the other pooled
    connections are not trusted either. Every connection made before now is closed and
    replaced at its next checkout, the one checked out by another thread too.

    This is what SQLAlchemy itself does to the pool when it sees a disconnect. Not
    ``engine.dispose()``: a connection checked out meanwhile would return to the discarded
    pool and stay open until the garbage collector found it (a ResourceWarning)."""
    if engine.dialect.name == "postgresql":
        engine.pool._invalidate(None)  # type: ignore[arg-type]  # None: every connection


def for_reading(conn: Connection) -> Connection:
    """The connection set up for a read: a snapshot that cannot write."""
    if conn.dialect.name != "postgresql":
        return conn
    return conn.execution_options(isolation_level=READ_ISOLATION, postgresql_readonly=True)


def insert_for(dialect_name: str) -> Callable[[Table], postgresql.Insert | sqlite.Insert]:
    """The INSERT construct that knows the dialect's ON CONFLICT clause."""
    if dialect_name == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql.insert
    return sqlite.insert


def lock_plans(conn: Connection) -> None:
    """Serialise entries into plan mode."""
    _lock_writers(conn, "plans")


def lock_agents(conn: Connection) -> None:
    """Serialise registrations of agents (one id per name and type)."""
    _lock_writers(conn, "agents")


def _lock_writers(conn: Connection, table: str) -> None:
    """SQLite's write lock already serialises writers; on PostgreSQL this lock conflicts
    only with other writers of ``table``, not with its readers."""
    if conn.dialect.name == "postgresql":
        conn.execute(text(f"LOCK TABLE {table} IN SHARE ROW EXCLUSIVE MODE"))


def lock_graph(conn: Connection) -> None:
    """Serialise changes of the dependency graph, so two opposite edges cannot both pass
    the cycle check. SQLite's write lock already does."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": GRAPH_LOCK})


def lock_schema(conn: Connection) -> None:
    """Serialise migrations: servers started together migrate one after the other."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK})


@dataclass(frozen=True)
class Transaction:
    """What identifies a transaction on a server: its id, and when the server started.
    An id is reliable only on the server run that gave it out: after a crash, an id whose
    work never reached the disk is given out again."""

    xid: str
    server_started: datetime


@dataclass(frozen=True)
class Backend:
    """The server process behind a connection: its pid, and when it started (a pid is
    given out again once its process is gone)."""

    pid: int
    started: datetime


def backend(conn: Connection) -> Backend | None:
    """The server process serving ``conn``; None on SQLite."""
    if conn.dialect.name != "postgresql":
        return None
    found: Backend | None = conn.connection.info.get(_BACKEND)
    return found


@contextmanager
def autocommit(conn: Connection) -> Iterator[Connection]:
    """``conn`` with each statement its own transaction (PostgreSQL commits it before it
    answers): one round trip for a write that is one statement."""
    driver = conn.connection.driver_connection
    assert driver is not None
    driver.autocommit = True
    try:
        yield conn
    finally:
        if not (driver.closed or driver.broken):
            driver.autocommit = False


# Pauses between the checks that a lost connection's server process is gone.
END_POLLS = (0.02, 0.05, 0.1, 0.2, 0.4, 0.8, 1.6)
_END = text(
    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
    "WHERE pid = :pid AND backend_start = :started"
)


def end_backend(engine: Engine, gone: Backend) -> bool:
    """Make sure the server process of a lost connection has ended (terminating it if it
    still runs): whatever it was doing is then committed or rolled back for good, and it
    can start nothing more. False if the server could not be asked."""
    for pause in END_POLLS:
        try:
            with engine.connect() as conn:
                alive = conn.execute(_END, {"pid": gone.pid, "started": gone.started}).first()
                conn.rollback()
            if alive is None:
                return True
        except (exc.DBAPIError, exc.TimeoutError, OSError):
            pass  # the server cannot be reached yet: ask again
        time.sleep(pause)
    return False


def hold_writers(conn: Connection) -> None:
    """Keep every other writer out until this transaction ends (readers go on): a repair
    compares counts read by several statements, which READ COMMITTED would not keep still.
    SQLite's write lock already does."""
    if conn.dialect.name == "postgresql":
        for table in ("issues", "dependencies"):
            conn.execute(text(f"LOCK TABLE {table} IN SHARE ROW EXCLUSIVE MODE"))


_WRITTEN = Prepared(
    select(
        cast(func.pg_current_xact_id_if_assigned(), Text).label("xid"),
        func.pg_postmaster_start_time().label("started"),
    )
)


def transaction(conn: Connection) -> Transaction | None:
    """The open transaction if it has written anything, to ask about its commit later;
    None on SQLite, or when nothing was written."""
    if conn.dialect.name != "postgresql":
        return None
    row = _WRITTEN.rows(conn, {})[0]  # on every write: the driver's cursor, prepared
    return None if row.xid is None else Transaction(str(row.xid), row.started)


def commit_outcome(engine: Engine, written: Transaction) -> str | None:
    """'committed', 'aborted' or 'in progress'; None if unknown: the server cannot be
    reached, has forgotten the id, or has restarted since (the id may have been reused)."""
    try:
        with engine.connect() as conn:
            row = conn.execute(
                text("SELECT pg_xact_status(CAST(:xid AS xid8)), pg_postmaster_start_time()"),
                {"xid": written.xid},
            ).one()
            conn.rollback()
    except (exc.DBAPIError, exc.TimeoutError, OSError):
        return None
    if row[0] is None or row[1] != written.server_started:
        return None
    return str(row[0])


# The text search document of an issue. Migration 0003_pg_search indexes exactly this
# expression (GIN), so the planner can use the index only if the query repeats it verbatim.
SEARCH_DOCUMENT = "to_tsvector('simple', title || ' ' || description)"
_SEARCH = text(
    "SELECT hit.number, hit.title, hit.status, hit.priority, hit.issue_type, "
    "ts_headline('simple', hit.title || ' ' || hit.description, hit.query, "
    "'StartSel=[, StopSel=], MaxWords=12, MinWords=4') AS snippet "
    "FROM (SELECT number, title, description, status, priority, issue_type, query, "
    f"ts_rank({SEARCH_DOCUMENT}, query) AS rank "
    "FROM issues, to_tsquery('simple', :query) AS query "
    f"WHERE {SEARCH_DOCUMENT} @@ query "
    "AND (CAST(:status AS text) IS NULL OR status = CAST(:status AS text)) "
    "ORDER BY rank DESC, number LIMIT :limit OFFSET :offset) AS hit "
    "ORDER BY hit.rank DESC, hit.number"
)


def search_rows(
    conn: Connection, words: list[str], status: str | None, limit: int, offset: int
) -> list[Any]:
    """PostgreSQL's full-text search: every word as a prefix, best ranked first, with a
    snippet that marks the matches in [brackets] (as FTS5 does on SQLite)."""
    query = " & ".join(f"'{word}':*" for word in words)  # words are \w+: no quotes
    params = {"query": query, "status": status, "limit": limit, "offset": offset}
    return list(conn.execute(_SEARCH, params))


def reset_sequences(conn: Connection, tables: Iterable[Table]) -> None:
    """After rows were inserted with explicit ids, start each table's id sequence above
    them (tables without one are passed over)."""
    if conn.dialect.name != "postgresql":
        return
    for table in tables:
        keys = list(table.primary_key.columns)
        if len(keys) != 1 or not isinstance(keys[0].type, Integer) or keys[0].foreign_keys:
            continue
        key = keys[0].name
        conn.execute(
            text(
                f"SELECT setval(pg_get_serial_sequence('{table.name}', '{key}'), "
                f"COALESCE((SELECT MAX({key}) FROM {table.name}), 0) + 1, false)"
            )
        )


def describe_url(url: str) -> str:
    """A URL fit to print: the password hidden."""
    return make_url(url).render_as_string(hide_password=True)
