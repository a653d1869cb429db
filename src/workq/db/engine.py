"""Engines and transactions: SQLite pragmas, BEGIN IMMEDIATE for writes, bounded busy retries.

On PostgreSQL (db/dialect.py): pooled connections, a snapshot per read, and a write whose
connection is lost is either retried (lost before its commit: nothing was applied) or checked
with the server (lost during its commit), so it is never applied twice.
"""

from __future__ import annotations

import functools
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import ExceptionContext, make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.pool import NullPool, Pool, PoolProxiedConnection, QueuePool

from workq.db import dialect, limits, sqlite
from workq.db.changes import ChangeFeed
from workq.db.failures import explain_sqlite, translate
from workq.db.files import check_sqlite_path
from workq.errors import Busy, ConnectionLost, StorageError, WorkqError
from workq.nowait import WouldWait, call_committed, must_not_wait

T = TypeVar("T")
P = ParamSpec("P")

WRITE_ATTEMPTS = 3
# What the storage can raise; anything else is a bug and propagates as it is.
DRIVER_ERRORS = (DBAPIError, sqlite.Error, OSError, PoolTimeout)
# How long to wait for the server to settle a commit whose connection was lost.
OUTCOME_POLLS = (0.05, 0.1, 0.2, 0.4, 0.8)
# A thread's kept SQLite connections (``Database._reader``): the one for reads and writes,
# and the one for writes that must not wait (busy timeout 0).
KEPT, AT_ONCE = "conn", "at_once"


