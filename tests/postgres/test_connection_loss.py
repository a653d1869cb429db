"""A connection lost at every moment of a call: reads retry, writes apply exactly once or
say clearly that they did not, or that the server could not tell."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text

from tests.postgres.servers import FaultProxy
from workq.config import Settings
from workq.domain.authority import Authority
from workq.errors import ConnectionLost
from workq.services.handle import Queue
from workq.services.queue import claims, issues, notes
from workq.services.runtime import open_queue

COMMIT = b"COMMIT\x00"  # the simple query psycopg sends (not "BEGIN ... READ COMMITTED")


@pytest.fixture
def direct(private_db: str) -> Iterator[Queue]:
    queue = open_queue(Settings(database_url=private_db), migrate=True)
    yield queue
    queue.db.dispose()


@pytest.fixture
def proxied(private_db: str, proxy: FaultProxy, direct: Queue) -> Iterator[Queue]:
    queue = open_queue(Settings(database_url=proxy.url(private_db), connect_timeout_s=2))
    yield queue
    queue.db.dispose()


def _titles(queue: Queue, title: str) -> int:
    with queue.db.read() as conn:
        return int(
            conn.execute(
                text("SELECT count(*) FROM issues WHERE title = :t"), {"t": title}
            ).scalar_one()
        )


def _created_events(queue: Queue) -> int:
    with queue.db.read() as conn:
        return int(
            conn.execute(text("SELECT count(*) FROM events WHERE kind = 'created'")).scalar_one()
        )


def test_lost_before_commit_is_retried_and_applied_once(
    direct: Queue, proxied: Queue, proxy: FaultProxy
) -> None:
    proxy.arm(b"lost-mid-write", deliver=False)
    made = issues.create(proxied, title="lost-mid-write")
    assert proxy.fired == 1
    assert made.number == 1
    assert _titles(direct, "lost-mid-write") == 1
    assert _created_events(direct) == 1


def test_reply_to_commit_lost_is_settled_by_asking_the_server(
    direct: Queue, proxied: Queue, proxy: FaultProxy
) -> None:
    issues.create(proxied, title="warm up")
    proxy.arm(COMMIT, deliver=True)  # the server commits; its answer never arrives
    made = issues.create(proxied, title="committed in the dark")
    assert proxy.fired_on == [b"Q\x00\x00\x00\x0b" + COMMIT]
    assert made.number == 2
    assert _titles(direct, "committed in the dark") == 1
    assert issues.create(direct, title="next").number == 3


def test_commit_that_never_arrived_is_retried_and_applied_once(
    direct: Queue, proxied: Queue, proxy: FaultProxy
) -> None:
    issues.create(proxied, title="warm up")
    proxy.arm(COMMIT, deliver=False)  # the server never sees the commit: it rolls back
    made = issues.create(proxied, title="rolled back, then again")
    assert proxy.fired_on == [b"Q\x00\x00\x00\x0b" + COMMIT]
    assert made.number == 2
    assert _titles(direct, "rolled back, then again") == 1


def test_unknown_outcome_is_reported_with_the_transaction_to_check(
    private_db: str, direct: Queue, proxied: Queue, proxy: FaultProxy
) -> None:
    issues.create(proxied, title="warm up")
    proxy.arm(COMMIT, deliver=True)
    proxy.refusing = True  # ...and the server cannot be asked how it ended
    with pytest.raises(ConnectionLost) as lost:
        issues.create(proxied, title="fate unknown")
    error = lost.value
    assert error.facts["applied"] == "unknown"
    assert "may or may not have been applied" in (error.hint or "")
    assert "read it back" in (error.hint or "")
    xid = error.facts["transaction"]
    engine = create_engine(private_db)
    with engine.connect() as conn:
        outcome = conn.execute(text("SELECT pg_xact_status(CAST(:x AS xid8))"), {"x": xid})
        assert outcome.scalar() == "committed"
    engine.dispose()
    assert _titles(direct, "fate unknown") == 1
    proxy.refusing = False
    assert issues.create(proxied, title="after").number == 3


def test_lost_twice_before_commit_changes_nothing_and_says_so(
    direct: Queue, proxied: Queue, proxy: FaultProxy
) -> None:
    proxy.arm(b"twice-lost", deliver=False, times=2)
    with pytest.raises(ConnectionLost) as lost:
        issues.create(proxied, title="twice-lost")
    assert lost.value.facts["applied"] is False
    assert "nothing was changed" in (lost.value.hint or "")
    assert _titles(direct, "twice-lost") == 0
    assert _created_events(direct) == 0
    assert issues.create(proxied, title="fine").number == 1  # no number was used up


def test_a_read_is_retried_once_transparently(
    direct: Queue, proxied: Queue, proxy: FaultProxy
) -> None:
    issues.create(direct, title="read me", labels=["x"])
    proxy.arm(b"labels.issue_id", deliver=False)  # mid-read, after the issue row came back
    got = issues.get(proxied, 1)
    assert proxy.fired == 1
    assert got.title == "read me" and got.labels == ["x"]


def test_server_unreachable_is_a_clear_error_for_reads_and_writes(
    direct: Queue, proxied: Queue, proxy: FaultProxy
) -> None:
    issues.create(direct, title="exists")
    proxied.db.engine.dispose()  # no pooled connection to fall back on
    proxy.refusing = True
    with pytest.raises(ConnectionLost) as read_error:
        issues.get(proxied, 1)
    assert read_error.value.code == "CONNECTION_LOST"
    assert "nothing was changed" in (read_error.value.hint or "")
    with pytest.raises(ConnectionLost) as write_error:
        issues.create(proxied, title="never")
    assert write_error.value.facts["applied"] is False
    proxy.refusing = False
    assert issues.get(proxied, 1).title == "exists"
    assert _titles(direct, "never") == 0


def test_connections_killed_in_the_pool_are_replaced_unnoticed(
    private_db: str, direct: Queue
) -> None:
    for n in range(3):
        issues.create(direct, title=f"issue {n}")
    engine = create_engine(private_db, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        killed = conn.execute(
            text(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name = 'workq' AND datname = current_database()"
            )
        ).scalar()
    engine.dispose()
    assert killed and killed >= 1
    assert issues.get(direct, 1).title == "issue 0"
    assert issues.create(direct, title="after").number == 4


def test_lost_in_a_hot_path_statement_is_retried_and_claims_once(
    direct: Queue, proxied: Queue, proxy: FaultProxy
) -> None:
    issues.create(direct, title="claim me")
    proxy.arm(b"SKIP LOCKED", deliver=False)  # the prepared ready query, on psycopg's cursor
    got = claims.claim_next(proxied, Authority.of({"run-a"}))
    assert proxy.fired == 1
    assert got is not None and got.number == 1 and got.claimed_by == "run-a"
    assert [e.kind for e in notes.history(direct, 1)] == ["created", "claimed"]
    proxy.arm(b"SKIP LOCKED", deliver=False, times=2)
    issues.create(direct, title="stays open")
    fresh = open_queue(Settings(database_url=proxied.db.url))  # prepares its statements anew
    try:
        with pytest.raises(ConnectionLost) as lost:
            claims.claim_next(fresh, Authority.of({"run-b"}))
        assert lost.value.facts["applied"] is False
    finally:
        fresh.db.dispose()
    assert issues.get(direct, 2).claimed_by is None


# claim_next on PostgreSQL is one statement that commits as it answers (autocommit): a lost
# answer is settled by the mark the claim chose before sending (its run id and claimed_at).


def _claimed_by(queue: Queue, run_id: str) -> list[int]:
    with queue.db.read() as conn:
        rows = conn.execute(
            text("SELECT number FROM issues WHERE claimed_by = :r ORDER BY number"), {"r": run_id}
        )
        return [int(n) for (n,) in rows]


def test_claim_whose_answer_is_lost_is_settled_by_its_mark(
    direct: Queue, proxied: Queue, proxy: FaultProxy
) -> None:
    for title in ("first", "second"):
        issues.create(direct, title=title)
    proxy.arm(b"run-dark", deliver=True)  # the claim's parameters: it runs and commits
    got = claims.claim_next(proxied, Authority.of({"run-dark"}))
    assert proxy.fired == 1
    assert got is not None and got.number == 1 and got.claimed_by == "run-dark"
    assert _claimed_by(direct, "run-dark") == [1]  # claimed once, and the agent knows it
    assert [e.kind for e in notes.history(direct, 1)] == ["created", "claimed"]
    assert issues.get(direct, 1).claimed_at == got.claimed_at


def test_claim_that_never_reached_the_server_is_run_again_once(
    direct: Queue, proxied: Queue, proxy: FaultProxy
) -> None:
    for title in ("first", "second"):
        issues.create(direct, title=title)
    proxy.arm(b"run-cut", deliver=False)
    got = claims.claim_next(proxied, Authority.of({"run-cut"}))
    assert proxy.fired == 1
    assert got is not None and got.number == 1
    assert _claimed_by(direct, "run-cut") == [1]
    assert [e.kind for e in notes.history(direct, 1)] == ["created", "claimed"]


def test_lost_claim_the_server_cannot_settle_is_reported_unknown(
    direct: Queue, proxied: Queue, proxy: FaultProxy
) -> None:
    issues.create(direct, title="in the dark")
    claims.claim_next(proxied, Authority.of({"warm-up"}))  # takes #1; #2 is the one lost
    issues.create(direct, title="lost")
    proxy.arm(b"run-unknown", deliver=True)
    proxy.refusing = True  # the claim commits, and no new connection can ask about it
    with pytest.raises(ConnectionLost) as lost:
        claims.claim_next(proxied, Authority.of({"run-unknown"}))
    assert lost.value.facts["applied"] == "unknown"
    assert "read it back" in (lost.value.hint or "")
    assert _claimed_by(direct, "run-unknown") == [2]  # it was applied: "unknown" was honest
    proxy.refusing = False
    assert (
        claims.claim_next(proxied, Authority.of({"run-unknown"})) is None
    )  # nothing left; no second claim
    assert _claimed_by(direct, "run-unknown") == [2]


def test_claim_with_the_server_unreachable_changes_nothing_and_says_so(
    direct: Queue, proxied: Queue, proxy: FaultProxy
) -> None:
    issues.create(direct, title="waits")
    proxied.db.engine.dispose()  # no pooled connection to fall back on
    proxy.refusing = True
    with pytest.raises(ConnectionLost) as lost:
        claims.claim_next(proxied, Authority.of({"run-refused"}))
    assert lost.value.facts["applied"] is False
    assert "nothing was changed" in (lost.value.hint or "")
    proxy.refusing = False
    assert _claimed_by(direct, "run-refused") == []
    got = claims.claim_next(proxied, Authority.of({"run-refused"}))
    assert got is not None and got.number == 1
