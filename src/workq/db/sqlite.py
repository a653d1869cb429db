"""The one SQLite library of this process, and the rules for touching a database file.

Two facts decide how a process may touch a SQLite file while it holds connections to it:

- POSIX record locks belong to a process, and closing *any* descriptor of a file releases
  every lock the process holds on it. SQLite works around this for the descriptors it opens
  itself (it keeps one table of open files and delays a close while a lock is held), but it
  cannot know of a descriptor opened by anything else. So nothing in workq opens the
  database file, its ``-wal`` or its ``-shm`` except through SQLite.
- Each copy of the SQLite library keeps its own table of open files. Two copies in one
  process (the standard library's and a bundled one) break each other's locks the same way.
  So the process uses one library: this module's ``dbapi``, for every connection it makes.

SQLite 3.7.0 to 3.51.2 can corrupt a WAL database in a rare race (two connections writing
and checkpointing at once, workq's everyday pattern); 3.51.3 fixed it. Where the bundled
library (``pysqlite3``, a build of the standard module against a newer SQLite) is installed
and newer than the standard library's, it is the one used.
"""

from __future__ import annotations

import os
import sqlite3 as _stdlib
from pathlib import Path
from types import ModuleType
from typing import Any, cast
from urllib.parse import quote

from workq.errors import CorruptDatabase

# The first release without the WAL-reset corruption bug.
WAL_RESET_FIXED = (3, 51, 3)
MINIMUM = (3, 35, 0)  # RETURNING


def _choose() -> tuple[ModuleType, str]:
    # WORKQ_SQLITE=stdlib keeps the standard library's (to compare the two, or where another
    # part of the same process must share workq's library and can only use the standard one).
    if os.environ.get("WORKQ_SQLITE", "").strip().lower() == "stdlib":
        return _stdlib, "sqlite3"
    try:
        import pysqlite3.dbapi2 as bundled  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:
        return _stdlib, "sqlite3"
    if bundled.sqlite_version_info >= _stdlib.sqlite_version_info:
        return cast(ModuleType, bundled), "pysqlite3"
    return _stdlib, "sqlite3"


dbapi, library = _choose()
version: str = dbapi.sqlite_version
version_info: tuple[int, int, int] = dbapi.sqlite_version_info
# The library's exceptions (the bundled library has classes of its own).
Error: type[Exception] = dbapi.Error
DatabaseError: type[Exception] = dbapi.DatabaseError
OperationalError: type[Exception] = dbapi.OperationalError


def connect(target: str | Path, **options: Any) -> _stdlib.Connection:
    """A connection of this process's SQLite library (typed as the standard one's: the
    bundled module is the same code)."""
    return cast(_stdlib.Connection, dbapi.connect(target, **options))


def is_connection(value: object) -> bool:
    return isinstance(value, dbapi.Connection)


def has_wal_reset_fix() -> bool:
    return version_info >= WAL_RESET_FIXED


def describe() -> str:
    """The library as a start line or ``doctor`` names it."""
    return f"SQLite {version} ({library})"


def wal_reset_warning() -> str | None:
    """What to tell a person running on a SQLite with the WAL-reset bug, or None."""
    if has_wal_reset_fix():
        return None
    fixed = ".".join(map(str, WAL_RESET_FIXED))
    return (
        f"SQLite {version} predates {fixed}, which fixed a rare corruption of WAL databases "
        "when several connections write and checkpoint at once; install workq's bundled "
        "SQLite (pip install pysqlite3) or a Python whose SQLite is newer"
    )


def check_header(path: Path) -> None:
    """Refuse a file that is not a SQLite database, reading its header through SQLite
    itself (never by opening the file: see the module's docstring). A missing or unreadable
    file passes: the real open creates it or says why it cannot.

    Raises:
        CorruptDatabase: the file holds something other than a SQLite database.
    """
    uri = f"file:{quote(str(path))}?mode=rw"
    try:
        probe = dbapi.connect(uri, uri=True, isolation_level=None)
    except dbapi.Error:
        return
    try:
        probe.execute("PRAGMA schema_version").fetchone()
    except dbapi.DatabaseError as exc:
        if "not a database" in str(exc).lower():
            raise CorruptDatabase(
                f"{path} is not a SQLite database",
                hint="point --db / ISSUES_DB at a workq database, or move this file away",
            ) from None
    finally:
        probe.close()
