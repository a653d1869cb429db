"""The one place where driver errors become workq errors."""

from __future__ import annotations

import os
from pathlib import Path

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


# What SQLite's words mean, said so that a person knows the cause: (message, hint or None
# for the error class's own). The driver's text stays in the ``cause`` fact.
_SQLITE_MEANS: dict[str, tuple[str, str | None]] = {
    "database is locked": (
        "another process held a lock on the database for longer than the busy timeout",
        "retry in a moment (nothing was changed); if it persists, look for a process holding "
        "a long transaction on the database, or raise WORKQ_BUSY_TIMEOUT_MS",
    ),
    "readonly database": (
        "the database cannot be written: the file, its folder or its filesystem is read-only",
        None,
    ),
    "database or disk is full": ("the disk holding the database is full", None),
    "disk i/o error": (
        "the disk reported an I/O error while reading or writing the database",
        "check the disk and the filesystem (dmesg), then run 'workq doctor'",
    ),
    "file is not a database": (
        "the file is not a SQLite database",
        "point --db / ISSUES_DB at a workq database, or move this file away",
    ),
    "database disk image is malformed": ("the database file is damaged (corrupt pages)", None),
    "unable to open database file": (
        "SQLite could not open the database file",
        "check that the path names a file (not a folder) in a folder this user can write: "
        "SQLite creates the -wal and -shm files beside it",
    ),
}


def explain_sqlite(path: Path, exc: BaseException) -> WorkqError | None:
    """Name the cause of a SQLite open or write failure from the state of the file and its
    folder (read-only, a folder, missing); None if the file system shows nothing wrong."""
    original = getattr(exc, "orig", None) or exc
    text = str(original).strip()
    if not any(w in text.lower() for w in ("unable to open", "readonly database", "i/o error")):
        return None
    folder = path.parent
    if path.is_dir():
        return StorageError(
            f"{path} is a folder, not a database file",
            hint="point --db / ISSUES_DB at a file",
            cause=text,
        )
    companions = [p for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists()]
    for file in companions:
        if not os.access(file, os.W_OK):
            return ReadOnlyStorage(
                f"the database file {file} cannot be written (read-only file or filesystem)",
                hint=f"make {file.name} writable (chmod, chattr -i, or remount read-write)",
                cause=text,
            )
    if not os.access(folder, os.W_OK):
        return ReadOnlyStorage(
            f"the folder {folder} cannot be written, and SQLite must create "
            f"{path.name}-wal and {path.name}-shm in it",
            hint="make the folder writable (chmod, chattr -i, or remount read-write)",
            cause=text,
        )
    return None


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
            message, hint = _SQLITE_MEANS.get(needle, (None, None))
            error = kind(message, cause=str(original).strip())
            if hint is not None:
                error.hint = hint
            return error
    if isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated:
        return ConnectionLost(cause=str(original).strip())
    if isinstance(exc, sa_exc.IntegrityError):
        return StorageError("the database refused the change", cause=str(original).strip())
    return StorageError(f"database error: {str(original).strip()[:300]}")
