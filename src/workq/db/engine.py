"""Engines and transactions: SQLite pragmas, BEGIN IMMEDIATE for writes, bounded busy retries."""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.exc import DBAPIError
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool, QueuePool

from workq.db.failures import translate
from workq.errors import Busy, StorageError

T = TypeVar("T")

MIN_SQLITE = (3, 35, 0)  # RETURNING
WRITE_ATTEMPTS = 3
# What the storage can raise; anything else is a bug and propagates as it is.
DRIVER_ERRORS = (DBAPIError, sqlite3.Error, OSError)


class Database:
    """One engine, and the two ways to use it: a read snapshot or a write transaction."""

    def __init__(
        self,
        url: str,
        *,
        busy_timeout_ms: int = 10_000,
        synchronous: str = "NORMAL",
        pool_size: int = 5,
    ) -> None:
        self.url = url
        self.dialect = make_url(url).get_backend_name()
        self.busy_timeout_ms = busy_timeout_ms
        if self.dialect == "sqlite":
            self.engine = _sqlite_engine(url, busy_timeout_ms, synchronous)
        else:
            self.engine = create_engine(
                url,
                poolclass=QueuePool,
                pool_size=pool_size,
                max_overflow=pool_size * 2,
                pool_timeout=30,
                pool_pre_ping=True,
                pool_recycle=1800,
            )

    @property
    def is_sqlite(self) -> bool:
        return self.dialect == "sqlite"

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A read-only snapshot (a deferred transaction on SQLite)."""
        try:
            with self.engine.connect() as conn, conn.begin():
                yield conn
        except DRIVER_ERRORS as exc:
            raise translate(exc) from exc

    @contextmanager
    def _write_once(self) -> Iterator[Connection]:
        with (
            self.engine.connect().execution_options(workq_write=True) as conn,
            conn.begin(),
        ):
            yield conn

    def write(self, work: Callable[[Connection], T]) -> T:
        """Run ``work`` in one write transaction, retrying a busy database with backoff.

        ``work`` must be safe to run again: it runs inside the transaction only, and a busy
        error before commit means nothing of it was applied.
        """
        delay = 0.01
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            try:
                with self._write_once() as conn:
                    return work(conn)
            except DRIVER_ERRORS as exc:
                error = translate(exc)
                if not isinstance(error, Busy) or attempt == WRITE_ATTEMPTS:
                    raise error from exc
            time.sleep(delay * (1 + random.random()))
            delay = min(delay * 4, 1.0)
        raise Busy()  # pragma: no cover - the loop always returns or raises

    def dispose(self) -> None:
        self.engine.dispose()


def _sqlite_engine(url: str, busy_timeout_ms: int, synchronous: str) -> Engine:
    if sqlite3.sqlite_version_info < MIN_SQLITE:
        raise StorageError(
            f"SQLite {sqlite3.sqlite_version} is too old; workq needs 3.35 or newer",
            hint="upgrade Python or its SQLite library",
        )
    database = make_url(url).database
    if database and database != ":memory:":
        folder = Path(database).expanduser().resolve().parent
        if not folder.is_dir():
            raise StorageError(
                f"the folder of the database does not exist: {folder}",
                hint="create it, or point ISSUES_DB / --db at an existing folder",
            )
    engine = create_engine(
        url,
        poolclass=NullPool if database in (None, "", ":memory:") else QueuePool,
        connect_args={"timeout": busy_timeout_ms / 1000, "check_same_thread": False},
        **({} if database in (None, "", ":memory:") else {"pool_size": 8, "max_overflow": 32}),
    )

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

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        immediate = conn.get_execution_options().get("workq_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine
