"""READ COMMITTED, made exact: interleavings that would miscount under it without row locks,
forced deterministically by holding a table lock from a third connection. Also: which
isolation each kind of transaction runs at, and the waits that are bounded."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import Connection, create_engine, event, text

from tests.conftest import ADMIN
from workq.config import Settings
from workq.db.engine import WRITE_ATTEMPTS
from workq.domain.authority import Authority
from workq.errors import Busy, NotFound
from workq.services.handle import Queue
from workq.services.maintenance import maintenance
from workq.services.queue import claims, dependencies, issues, listing, notes, ready_queue
from workq.services.runtime import open_queue
from workq.services.sync import pulls


def _waiting(
    url: str, count: int, timeout: float = 20, unless: threading.Thread | None = None
) -> None:
    """Until ``count`` transactions of this database wait for a lock (or ``unless`` ended)."""
    engine = create_engine(url)
    deadline = time.monotonic() + timeout
    try:
        while True:
            with engine.connect() as conn:
                waiting = conn.execute(
                    text(
                        "SELECT count(*) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND wait_event_type = 'Lock'"
                    )
                ).scalar_one()
            if waiting >= count or (unless is not None and not unless.is_alive()):
                return
            assert time.monotonic() < deadline, "nobody waits for the lock"
            time.sleep(0.02)
    finally:
        engine.dispose()


@contextmanager
def _table_locked(url: str, table: str) -> Iterator[Callable[[], None]]:
    """Hold a SHARE lock on ``table`` (reads go on, writes wait) until release() is called."""
    engine = create_engine(url)
    conn = engine.connect()
    conn.execute(text(f"LOCK TABLE {table} IN SHARE MODE"))
    released = False

    def release() -> None:
        nonlocal released
        if not released:
            conn.commit()
            released = True

    try:
        yield release
    finally:
        release()
        conn.close()
        engine.dispose()


def _in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, errors


def test_an_edge_added_while_its_blocker_completes_is_counted_once(
    pg_queue: Queue, pg_url: str
) -> None:
    issues.create(pg_queue, title="blocker")
    issues.create(pg_queue, title="blocked")
    claims.claim(pg_queue, 1, Authority.of({"run-a"}))
    with _table_locked(pg_url, "dependencies") as release:
        # The edge's insert waits on the table lock, after depend has read the blocker...
        adding, add_errors = _in_thread(lambda: dependencies.depend(pg_queue, blocker=1, blocked=2))
        _waiting(pg_url, 1)
        # ...and the blocker is completed meanwhile (it must wait for depend's row lock).
        completing, complete_errors = _in_thread(
            lambda: claims.complete(pg_queue, 1, Authority.of({"run-a"}))
        )
        _waiting(pg_url, 2, unless=completing)
        release()
        adding.join(30)
        completing.join(30)
    assert not add_errors and not complete_errors, add_errors + complete_errors
    assert issues.get(pg_queue, 2).open_blockers == 0
    assert [r.number for r in ready_queue.ready(pg_queue, limit=10)] == [2]
    assert maintenance.doctor(pg_queue).ok


def test_delete_racing_complete_releases_dependents_once(pg_queue: Queue, pg_url: str) -> None:
    for title in ("blocker", "blocked"):
        issues.create(pg_queue, title=title)
    dependencies.depend(pg_queue, blocker=1, blocked=2)
    claims.claim(pg_queue, 1, Authority.of({"run-a"}))
    with _table_locked(pg_url, "events") as release:
        # complete holds the row lock and waits to write its event...
        completing, complete_errors = _in_thread(
            lambda: claims.complete(pg_queue, 1, Authority.of({"run-a"}))
        )
        _waiting(pg_url, 1)
        # ...while delete of the same issue must wait for it, not decrement on its own.
        deleting, delete_errors = _in_thread(lambda: issues.delete_issue(pg_queue, 1, by=ADMIN))
        _waiting(pg_url, 2)
        release()
        completing.join(30)
        deleting.join(30)
    assert not complete_errors and not delete_errors, complete_errors + delete_errors
    assert issues.get(pg_queue, 2).open_blockers == 0
    assert maintenance.doctor(pg_queue).ok


@pytest.mark.parametrize(
    "attach",
    [
        pytest.param(lambda q: notes.comment(q, 1, "a note"), id="comment"),
        pytest.param(
            lambda q: pulls.opened(
                q,
                1,
                repo="o/r",
                pr_number=7,
                url="https://example.test/pr/7",
                branch="b",
                by=ADMIN,
            ),
            id="pull-request",
        ),
    ],
)
def test_a_row_attached_to_an_issue_deleted_meanwhile_is_not_found(
    pg_queue: Queue, pg_url: str, attach: Callable[[Queue], object]
) -> None:
    """A comment (or pull request link) whose issue is deleted while it is being written
    answers NOT_FOUND, not a foreign-key STORAGE_ERROR (seen once in a kill -9 storm)."""
    issues.create(pg_queue, title="going")
    engine = create_engine(pg_url)
    try:
        with engine.connect() as deleter:
            deleter.execute(text("DELETE FROM issues WHERE number = 1"))  # row locked
            attaching, errors = _in_thread(lambda: attach(pg_queue))
            _waiting(pg_url, 1, unless=attaching)
            deleter.commit()
            attaching.join(30)
    finally:
        engine.dispose()
    assert [type(e) for e in errors] == [NotFound], errors
    assert maintenance.doctor(pg_queue).ok


def test_numbers_from_the_counter_row_have_no_gaps_under_contention(
    pg_queue: Queue, pg_url: str
) -> None:
    with _table_locked(pg_url, "events") as release:
        threads = [_in_thread(lambda: issues.create(pg_queue, title="racing")) for _ in range(6)]
        _waiting(pg_url, 6)  # one waits on events, five on the counter row
        release()
        for thread, errors in threads:
            thread.join(30)
            assert not errors, errors
    page = listing.list_issues(pg_queue, limit=10)
    assert [i.number for i in page.items] == [1, 2, 3, 4, 5, 6]


def _setting(conn: Connection, name: str) -> str:
    return str(conn.execute(text(f"SHOW {name}")).scalar_one())


def test_reads_are_snapshots_and_writes_read_committed(pg_queue: Queue) -> None:
    with pg_queue.db.read() as conn:
        assert _setting(conn, "transaction_isolation") == "repeatable read"
        assert _setting(conn, "transaction_read_only") == "on"
    seen = pg_queue.db.write(
        lambda conn: (
            _setting(conn, "transaction_isolation"),
            _setting(conn, "transaction_read_only"),
        )
    )
    assert seen == ("read committed", "off")
    with pg_queue.db.read() as conn:  # the pool hands the read settings back reset
        assert _setting(conn, "transaction_isolation") == "repeatable read"


def _write_attempts(queue: Queue) -> list[str]:
    """A list that grows by one for each write transaction ``queue`` begins from now on
    (reads are not counted)."""
    begun: list[str] = []

    def record(conn: Connection) -> None:
        if conn.get_execution_options().get("workq_write"):
            begun.append("write")

    event.listen(queue.db.engine, "begin", record)
    return begun


def test_a_row_lock_held_too_long_is_busy_not_a_hang(pg_url: str, pg_queue: Queue) -> None:
    issues.create(pg_queue, title="held")
    quick = open_queue(Settings(database_url=pg_url, busy_timeout_ms=200))
    engine = create_engine(pg_url)
    try:
        # The wait for a row lock is bounded by the server, at the busy timeout...
        assert quick.db.write(lambda conn: _setting(conn, "lock_timeout")) == "200ms"
        attempts = _write_attempts(quick)
        with engine.connect() as holder:
            holder.execute(text("SELECT * FROM issues WHERE number = 1 FOR UPDATE"))
            with pytest.raises(Busy) as busy:
                claims.claim(quick, 1, Authority.of({"run-a"}))
            assert "lock timeout" in busy.value.facts["cause"]
            assert "nothing was changed" in (busy.value.hint or "")
            holder.rollback()
        # ...and a busy write is tried again a bounded number of times, then given up.
        assert len(attempts) == WRITE_ATTEMPTS
        assert issues.get(quick, 1).claimed_by is None
        assert claims.claim(quick, 1, Authority.of({"run-a"})).claimed_by == "run-a"
    finally:
        quick.db.dispose()
        engine.dispose()


def test_claim_next_skips_locked_rows_instead_of_waiting(pg_url: str, pg_queue: Queue) -> None:
    for n in range(2):
        issues.create(pg_queue, title=f"issue {n}")
    # A wait for the locked row would end in Busy (lock_timeout 100 ms); skipping it does not.
    quick = open_queue(Settings(database_url=pg_url, busy_timeout_ms=100))
    engine = create_engine(pg_url)
    try:
        with engine.connect() as holder:
            holder.execute(text("SELECT * FROM issues WHERE number = 1 FOR UPDATE"))
            got = claims.claim_next(quick, Authority.of({"run-a"}))
            assert got is not None and got.number == 2
            holder.rollback()
        assert issues.get(quick, 1).claimed_by is None
    finally:
        quick.db.dispose()
        engine.dispose()


def test_an_exhausted_pool_is_busy_with_the_setting_to_raise(pg_url: str, pg_queue: Queue) -> None:
    small = open_queue(
        Settings(database_url=pg_url, pool_size=1, pool_max_overflow=0, pool_timeout_s=0.2)
    )
    try:
        issues.create(small, title="one")
        with small.db.read():
            got, errors = _in_thread(lambda: issues.get(small, 1))
            got.join(10)
        assert len(errors) == 1 and isinstance(errors[0], Busy)
        assert "WORKQ_POOL_SIZE" in (errors[0].hint or "")
        assert issues.get(small, 1).title == "one"
    finally:
        small.db.dispose()


def test_a_repair_waits_for_writers_in_flight(pg_queue: Queue, pg_url: str) -> None:
    for title in ("blocker", "blocked"):
        issues.create(pg_queue, title=title)
    dependencies.depend(pg_queue, blocker=1, blocked=2)
    claims.claim(pg_queue, 1, Authority.of({"run-a"}))
    reports: list[maintenance.DoctorReport] = []
    with _table_locked(pg_url, "events") as release:
        completing, complete_errors = _in_thread(
            lambda: claims.complete(pg_queue, 1, Authority.of({"run-a"}))
        )
        _waiting(pg_url, 1)
        # The repair must not compare the graph and the counts while the complete is half
        # done; it waits for it (and any other writer) before reading anything.
        repairing, repair_errors = _in_thread(
            lambda: reports.append(maintenance.doctor(pg_queue, repair=True))
        )
        _waiting(pg_url, 2)
        release()
        completing.join(30)
        repairing.join(30)
    assert not complete_errors and not repair_errors, complete_errors + repair_errors
    assert reports[0].findings == []
    assert issues.get(pg_queue, 2).open_blockers == 0
