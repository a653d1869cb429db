"""``workq doctor`` finds what a crash or a hand edit can leave, and ``--repair`` fixes it and
says what it did. Hand edits are made the way people make them: the sqlite3 module with
foreign keys off (the shell's default)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Connection, insert, select, update

from tests.storage import assert_intact
from tests.torture import procs
from workq.config import Settings
from workq.db import sqlite, tables
from workq.domain.authority import Authority
from workq.services.handle import Queue
from workq.services.maintenance import maintenance
from workq.services.queue import claims, dependencies, issues, listing, notes, ready_queue
from workq.services.runtime import open_queue


def hand_edit(db: Path, sql: str) -> None:
    with closing(sqlite.connect(db)) as conn:
        conn.executescript(sql)
        conn.commit()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "queue.db"


@pytest.fixture
def queue(db: Path) -> Iterator[Queue]:
    """Five issues: #2 waits on #1, #3 waits on #2; #1 has a label and a comment."""
    q = open_queue(Settings(db_path=db, lease_seconds=60))
    for n in range(1, 6):
        issues.create(q, title=f"issue {n}", labels=["x"] if n == 1 else ())
    dependencies.depend(q, blocker=1, blocked=2)
    dependencies.depend(q, blocker=2, blocked=3)
    notes.comment(q, 1, "a note")
    yield q
    q.db.dispose()


@pytest.fixture
def engine_queue(settings: Settings) -> Iterator[Queue]:
    """On tests/conftest.py's settings: a SQLite file, and PostgreSQL when configured."""
    q = open_queue(settings, migrate=True)
    yield q
    q.db.dispose()


def checks(report: maintenance.DoctorReport) -> list[tuple[str, int | None]]:
    return sorted((f.check, f.number) for f in report.findings)


def assert_clean(q: Queue) -> None:
    report = maintenance.doctor(q)
    assert report.ok and not report.findings, report.findings


def test_a_killed_agents_claim_is_found_and_returned_to_the_queue(queue: Queue, db: Path) -> None:
    agent = procs.forkserver().Process(target=_claim_and_hang, args=(str(db),))
    agent.start()
    deadline = time.monotonic() + 60
    while not listing.list_issues(queue, status="in_progress").items:
        assert time.monotonic() < deadline and agent.is_alive()
        time.sleep(0.05)
    agent.kill()  # kill -9 while it holds the claim
    agent.join(30)
    assert checks(maintenance.doctor(queue)) == []  # the lease has not run out yet
    later = datetime.now(UTC) + timedelta(seconds=61)
    queue.clock = lambda: later
    assert checks(maintenance.doctor(queue)) == [("stale_claim", 4)]
    report = maintenance.doctor(queue, repair=True)
    assert report.ok and report.repaired == 1
    assert "returned to the queue" in report.findings[0].detail
    assert issues.get(queue, 4).status == "open"
    assert [e.kind for e in notes.history(queue, 4)][-1] == "repaired"
    assert_clean(queue)
    assert_intact(db)


def _claim_and_hang(db: str) -> None:
    q = open_queue(Settings(db_path=Path(db), lease_seconds=60))
    claims.claim(q, 4, Authority.of({"doomed-agent"}))
    time.sleep(600)


def test_blocked_count_drift_is_repaired(queue: Queue, db: Path) -> None:
    hand_edit(db, "UPDATE issues SET open_blockers = 7 WHERE number = 4;")
    hand_edit(db, "UPDATE issues SET open_blockers = 0 WHERE number = 3;")
    assert checks(maintenance.doctor(queue)) == [("blocked_count", 3), ("blocked_count", 4)]
    assert maintenance.doctor(queue, repair=True).repaired == 2
    assert_clean(queue)
    assert [i.number for i in ready_queue.ready(queue, limit=10)] == [1, 4, 5]


