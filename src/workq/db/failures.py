"""The one place where driver errors become workq errors."""

from __future__ import annotations

from sqlalchemy import exc as sa_exc

from workq.errors import (
    Busy,
    ConnectionLost,
    CorruptDatabase,
    ReadOnlyStorage,
    StorageError,
    StorageFull,
    WorkqError,
)

_BY_MESSAGE: tuple[tuple[str, type[StorageError]], ...] = (
    ("database is locked", Busy),
    ("database table is locked", Busy),
    ("database is busy", Busy),
    ("readonly database", ReadOnlyStorage),
    ("read-only", ReadOnlyStorage),
    ("database or disk is full", StorageFull),
    ("disk i/o error", StorageError),
    ("file is not a database", CorruptDatabase),
    ("database disk image is malformed", CorruptDatabase),
    ("no such table", CorruptDatabase),
    ("unable to open database file", StorageError),
    ("could not serialize access", Busy),
    ("deadlock detected", Busy),
    ("lock timeout", Busy),
    ("server closed the connection", ConnectionLost),
    ("connection refused", ConnectionLost),
    ("terminating connection", ConnectionLost),
    ("connection is closed", ConnectionLost),
    ("connection failed", ConnectionLost),
    ("consuming input failed", ConnectionLost),
    ("the connection is lost", ConnectionLost),
    ("the database system is", ConnectionLost),  # starting up, shutting down, in recovery
    ("timeout expired", ConnectionLost),
)


def translate(exc: BaseException) -> WorkqError:
    """Map a driver or SQLAlchemy error to a workq error that says what to do next."""
    if isinstance(exc, WorkqError):
        return exc
    if isinstance(exc, sa_exc.TimeoutError):
        return Busy(
            "every database connection of the pool is in use",
            hint="retry in a moment; raise WORKQ_POOL_SIZE if this persists",
        )
    original = getattr(exc, "orig", None) or exc
    text = str(original).strip().lower()
    if "authentication failed" in text or ('database "' in text and "does not exist" in text):
        return StorageError(
            "the database server refused the connection",
            hint="check the user, password and database name in the URL",
            cause=str(original).strip(),
        )
    if 'relation "' in text and "does not exist" in text:  # PostgreSQL's "no such table"
        text = "no such table"
    for needle, kind in _BY_MESSAGE:
        if needle in text:
            if kind is CorruptDatabase and needle == "no such table":
                return CorruptDatabase(
                    "the database has no workq schema",
                    hint="run 'workq db upgrade' or point --db at a workq database",
                    cause=str(original).strip(),
                )
            return kind(cause=str(original).strip())
    if isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated:
        return ConnectionLost(cause=str(original).strip())
    if isinstance(exc, sa_exc.IntegrityError):
        return StorageError("the database refused the change", cause=str(original).strip())
    return StorageError(f"database error: {str(original).strip()[:300]}")
