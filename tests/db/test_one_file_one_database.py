"""A process never breaks its own SQLite locks: nothing but SQLite opens the database file,
and a process has one Database per file (db/sqlite.py says why both matter).

The failure these tests catch: POSIX locks belong to a process, and closing any descriptor
of the file releases all of them. A process that opened the file itself (to read its header)
while its connections were live lost its SHARED lock on the WAL index; the next process to
close its last connection then believed it was the last one, checkpointed and deleted the
WAL under the first, and the file was left corrupt.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.storage import assert_intact, side_files
from tests.workq_cli import WORKQ
from workq.config import Settings
from workq.db import sqlite
from workq.db.engine import Database
from workq.errors import CorruptDatabase, StorageError
from workq.services.queue import issues, listing
from workq.services.runtime import open_database, open_queue


def create_in_another_process(db: Path, title: str) -> None:
    done = subprocess.run(
        [WORKQ, "--db", str(db), "create", title],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_opening_the_file_again_in_a_process_keeps_its_locks(tmp_path: Path) -> None:
    """The server's queue is live; the board (or the mirror) opens the same file in the same
    process; other processes come and go. The server's WAL files outlive every one of them,
    and every write is there, in a whole file."""
    db = tmp_path / "q.db"
    server = open_queue(Settings(db_path=db))
    try:
        issues.create(server, title="the server's")
        held = side_files(db)
        assert set(held) == {"-wal", "-shm"}
        board = open_queue(Settings(db_path=db))  # what `serve --board` does
        mirror = open_queue(Settings(db_path=db))  # and `--sync-github`
        try:
            for n in range(3):
                create_in_another_process(db, f"from the CLI {n}")
                assert side_files(db) == held, "another process removed the server's WAL files"
                issues.create(board, title=f"the board's {n}")
        finally:
            mirror.db.dispose()
            board.db.dispose()
        create_in_another_process(db, "after the board closed")
        assert side_files(db) == held
        assert len(listing.list_issues(server, limit=100).items) == 8
    finally:
        server.db.dispose()
    assert_intact(db)


def test_one_database_per_file_per_process(tmp_path: Path) -> None:
    settings = Settings(db_path=tmp_path / "q.db")
    first = open_database(settings)
    try:
        same = open_database(Settings(db_path=Path(os.path.relpath(tmp_path / "q.db"))))
        assert same is first
        with pytest.raises(StorageError, match="open in this process already"):
            Database(settings.url)
        same.dispose()
        with first.read() as conn:  # still open for its first user
            conn.exec_driver_sql("SELECT 1")
    finally:
        first.dispose()
    again = open_database(settings)  # the last dispose closed it: a new one opens
    try:
        assert again is not first
    finally:
        again.dispose()
    again.dispose()  # one dispose too many changes nothing
    other = open_database(Settings(db_path=tmp_path / "other.db"))
    other.dispose()


def test_a_file_that_is_not_a_database_is_refused_without_opening_it(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("these are notes, not a database\n" * 20)
    before = notes.read_bytes()
    with pytest.raises(CorruptDatabase, match="not a SQLite database"):
        open_database(Settings(db_path=notes))
    assert notes.read_bytes() == before
    assert not Path(f"{notes}-wal").exists() and not Path(f"{notes}-shm").exists()


def test_the_process_uses_one_sqlite_library(tmp_path: Path) -> None:
    """Every connection of the process, workq's and the tests' alike, is of one library."""
    db = open_database(Settings(db_path=tmp_path / "x.db"))
    try:
        with db.engine.connect() as conn:
            assert sqlite.is_connection(conn.connection.driver_connection)
    finally:
        db.dispose()
    assert sqlite.describe().startswith(f"SQLite {sqlite.version} (")
