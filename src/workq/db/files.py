"""What a SQLite database path must be before anything opens it. Pure path checks: no
driver, no SQLAlchemy, so a server can refuse a hopeless path before it starts serving."""

from __future__ import annotations

from pathlib import Path

from workq.errors import CorruptDatabase, StorageError

# The first 16 bytes of every SQLite 3 database file (an empty file is a new database).
SQLITE_HEADER = b"SQLite format 3\x00"


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
    try:
        with where.open("rb") as file:
            header = file.read(len(SQLITE_HEADER))
    except OSError:
        return  # missing (created on first use) or unreadable (the open explains why)
    if header and header != SQLITE_HEADER:
        raise CorruptDatabase(
            f"{where} is not a SQLite database",
            hint="point --db / ISSUES_DB at a workq database, or move this file away",
        )