def test_an_issue_deleted_by_hand_leaves_orphans_and_drift_both_repaired(
    queue: Queue, db: Path
) -> None:
    hand_edit(db, "DELETE FROM issues WHERE number = 1;")  # foreign keys off: no cascade
    found = checks(maintenance.doctor(queue))
    assert ("blocked_count", 2) in found and found.count(("orphans", None)) == 3
    report = maintenance.doctor(queue, repair=True)
    assert report.ok
    assert {f.detail for f in report.findings if f.check == "orphans"} == {
        "1 row(s) of labels point at a missing issue",
        "1 row(s) of comments point at a missing issue",
        "1 row(s) of dependencies point at a missing issue",
    }
    assert_clean(queue)
    assert 2 in [i.number for i in ready_queue.ready(queue, limit=10)]  # no longer waits


def test_values_no_command_writes_are_repaired_and_reads_work_again(queue: Queue, db: Path) -> None:
    hand_edit(
        db,
        "UPDATE issues SET status = 'closed', closed_at = '2026-01-01 00:00:00' "
        "WHERE number = 1; UPDATE issues SET priority = 9 WHERE number = 4; "
        "UPDATE issues SET issue_type = 'epic', status = 'wip' WHERE number = 5;",
    )
    with pytest.raises((ValueError, KeyError)):
        listing.list_issues(queue)  # what every read did before the repair
    assert checks(maintenance.doctor(queue)) == [("values", 1), ("values", 4), ("values", 5)]
    report = maintenance.doctor(queue, repair=True)
    assert report.ok
    details = {f.number: f.detail for f in report.findings if f.check == "values"}
    assert details[1] == "status 'closed' is not valid, set to 'done'"
    assert details[4] == "priority 9 is not valid, set to 'medium'"
    assert "issue_type 'epic' is not valid, set to 'task'" in details[5]
    assert [i.status for i in listing.list_issues(queue).items][:1] == ["done"]
    assert_clean(queue)  # #1 done: #2 no longer counts it (blocked counts repaired too)


# The database refuses an issue in progress without a holder or lease (migration 0013):
# such damage comes from around it (an older workq, an edit with the guard dropped).
GUARD = ("ck_issues_claim_has_lease_insert", "ck_issues_claim_has_lease_update")
UNGUARDED = "".join(f"DROP TRIGGER {name}; " for name in GUARD)


def _drop_claim_guard(conn: Connection) -> None:
    if conn.dialect.name == "sqlite":
        for name in GUARD:
            conn.exec_driver_sql(f"DROP TRIGGER {name}")
    else:
        conn.exec_driver_sql("ALTER TABLE issues DROP CONSTRAINT ck_issues_claim_has_lease")


@pytest.mark.parametrize(
    ("sql", "said"),
    [
        (
            UNGUARDED + "UPDATE issues SET status = 'in_progress' WHERE number = 4;",
            "in progress without a holder",
        ),
        (
            "UPDATE issues SET claimed_by = 'ghost', lease_expires_at = '2999-01-01 00:00:00' "
            "WHERE number = 4;",
            "not in progress but claimed by ghost",
        ),
        (
            UNGUARDED + "UPDATE issues SET status = 'in_progress', claimed_by = 'ghost', "
            "lease_expires_at = NULL WHERE number = 4;",
            "claimed by ghost without a lease, so it would never expire",
        ),
    ],
)
def test_half_made_claims_are_repaired(queue: Queue, db: Path, sql: str, said: str) -> None:
    hand_edit(db, sql)
    assert checks(maintenance.doctor(queue)) == [("claim_state", 4)]
    report = maintenance.doctor(queue, repair=True)
    assert report.ok and said in report.findings[0].detail
    assert_clean(queue)
    got = claims.claim(queue, 4, Authority.of({"next-agent"}))
    assert got.claimed_by == "next-agent"


def test_a_lowered_counter_is_repaired_and_numbers_are_never_reused(queue: Queue, db: Path) -> None:
    hand_edit(db, "UPDATE counters SET value = 2;")
    assert checks(maintenance.doctor(queue)) == [("counter", None)]
    assert maintenance.doctor(queue, repair=True).ok
    assert issues.create(queue, title="next").number == 6


