"""How a moment is stored: UTC on every engine, as text on SQLite (``UTCDateTime``), by one
pair of functions the hot path's prepared statements use too (db/prepared.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import DateTime, Dialect, TypeDecorator
from sqlalchemy.dialects import sqlite
from sqlalchemy.types import TypeEngine


@lru_cache(maxsize=64)
def to_sqlite(value: datetime) -> str:
    """How a datetime is stored on SQLite: "YYYY-MM-DD HH:MM:SS.ffffff" in UTC (the format
    SQLAlchemy's SQLite DateTime uses, so text comparisons order by time). Kept for the
    last few moments: a change stores its one ``now`` in several columns and rows, and
    each conversion costs about a microsecond."""
    if value.tzinfo is None:
        raise ValueError("naive datetime given to the database")
    if value.tzinfo is not UTC:
        value = value.astimezone(UTC)
    return value.replace(tzinfo=None).isoformat(" ", "microseconds")


def from_sqlite(value: str) -> datetime:
    """The aware UTC datetime of a value stored by :func:`to_sqlite`."""
    return to_utc(datetime.fromisoformat(value))


def to_utc(value: datetime) -> datetime:
    """Aware, in UTC (a naive value from the database is UTC)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class _SQLiteStamp(sqlite.DATETIME):
    """DATETIME in the schema, with the conversion left to UTCDateTime (the same functions
    the hot path's prepared statements use)."""

    def bind_processor(self, dialect: Dialect) -> None:
        return None

    def result_processor(self, dialect: Dialect, coltype: object) -> None:
        return None


class UTCDateTime(TypeDecorator[datetime]):
    """An aware UTC datetime on every engine (SQLite stores it as text, by to_sqlite)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "sqlite":
            return _SQLiteStamp()  # type: ignore[no-untyped-call]
        return dialect.type_descriptor(self.impl)

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        if dialect.name == "sqlite":
            return to_sqlite(value)
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the database")
        return value.astimezone(UTC)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if isinstance(value, str):
            return from_sqlite(value)
        assert isinstance(value, datetime)
        return to_utc(value)
