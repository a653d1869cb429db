"""What a SQLite database path must be before anything opens it: path checks, and the
header read through SQLite (never by opening the file: see db/sqlite.py). No SQLAlchemy, so
a server can refuse a hopeless path before it starts serving."""

from __future__ import annotations

import os
from pathlib import Path

from workq.db.sqlite import check_header
from workq.errors import StorageError

# The files SQLite keeps beside a database.
SIDE_FILES = ("-wal", "-shm", "-journal")


def check_sqlite_path(path: Path) -> None:
    """Refuse a path that can never hold the queue: its folder is missing, it is a folder,
    or it is a file that is not a SQLite database. Anything that may pass (a lock, a full
    disk, permissions) is left to the open itself.

    Raises:
        StorageError: the folder does not exist, or the path is a folder.
        CorruptDatabase: the file holds something other than a SQLite database.
    """
    where = path.expanduser().resolve()
    if not where.parent.is_dir():
        raise StorageError(
            f"the folder of the database does not exist: {where.parent}",
            hint="create it, or point ISSUES_DB / --db at an existing folder",
        )
    if where.is_dir():
        raise StorageError(
            f"{where} is a folder, not a database file", hint="point --db / ISSUES_DB at a file"
        )
    check_header(where)


def names_database_file(candidate: Path, database: Path) -> bool:
    """Whether ``candidate`` is the database file or one of SQLite's files beside it, which
    nothing but SQLite may open while the database is in use (see db/sqlite.py)."""
    where = os.path.realpath(candidate.expanduser())
    base = os.path.realpath(database.expanduser())
    return where in {base, *(base + end for end in SIDE_FILES)}