class Database:
    """One engine, and the two ways to use it: a read snapshot or a write transaction.

    A SQLite file has one Database per process (``Database.open`` hands out the same one to
    the server, the board and the mirror of one process): one writer lock, one reader per
    thread, one change feed. A second ``Database(...)`` of a file this process has open is
    refused.
    """

    @classmethod
    def open(cls, url: str, **options: Any) -> Database:
        """This process's Database of ``url``: the one already open for the same SQLite file
        (``options`` are then those it was opened with), or a new one. Each ``open`` is
        matched by one ``dispose``; the last one closes it."""
        key = _file_key(dialect.normalize_url(url))
        if key is None:
            return cls(url, **options)
        with _OPEN_LOCK:
            db = _OPEN.get(key)
            if db is not None:
                db._users += 1
                return db
            return cls(url, **options)

    def __init__(
        self,
        url: str,
        *,
        busy_timeout_ms: int = 10_000,
        synchronous: str = "NORMAL",
        pool_size: int = 5,
        max_overflow: int | None = None,
        pool_timeout_s: float = 10.0,
        connect_timeout_s: int = 5,
    ) -> None:
        self.url = url = dialect.normalize_url(url)
        self.dialect = make_url(url).get_backend_name()
        self._users = 1
        self._key = _file_key(url)
        if self._key is not None:
            with _OPEN_LOCK:
                if self._key in _OPEN:
                    raise StorageError(
                        f"{self._key[1]} is open in this process already",
                        hint="share it: Database.open (services.runtime.open_database)",
                    )
            check_sqlite_path(Path(self._key[1]))
        self.busy_timeout_ms = busy_timeout_ms
        # SQLite reads reuse one connection per thread, kept out of the writers' pool:
        # opening and returning a pooled connection cost more than the ready query itself.
        self._readers = threading.local()
        self._reader_conns: list[Connection] = []
        self._reader_lock = threading.Lock()
        self._read_engine: Engine | None = None
        # SQLite takes one writer at a time. This process's threads queue for it here,
        # handing it on as each commits, rather than each polling the file's lock in
        # SQLite's busy handler (sleeps of 1, 2, 5, 10 ... ms) while another thread holds it.
        self._one_writer = threading.RLock() if self.dialect == "sqlite" else None
        if self.dialect == "sqlite":
            self.engine = _sqlite_engine(url, busy_timeout_ms, synchronous)
            if make_url(url).database not in (None, "", ":memory:"):
                self._read_engine = _sqlite_engine(
                    url, busy_timeout_ms, synchronous, poolclass=NullPool
                )
        else:
            self.engine = dialect.postgres_engine(
                url,
                lock_timeout_ms=busy_timeout_ms,
                pool_size=pool_size,
                max_overflow=pool_size * 2 if max_overflow is None else max_overflow,
                pool_timeout_s=pool_timeout_s,
                connect_timeout_s=connect_timeout_s,
            )

        self.changes = ChangeFeed(self)
        if self._key is not None:
            with _OPEN_LOCK:
                _OPEN[self._key] = self

    def own_connection(self) -> PoolProxiedConnection:
        """A driver connection of its own, outside every pool (close it when done)."""
        raw = (self._read_engine or self.engine).raw_connection()
        raw.detach()
        return raw

    @property
    def is_sqlite(self) -> bool:
        return self.dialect == "sqlite"

    def translate(self, exc: BaseException) -> WorkqError:
        """A workq error for a driver error; for a SQLite file, named from the file system
        when it says more (the hot path runs on the driver's cursor, past the engine)."""
        database = make_url(self.url).database if self.is_sqlite else None
        if database and database != ":memory:":
            explained = explain_sqlite(Path(database).expanduser().resolve(), exc)
            if explained is not None:
                return explained
        return translate(exc)

    def _reader(self, slot: str = KEPT) -> Connection | None:
        """This thread's kept read connection (SQLite), or None to use the pool. Slot
        AT_ONCE: a second one whose busy timeout is 0, for writes that must not wait
        (nowait.py): busy at once, WouldWait."""
        if self._read_engine is None:
            return None
        conn: Connection | None = getattr(self._readers, slot, None)
        if conn is not None and (conn.closed or conn.invalidated):
            conn = None
        if conn is None:
            conn = self._read_engine.connect()
            if slot == AT_ONCE:
                driver = conn.connection.driver_connection
                assert driver is not None
                driver.execute("PRAGMA busy_timeout = 0")
            setattr(self._readers, slot, conn)
            with self._reader_lock:
                self._reader_conns.append(conn)
        # A read nested in this thread's transaction takes the pool: its own snapshot.
        if conn.in_transaction() or getattr(self._readers, "writing", None) == slot:
            return None
        return conn

    def _write_kept(self, conn: Connection, slot: str, work: Callable[[Connection], T]) -> T:
        """SQLite, on this thread's kept connection: BEGIN IMMEDIATE and COMMIT sent straight
        to the driver, as the hot path's statements are (SQLAlchemy's Transaction and its
        events cost as much as a statement). A statement the work runs through SQLAlchemy
        begins SQLAlchemy's transaction on top (``_on_begin`` then sends nothing), which
        then commits or rolls back the driver's with it."""
        driver = conn.connection.driver_connection
        assert driver is not None
        try:
            driver.execute("BEGIN IMMEDIATE")
            self._readers.writing = slot
            try:
                result = work(conn)
                if conn.in_transaction():
                    conn.commit()
                else:
                    driver.commit()
            except BaseException:
                if conn.in_transaction():
                    conn.rollback()
                elif driver.in_transaction:  # never leave the lock held
                    driver.rollback()
                raise
            finally:
                self._readers.writing = None
        except DRIVER_ERRORS as exc:
            error = self.translate(exc)
            if not isinstance(error, Busy):  # busy: the connection is sound
                self._drop_reader(slot)
            raise error from exc
        call_committed()
        return result

    def _drop_reader(self, slot: str = KEPT) -> None:
        conn = getattr(self._readers, slot, None)
        setattr(self._readers, slot, None)
        if conn is not None:
            with self._reader_lock:
                if conn in self._reader_conns:
                    self._reader_conns.remove(conn)
            conn.invalidate()

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A read-only snapshot (a deferred transaction on SQLite)."""
        try:
            kept = self._reader()
            if kept is not None:
                try:
                    with kept.begin():
                        yield kept
                except DRIVER_ERRORS:
                    self._drop_reader()  # a broken connection is not kept
                    raise
            else:
                with self.engine.connect() as conn, dialect.for_reading(conn).begin():
                    yield conn
        except DRIVER_ERRORS as exc:
            error = self.translate(exc)
            if isinstance(error, ConnectionLost):
                dialect.drop_pooled(self.engine)
                error.hint = "nothing was changed; retry when the database server is back"
            raise error from exc

    def _write_once(self, work: Callable[[Connection], T]) -> T:
        gate = self._one_writer
        if gate is None:
            return self._write_now(work)
        if must_not_wait():
            if not gate.acquire(blocking=False):
                raise WouldWait("another thread of this process is writing")
        elif not gate.acquire(timeout=self.busy_timeout_ms / 1000):
            raise Busy(
                "another write of this process held the database for "
                f"{self.busy_timeout_ms / 1000:.0f} s"
            )
        try:
            return self._write_now(work)
        finally:
            gate.release()

    def _write_now(self, work: Callable[[Connection], T]) -> T:
        slot = AT_ONCE if must_not_wait() else KEPT
        kept = self._reader(slot)
        if kept is not None:
            return self._write_kept(kept, slot, work)
        written: dialect.Transaction | None = None
        committing = False
        try:
            with self.engine.connect().execution_options(workq_write=True) as conn:
                transaction = conn.begin()
                result = work(conn)
                written = dialect.transaction(conn)
                committing = True
                transaction.commit()
                call_committed()
                return result
        except DRIVER_ERRORS as exc:
            error = self.translate(exc)
            if isinstance(error, ConnectionLost):
                dialect.drop_pooled(self.engine)
            if not (committing and isinstance(error, ConnectionLost)):
                raise error from exc
            outcome = self._outcome(written)
            if outcome == "committed" or (written is None and not self.is_sqlite):
                return result  # applied once, or it wrote nothing
            if outcome == "aborted":
                raise ConnectionLost(cause=error.facts.get("cause")) from exc
            raise ConnectionLost(
                "the connection to the database was lost while committing",
                hint="the change may or may not have been applied: read it back before retrying",
                applied="unknown",
                transaction=written.xid if written else None,
                cause=error.facts.get("cause"),
            ) from exc

    def _outcome(self, written: dialect.Transaction | None) -> str | None:
        """How a transaction whose commit lost its connection ended, if the server says."""
        if written is None:
            return None
        outcome = None
        for pause in OUTCOME_POLLS:
            outcome = dialect.commit_outcome(self.engine, written)
            if outcome in ("committed", "aborted"):
                break
            time.sleep(pause)
        return outcome

    def write(self, work: Callable[[Connection], T]) -> T:
        """Run ``work`` in one write transaction, retrying a busy database with backoff.

        ``work`` must be safe to run again: it runs inside the transaction only, and a busy
        error before commit means nothing of it was applied. A connection lost before the
        commit is retried once; one lost during the commit is settled by asking the server,
        and only if it cannot say is ConnectionLost raised with ``applied="unknown"``.
        """
        delay = 0.01
        busy = 0
        lost = False
        while True:
            try:
                return self._write_once(work)
            except ConnectionLost as error:
                if error.facts.get("applied") == "unknown":
                    raise
                if lost:
                    error.facts["applied"] = False
                    error.hint = "nothing was changed; retry when the database server is back"
                    raise
                lost = True
                continue
            except Busy:
                if must_not_wait():
                    raise WouldWait("another process is writing") from None
                busy += 1
                if busy == WRITE_ATTEMPTS:
                    raise
            time.sleep(delay * (1 + random.random()))
            delay = min(delay * 4, 1.0)

    def write_alone(
        self, run: Callable[[Connection], T], settle: Callable[[Connection], T | None]
    ) -> T:
        """Run ``run``, a single statement that is its own transaction (PostgreSQL only):
        it commits as it answers, one round trip. If the connection is lost under it, the
        server process that ran it is ended first (then it has committed or rolled back for
        good), and ``settle`` reads, by a mark the statement wrote (chosen before it was
        sent), whether it was applied: its result, or None for "not applied", which is run
        again once. A busy database is retried as in ``write``."""
        delay = 0.01
        busy = 0
        lost = False
        while True:
            served: dialect.Backend | None = None
            try:
                with self.engine.connect() as conn:
                    served = dialect.backend(conn)
                    with dialect.autocommit(conn):
                        return run(conn)
            except DRIVER_ERRORS as exc:
                error = self.translate(exc)
                if isinstance(error, Busy):
                    busy += 1
                    if busy == WRITE_ATTEMPTS:
                        raise error from exc
                    time.sleep(delay * (1 + random.random()))
                    delay = min(delay * 4, 1.0)
                    continue
                if not isinstance(error, ConnectionLost):
                    raise error from exc
                dialect.drop_pooled(self.engine)
                settled = self._settle(served, settle, error, exc)
                if settled is not None:
                    return settled
                if lost:
                    raise ConnectionLost(
                        hint="nothing was changed; retry when the database server is back",
                        applied=False,
                        cause=error.facts.get("cause"),
                    ) from exc
                lost = True

    def _settle(
        self,
        served: dialect.Backend | None,
        settle: Callable[[Connection], T | None],
        error: WorkqError,
        exc: BaseException,
    ) -> T | None:
        """What a statement whose connection was lost did: its result, or None if nothing."""
        if served is None:
            return None  # no connection was made: nothing was sent
        if dialect.end_backend(self.engine, served):
            try:
                with self.engine.connect() as conn, dialect.for_reading(conn).begin():
                    return settle(conn)
            except DRIVER_ERRORS:
                pass
        raise ConnectionLost(
            "the connection to the database was lost while writing",
            hint="the change may or may not have been applied: read it back before retrying",
            applied="unknown",
            cause=error.facts.get("cause"),
        ) from exc

    def dispose(self) -> None:
        """Close this user's hold; the last user's closes the engines."""
        with _OPEN_LOCK:
            # Closed already (and used since: the pools open connections again on use):
            # close those too, and take no other user's hold.
            self._users = max(self._users - 1, 0)
            if self._users > 0:
                return
            if self._key is not None and _OPEN.get(self._key) is self:
                del _OPEN[self._key]
        with self._reader_lock:
            kept, self._reader_conns = self._reader_conns, []
        for conn in kept:
            conn.invalidate()  # may belong to another thread: close the driver connection
        self._readers = threading.local()
        if self._read_engine is not None:
            self._read_engine.dispose()
        self.engine.dispose()


# The SQLite files this process has open, by (process id, resolved path): a child made by
# fork inherits the map but never the parent's connections.
_OPEN: dict[tuple[int, str], Database] = {}
_OPEN_LOCK = threading.RLock()


def _file_key(url: str) -> tuple[int, str] | None:
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return os.getpid(), os.path.realpath(os.path.expanduser(str(parsed.database)))


def retry_lost_read(read: Callable[P, T]) -> Callable[P, T]:
    """Run a read-only service once more if its connection was lost: a read is always safe
    to repeat. (A connection that died in the pool is replaced by the pool's ping.)"""

    @functools.wraps(read)
    def again(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return read(*args, **kwargs)
        except ConnectionLost:
            return read(*args, **kwargs)

    return again


def _sqlite_engine(
    url: str, busy_timeout_ms: int, synchronous: str, *, poolclass: type[Pool] | None = None
) -> Engine:
    if sqlite.version_info < sqlite.MINIMUM:
        raise StorageError(
            f"SQLite {sqlite.version} is too old; workq needs 3.35 or newer",
            hint="install workq's bundled SQLite (pip install pysqlite3) or a newer Python",
        )
    database = make_url(url).database
    in_memory = database in (None, "", ":memory:")
    if poolclass is None:
        poolclass = NullPool if in_memory else QueuePool
    engine = create_engine(
        url,
        module=sqlite.dbapi,
        poolclass=poolclass,
        connect_args={"timeout": busy_timeout_ms / 1000, "check_same_thread": False},
        **({"pool_size": 8, "max_overflow": 32} if poolclass is QueuePool else {}),
    )

    engine.dialect.statement_compiler = limits.LiteralLimits

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
        cursor = dbapi_conn.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            mode = cursor.execute("PRAGMA journal_mode = WAL").fetchone()
            if mode and str(mode[0]).lower() not in ("wal", "memory"):
                raise StorageError(f"could not switch the database to WAL (got {mode[0]})")
            cursor.execute(f"PRAGMA synchronous = {synchronous}")
            cursor.execute("PRAGMA foreign_keys = ON")
        finally:
            cursor.close()

    if not in_memory:
        where = Path(str(database)).expanduser().resolve()

        @event.listens_for(engine, "handle_error")
        def _explain(context: ExceptionContext) -> None:
            # The file system often says more than SQLite ("unable to open database file").
            explained = explain_sqlite(where, context.original_exception)
            if explained is not None:
                raise explained from context.original_exception

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        # Straight to the driver: through exec_driver_sql this cost as much as the claim.
        driver = conn.connection.driver_connection
        assert driver is not None
        if driver.in_transaction:  # a kept connection's write began it (_write_kept)
            return
        immediate = conn.get_execution_options().get("workq_write", False)
        driver.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine
