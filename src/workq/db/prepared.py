"""Hot-path statements: Core built once, compiled once per dialect, run on the driver's cursor.

SQLAlchemy's per-execution work (parameter processing, result metadata, events) costs about
as much as SQLite's own work for a claim, and it runs while the write lock is held. A
``Prepared`` statement is compiled once to SQLite SQL with named parameters; its datetime
parameters and result columns are converted by the functions ``UTCDateTime`` stores them
with. On PostgreSQL it is compiled once more, for psycopg, and runs on psycopg's cursor as a
server-side prepared statement; driver errors are wrapped as SQLAlchemy would wrap them.

A statement's rows are typed: ``Prepared(stmt, Row)`` with a ``NamedTuple`` whose fields are
the statement's columns, in order (checked when it is built).
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Generic, TypeVar, cast, overload

from sqlalchemy import Connection
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.dml import UpdateBase
from sqlalchemy.sql.elements import TextClause
from sqlalchemy.sql.selectable import Select

from workq.db import limits
from workq.db.times import UTCDateTime, from_sqlite, to_sqlite, to_utc

__all__ = ["Prepared", "from_sqlite", "to_sqlite"]

R = TypeVar("R")
_SQLITE = sqlite.dialect(paramstyle="named")
_SQLITE.statement_compiler = limits.LiteralLimits


class Prepared(Generic[R]):
    """One statement, compiled once per dialect. ``rows`` and ``count`` run it inside the
    caller's transaction (``conn``), whatever the engine."""

    @overload
    def __init__(self: Prepared[Any], stmt: Select[Any] | UpdateBase | TextClause) -> None: ...
    @overload
    def __init__(
        self: Prepared[R], stmt: Select[Any] | UpdateBase | TextClause, row: Callable[..., R]
    ) -> None: ...
    def __init__(
        self, stmt: Select[Any] | UpdateBase | TextClause, row: Callable[..., Any] | None = None
    ) -> None:
        self.stmt = stmt
        columns: Sequence[Any] = []
        if isinstance(stmt, Select):
            columns = list(stmt.selected_columns)
        elif isinstance(stmt, UpdateBase) and stmt._returning:
            columns = list(stmt._returning)
        names = [c.key for c in columns]
        if row is None:
            row = namedtuple("Row", names) if names else None
        elif tuple(getattr(row, "_fields", names)) != tuple(names):
            raise TypeError(f"{row} does not have the statement's columns {names}")
        self.row = cast("Callable[..., R] | None", row)
        self.times = [i for i, c in enumerate(columns) if isinstance(c.type, UTCDateTime)]
        self._compiled: dict[str, tuple[str, dict[str, Any]]] = {}
        # SQLite's SQL, its post-compile names, its fixed values (``_sqlite_once``)
        self._sqlite: tuple[str, tuple[str, ...], dict[str, Any]] | None = None
        self._by_value: dict[tuple[Any, ...], tuple[str, tuple[str, ...]]] = {}

    def compiled(self, dialect: Dialect) -> tuple[str, dict[str, Any]]:
        """The SQL for ``dialect``, and the values fixed in the statement (literals,
        ``.values(...)``), which are parameters too."""
        found = self._compiled.get(dialect.name)
        if found is None:
            compiled = self.stmt.compile(dialect=dialect)
            found = self._compiled[dialect.name] = (str(compiled), dict(compiled.params))
        return found

    def _postgres(self, conn: Connection, params: Mapping[str, Any], *, fetch: bool) -> Any:
        sql, defaults = self.compiled(conn.dialect)
        bound = {**defaults, **params}
        driver = conn.connection.driver_connection
        assert driver is not None
        cursor = driver.cursor()
        try:
            cursor.execute(sql, bound, prepare=True)
            return cursor.fetchall() if fetch else cursor
        except driver.Error as err:
            lost = bool(driver.broken or driver.closed)
            if lost:
                conn.invalidate(err)
            raise DBAPIError.instance(
                sql, bound, err, type(driver).Error, connection_invalidated=lost
            ) from err
        return cursor

    @property
    def sql(self) -> str:
        """The SQLite SQL (named parameters), as the hot path runs it."""
        return self.compiled(_SQLITE)[0]

    def sqlite_call(self, params: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        """The SQLite SQL and parameters to run this statement with ``params`` (with the
        statement's fixed values, converted as SQLite stores them): the hot path's, and a
        benchmark's running the very same statement on the raw driver."""
        sql, literal, fixed = self._sqlite or self._sqlite_once()
        bound = dict(fixed)
        for key, value in params.items():
            bound[key] = to_sqlite(value) if isinstance(value, datetime) else value
        if literal:
            sql, names = self._expanded(sql, bound, literal)
            for name in names:
                del bound[name]
        return sql, bound

    def _sqlite_once(self) -> tuple[str, tuple[str, ...], dict[str, Any]]:
        """The SQLite SQL, the names of its post-compile tokens (LIMIT, OFFSET) and the
        statement's fixed values, kept."""
        sql, fixed = self.compiled(_SQLITE)
        literal = limits.expand(sql, _Names())[1] if limits.has_literals(sql) else ()
        self._sqlite = (sql, literal, fixed)
        return self._sqlite

    def _raw(self, conn: Connection, params: Mapping[str, Any]) -> Any:
        driver = conn.connection.driver_connection
        assert driver is not None
        return driver.execute(*self.sqlite_call(params))

    def _expanded(
        self, sql: str, bound: Mapping[str, Any], literal: tuple[str, ...]
    ) -> tuple[str, tuple[str, ...]]:
        """The SQL with its LIMIT and OFFSET written in (db/limits.py), kept per value."""
        key = tuple(bound[name] for name in literal)
        found = self._by_value.get(key)
        if found is None:
            found = limits.expand(sql, bound)
            if len(self._by_value) < 64:
                self._by_value[key] = found
        return found

    def rows(self, conn: Connection, params: Mapping[str, Any]) -> list[R]:
        make = self.row
        assert make is not None
        postgres = conn.dialect.name == "postgresql"
        if postgres:
            raw = self._postgres(conn, params, fetch=True)
        else:
            raw = self._raw(conn, params).fetchall()
        if not self.times:
            return [make(*values) for values in raw]
        convert = to_utc if postgres else from_sqlite
        found: list[R] = []
        for values in raw:
            values = list(values)
            for i in self.times:
                if values[i] is not None:
                    values[i] = convert(values[i])
            found.append(make(*values))
        return found

    def count(self, conn: Connection, params: Mapping[str, Any]) -> int:
        """Run a statement without results; the number of rows it changed."""
        if conn.dialect.name == "postgresql":
            return int(self._postgres(conn, params, fetch=False).rowcount)
        return int(self._raw(conn, params).rowcount)


class _Names(dict[str, Any]):
    """Every name maps to 0: finds the names of a statement's post-compile tokens."""

    def __missing__(self, key: str) -> int:
        return 0