def test_an_issue_waiting_on_itself_is_repaired_and_a_cycle_is_reported(
    queue: Queue, db: Path
) -> None:
    hand_edit(
        db,
        "INSERT INTO dependencies SELECT id, id, '2026-01-01 00:00:00' FROM issues "
        "WHERE number = 5; UPDATE issues SET open_blockers = 1 WHERE number = 5;",
    )
    report = maintenance.doctor(queue, repair=True)
    assert report.ok and ("dependency_cycle", 5) in checks(report)
    assert_clean(queue)
    # #1 -> #2 -> #3 exist; #3 -> #1 by hand closes the loop: nothing there is ever ready.
    hand_edit(
        db,
        "INSERT INTO dependencies SELECT b.id, a.id, '2026-01-01 00:00:00' "
        "FROM issues a, issues b WHERE a.number = 1 AND b.number = 3; "
        "UPDATE issues SET open_blockers = 1 WHERE number = 1;",
    )
    report = maintenance.doctor(queue, repair=True)
    assert not report.ok  # a person must choose which dependency goes
    (cycle,) = [f for f in report.findings if f.check == "dependency_cycle"]
    assert not cycle.repaired and not cycle.repairable
    assert "#1 -> #3 -> #2 -> #1" in cycle.detail and "workq undepend" in cycle.detail


def test_the_command_reports_what_it_found_and_what_it_repaired(queue: Queue, db: Path) -> None:
    queue.db.dispose()
    hand_edit(
        db,
        "DELETE FROM issues WHERE number = 1; UPDATE issues SET priority = 9 WHERE number = 5;",
    )

    def doctor(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "workq.cli.main", "--db", str(db), "doctor", *args],
            capture_output=True,
            text=True,
            timeout=120,
            env=os.environ.copy(),
        )

    found = doctor()
    assert found.returncode == 1 and "Run 'workq doctor --repair'" in found.stdout
    repaired = doctor("--repair", "--json")
    assert repaired.returncode == 0, repaired.stderr
    report = json.loads(repaired.stdout)
    assert report["ok"] and report["repaired"] == len(report["findings"]) >= 4
    assert {f["check"] for f in report["findings"]} == {"values", "blocked_count", "orphans"}
    again = doctor()
    assert again.returncode == 0 and "All checks passed" in again.stdout


def test_hand_edits_are_found_and_repaired_on_every_engine(engine_queue: Queue) -> None:
    """The same checks in portable SQL: on PostgreSQL too when WORKQ_TEST_PG_URL is set
    (where foreign keys cannot be switched off, so no orphans)."""
    q = engine_queue
    for n in range(1, 5):
        issues.create(q, title=f"issue {n}")
    dependencies.depend(q, blocker=1, blocked=2)

    def edit(conn: Connection) -> None:
        _drop_claim_guard(conn)
        ids = dict(conn.execute(select(tables.issues.c.number, tables.issues.c.id)).all())
        conn.execute(update(tables.issues).where(tables.issues.c.number == 1).values(priority=9))
        conn.execute(
            update(tables.issues).where(tables.issues.c.number == 3).values(status="in_progress")
        )
        conn.execute(
            update(tables.issues).where(tables.issues.c.number == 2).values(open_blockers=0)
        )
        conn.execute(update(tables.counters).values(value=1))
        conn.execute(
            insert(tables.dependencies).values(
                blocker_id=ids[4], blocked_id=ids[4], created_at=datetime.now(UTC)
            )
        )

    q.db.write(edit)
    assert checks(maintenance.doctor(q)) == [
        ("blocked_count", 2),
        ("blocked_count", 4),  # the self edge counts; removed first when repairing
        ("claim_state", 3),
        ("counter", None),
        ("dependency_cycle", 4),
        ("values", 1),
    ]
    report = maintenance.doctor(q, repair=True)
    assert report.ok and report.repaired == 5
    assert_clean(q)
    assert issues.create(q, title="next").number == 5
