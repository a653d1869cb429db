"""The engine's transactions: kept SQLite connections never leak a lock or a snapshot."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from workq.config import Settings
from workq.domain.authority import Authority
from workq.errors import Busy, NotFound
from workq.services.queue import claims, issues, ready_queue
from workq.services.runtime import open_queue


def test_a_failed_write_never_leaves_the_write_lock_held(tmp_path: Path) -> None:
    first = open_queue(Settings(db_path=tmp_path / "q.db"))
    other = open_queue(Settings(db_path=tmp_path / "q.db", busy_timeout_ms=200))
    try:
        issues.create(first, title="a")
        with pytest.raises(NotFound):
            claims.complete(first, 99, Authority.of({"run"}))
        assert issues.create(other, title="b").number == 2
    finally:
        first.db.dispose()
        other.db.dispose()


def test_a_held_write_lock_gives_busy_and_nothing_changes(tmp_path: Path) -> None:
    queue = open_queue(Settings(db_path=tmp_path / "q.db", busy_timeout_ms=200))
    holder = open_queue(Settings(db_path=tmp_path / "q.db"))
    try:
        raw = holder.db.engine.raw_connection()
        raw.driver_connection.execute("BEGIN IMMEDIATE")  # type: ignore[union-attr]
        with pytest.raises(Busy):
            issues.create(queue, title="blocked")
        raw.driver_connection.execute("ROLLBACK")  # type: ignore[union-attr]
        raw.close()
        assert issues.create(queue, title="after").number == 1
    finally:
        queue.db.dispose()
        holder.db.dispose()


def test_reads_see_writes_from_other_threads_and_processes(tmp_path: Path) -> None:
    queue = open_queue(Settings(db_path=tmp_path / "q.db"))
    writer = open_queue(Settings(db_path=tmp_path / "q.db"))
    try:
        assert ready_queue.ready(queue) == []
        issues.create(writer, title="from elsewhere")
        assert [i.number for i in ready_queue.ready(queue)] == [1]
        seen: list[int] = []
        thread = threading.Thread(
            target=lambda: seen.extend(i.number for i in ready_queue.ready(queue))
        )
        thread.start()
        thread.join(10)
        assert seen == [1]
    finally:
        queue.db.dispose()
        writer.db.dispose()


def test_writers_of_one_process_queue_in_process_not_on_the_file_lock(tmp_path: Path) -> None:
    """While one thread writes, another thread of the process waits for it before asking
    SQLite for the lock (sqlite3's trace shows each statement as it starts): it does not
    poll the file's lock in SQLite's busy handler."""
    queue = open_queue(Settings(db_path=tmp_path / "q.db"))
    seen: list[tuple[str, str]] = []
    inside, go_on = threading.Event(), threading.Event()

    def traced(name: str, conn: Any) -> None:
        driver = conn.connection.driver_connection
        driver.set_trace_callback(lambda statement: seen.append((name, statement.split()[0])))

    def slow(conn: Any) -> None:
        traced("first", conn)
        conn.exec_driver_sql("SELECT 1")
        inside.set()
        go_on.wait(10)

    def quick(conn: Any) -> None:
        conn.exec_driver_sql("SELECT 1")

    def second() -> None:
        # Trace this thread's kept connection before it writes.
        with queue.db.read() as conn:
            traced("second", conn)
        queue.db.write(quick)

    first = threading.Thread(target=queue.db.write, args=(slow,))
    other = threading.Thread(target=second)
    try:
        first.start()
        assert inside.wait(10)
        other.start()
        other.join(0.5)  # it is waiting, and has not begun a transaction
        began_early = ("second", "BEGIN") in seen
    finally:
        go_on.set()
        first.join(30)
        other.join(30)
        queue.db.dispose()
    assert not began_early
    order = [entry for entry in seen if entry[1] in ("BEGIN", "COMMIT")]
    assert order.index(("first", "COMMIT")) < order.index(("second", "BEGIN"))
