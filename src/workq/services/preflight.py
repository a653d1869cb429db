"""Checks a server makes before it serves: cheap, without opening the database (no driver
or SQLAlchemy import), so a hopeless database is refused at once rather than on every call."""

from __future__ import annotations

from pathlib import Path

from workq.config import Settings
from workq.db import sqlite
from workq.db.files import SIDE_FILES, check_sqlite_path, names_database_file
from workq.errors import NoDatabase

__all__ = [
    "SIDE_FILES",
    "check_storage",
    "describe_database",
    "describe_storage",
    "names_database",
    "require_database",
    "sqlite_path",
    "storage_warning",
]


def sqlite_path(settings: Settings) -> Path | None:
    """The SQLite file the settings name, or None (a server database, or memory)."""
    scheme, _, rest = settings.url.partition("://")
    if not scheme.startswith("sqlite") or not rest.startswith("/"):
        return None
    path = rest[1:].split("?", 1)[0]
    return Path(path) if path and path != ":memory:" else None


def require_database(settings: Settings, *, create: str) -> None:
    """Refuse a SQLite file that does not exist, rather than create it: for what only
    reads, an empty new database would answer as if it were the right one. ``create`` is
    how the caller makes one (a command, a tool).

    Raises:
        NoDatabase: the file is missing.
    """
    path = sqlite_path(settings)
    if path is not None and not path.exists():
        where = path.expanduser().resolve()
        raise NoDatabase(
            f"no database at {where}",
            hint=f"create it with {create}, or point to another with --db FILE "
            "(or ISSUES_DB); 'workq where' says which database a command uses",
            path=str(where),
        )


def check_storage(settings: Settings) -> None:
    """Refuse a database that can never open: a SQLite file whose folder is missing, a
    folder, or a file that is not a SQLite database. Faults that may pass (a held lock, a
    full disk, an unreachable PostgreSQL) are left to the open, which retries.

    Raises:
        StorageError: see ``check_sqlite_path``.
    """
    path = sqlite_path(settings)
    if path is not None:
        check_sqlite_path(path)


def describe_database(settings: Settings) -> str:
    """The database as a start line shows it: a SQLite file by its absolute path, a
    server's URL with its password hidden."""
    path = sqlite_path(settings)
    if path is not None:
        return f"sqlite:///{path.expanduser().resolve()}"
    from workq.db.dialect import describe_url  # imports SQLAlchemy: only for a server URL

    return describe_url(settings.url)


def names_database(settings: Settings, path: Path) -> bool:
    """Whether ``path`` is the settings' SQLite file or SQLite's file beside it: a file no
    command may open itself (see db/sqlite.py)."""
    database = sqlite_path(settings)
    return database is not None and names_database_file(path, database)


def describe_storage(settings: Settings) -> str:
    """The database as a start line shows it, with the SQLite library that serves a file."""
    shown = describe_database(settings)
    return f"{shown}, {sqlite.describe()}" if sqlite_path(settings) is not None else shown


def storage_warning(settings: Settings) -> str | None:
    """What a start line warns of the storage: a SQLite older than the WAL-reset fix."""
    return sqlite.wal_reset_warning() if sqlite_path(settings) is not None else None
