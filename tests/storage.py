"""What a test reads of a SQLite file from outside workq: a full dump, whether the file is
whole, and SQLite's own files beside it; and another process holding its write lock.
Through workq's own SQLite library (db/sqlite.py: one library per process)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing, contextmanager, suppress
from pathlib import Path

from sqlalchemy.engine import make_url

from workq.db import sqlite


def dump(db: Path) -> list[str]:
    """Every table's schema and rows, in a stable order. (Read on a read-write connection:
    a read-only one would leave the -wal and -shm files behind, and with them in place a
    read-only folder no longer stops SQLite.)"""
    lines: list[str] = []
    with closing(sqlite.connect(db)) as conn:
        tables = conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name"
        ).fetchall()
        for name, sql in tables:
            lines.append(str(sql))
            rows = conn.execute(f'SELECT * FROM "{name}"').fetchall()
            lines.extend(sorted(repr(row) for row in rows))
        lines.extend(
            str(sql)
            for (sql,) in conn.execute(
                "SELECT sql FROM sqlite_master WHERE type != 'table' AND sql IS NOT NULL "
                "ORDER BY name"
            )
        )
    return lines


def integrity_problems(db: Path) -> list[str]:
    """What ``PRAGMA integrity_check`` finds wrong with the file (empty: whole), or why it
    could not finish (a file too damaged to check)."""
    try:
        with closing(sqlite.connect(db)) as conn:
            found = [str(line) for (line,) in conn.execute("PRAGMA integrity_check")]
    except sqlite.DatabaseError as exc:
        return [f"integrity_check could not finish: {exc}"]
    return [] if found == ["ok"] else found


def assert_intact(db: Path) -> None:
    """The file is whole: every crash test ends with this."""
    problems = integrity_problems(db)
    assert not problems, f"{db} is damaged: {problems[:10]}"


def assert_intact_at(where: Path | str) -> None:
    """The end of every crash test: ``assert_intact`` on the SQLite file ``where`` names, a
    path or a database URL. A PostgreSQL database is left alone: it checks its own pages."""
    if isinstance(where, str):
        url = make_url(where)
        if url.get_backend_name() != "sqlite":
            return
        assert url.database and url.database != ":memory:", f"no SQLite file in {where}"
        where = Path(url.database)
    assert_intact(where)


def side_files(db: Path) -> dict[str, int]:
    """The inode of each of SQLite's files beside ``db`` (``-wal``, ``-shm``) that exists.
    Read by ``stat``, never by opening them (db/sqlite.py says why). While a process holds a
    connection to the file they stay, and stay the same files: one deleted and made again
    has a new inode."""
    found = {}
    for end in ("-wal", "-shm"):
        with suppress(FileNotFoundError):
            found[end] = os.stat(f"{db}{end}").st_ino
    return found


_HOLDER = """
import sys
from workq.db import sqlite
conn = sqlite.connect(sys.argv[1], isolation_level=None, timeout=30)
conn.execute("BEGIN IMMEDIATE")
print("holding", flush=True)
sys.stdin.readline()
conn.execute("ROLLBACK")
"""


@contextmanager
def write_lock(db: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process inside BEGIN IMMEDIATE on ``db`` until its stdin gets a line (or
    the block ends)."""
    with subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
            yield holder
        finally:
            holder.communicate("\n", timeout=30)
