"""Hot-path statements: Core built once, and on SQLite run straight on the driver's cursor.

SQLAlchemy's per-execution work (parameter processing, result metadata, events) costs about
as much as SQLite's own work for a claim, and it runs while the write lock is held. A
``Prepared`` statement is compiled once to SQLite SQL with named parameters; its datetime
parameters and result columns are converted here the way ``UTCDateTime`` stores them.
On PostgreSQL it is compiled once more, for psycopg, and runs on psycopg's cursor as a
server-side prepared statement; driver errors are wrapped as SQLAlchemy would wrap them.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.dialects import sqlite
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.dml import UpdateBase
from sqlalchemy.sql.selectable import Select

from workq.db.models import UTCDateTime

_SQLITE = sqlite.dialect(paramstyle="named")


def to_sqlite(value: datetime) -> str:
    """As SQLAlchemy's SQLite DateTime stores it: "YYYY-MM-DD HH:MM:SS.ffffff", in UTC."""
    if value.tzinfo is not UTC:
        value = value.astimezone(UTC)
    return value.replace(tzinfo=None).isoformat(" ", "microseconds")


def from_sqlite(value: str | None) -> datetime | None:
    if value is None:
        return None
    return datetime.fromisoformat(value).replace(tzinfo=UTC)


class Prepared:
    """One statement, compiled once. ``rows`` and ``count`` run it inside the caller's
    transaction (``conn``), whatever the engine."""

    def __init__(self, stmt: Select[Any] | UpdateBase) -> None:
        self.stmt = stmt
        compiled = stmt.compile(dialect=_SQLITE)
        self.sql = str(compiled)
        # Values fixed in the statement (literals, .values(...)) become parameters too.
        self.defaults: dict[str, Any] = dict(compiled.params)
        columns: Sequence[Any] = []
        if isinstance(stmt, Select):
            columns = list(stmt.selected_columns)
        elif getattr(stmt, "_returning", None):
            columns = list(stmt._returning)
        names = [c.key for c in columns]
        self.row_type = namedtuple("Row", names) if names else None
        self.times = [i for i, c in enumerate(columns) if isinstance(c.type, UTCDateTime)]
        self._pg: tuple[str, dict[str, Any]] | None = None

    def _postgres(self, conn: Connection, params: Mapping[str, Any]) -> Any:
        if self._pg is None:
            compiled = self.stmt.compile(dialect=conn.dialect)
            self._pg = (str(compiled), dict(compiled.params))
        sql, defaults = self._pg
        bound = {**defaults, **params}
        driver = conn.connection.driver_connection
        assert driver is not None
        cursor = driver.cursor()
        try:
            cursor.execute(sql, bound, prepare=True)
        except driver.Error as err:
            lost = bool(driver.broken or driver.closed)
            if lost:
                conn.invalidate(err)
            raise DBAPIError.instance(
                sql, bound, err, type(driver).Error, connection_invalidated=lost
            ) from err
        return cursor

    def _raw(self, conn: Connection, params: Mapping[str, Any]) -> Any:
        bound = dict(self.defaults)
        for key, value in params.items():
            bound[key] = to_sqlite(value) if isinstance(value, datetime) else value
        driver = conn.connection.driver_connection
        assert driver is not None
        return driver.execute(self.sql, bound)

    def rows(self, conn: Connection, params: Mapping[str, Any]) -> list[Any]:
        assert self.row_type is not None
        postgres = conn.dialect.name == "postgresql"
        cursor = self._postgres(conn, params) if postgres else self._raw(conn, params)
        found = []
        for raw in cursor.fetchall():
            values = list(raw)
            for i in self.times:
                if postgres:
                    values[i] = values[i] and values[i].astimezone(UTC)
                else:
                    values[i] = from_sqlite(values[i])
            found.append(self.row_type(*values))
        return found

    def count(self, conn: Connection, params: Mapping[str, Any]) -> int:
        """Run a statement without results; the number of rows it changed."""
        if conn.dialect.name == "postgresql":
            return int(self._postgres(conn, params).rowcount)
        return int(self._raw(conn, params).rowcount)
