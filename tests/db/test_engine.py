"""The engine's transactions: kept SQLite connections never leak a lock or a snapshot."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from workq.config import Settings
from workq.errors import Busy, NotFound
from workq.services.queue import claims, issues, ready_queue
from workq.services.runtime import open_queue


def test_a_failed_write_never_leaves_the_write_lock_held(tmp_path: Path) -> None:
    first = open_queue(Settings(db_path=tmp_path / "q.db"))
    other = open_queue(Settings(db_path=tmp_path / "q.db", busy_timeout_ms=200))
    try:
        issues.create(first, title="a")
        with pytest.raises(NotFound):
            claims.complete(first, 99, {"run"})
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
