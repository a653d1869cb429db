"""Benchmark claim_next on PostgreSQL against raw psycopg, with 1, 4 and 8 worker processes.

Usage: .venv/bin/python scripts/bench_pg.py [--url URL] [--issues 100000] [--seconds 4]
                                            [--workers 1,4,8] [--rounds 2]

URL (default $WORKQ_TEST_PG_URL) must allow CREATE DATABASE; without one, a throwaway server
is started with scripts/pg_start.sh and stopped at the end. Each measurement runs on a fresh
copy of one template database (``--issues`` open issues, a fifth of them waiting on another).

Four ways to claim, each a process loop for ``--seconds`` after a common start signal:
  raw      one autocommit statement, the SKIP LOCKED claim of the notes:
           UPDATE issues ... WHERE id = (SELECT id ... FOR UPDATE SKIP LOCKED) RETURNING
  raw-same the same-work floor: one autocommit statement, prepared, on raw psycopg, doing
           the claim workq's does: both ready scans (open, lease lapsed) FOR UPDATE SKIP
           LOCKED, the compare-and-set with a new fence and lease, the audit event, the
           claimed issue's fields returned (what workq adds: the plan gate, the GitHub outbox
           row, its pool, retries and settling)
  raw-txn  the statements claim_next runs, prepared, on raw psycopg: BEGIN, the two ready
           SELECTs FOR UPDATE SKIP LOCKED (open, expired lease), UPDATE, INSERT event, COMMIT
  service  workq.services.queue.claims.claim_next: one statement (plan gate, both ready scans,
           the claim, its audit event, the GitHub outbox row) that is its own transaction
           (autocommit), one round trip; pool, retries and the settling of a lost answer
           included
Every figure comes from this run; compare ratios, not absolute numbers (a shared machine
varies by 20-30%). The best of ``--rounds`` is kept. Double claims are counted (must be 0).
Target: service at least 0.6x raw-same with 1 worker.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

import psycopg

from workq.config import Settings
from workq.domain.authority import Authority
from workq.services.queue import claims
from workq.services.runtime import open_queue

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = "workq_bench_template"
MODES = ("raw", "raw-same", "raw-txn", "service")

RAW_CLAIM = (
    "UPDATE issues SET status = 'in_progress', claimed_by = %(me)s, claimed_at = now(), "
    "lease_expires_at = now() + interval '30 minutes', updated_at = now() "
    "WHERE id = (SELECT id FROM issues WHERE status = 'open' AND is_blocked = false "
    "AND open_blockers = 0 ORDER BY priority, created_at, number LIMIT 1 "
    "FOR UPDATE SKIP LOCKED) RETURNING number"
)
# The same work as workq's claim statement, in one statement.
RAW_SAME = """
WITH fresh AS (
    SELECT id, priority, created_at, number, claimed_by FROM issues
    WHERE status = 'open' AND is_blocked = false AND open_blockers = 0
    ORDER BY priority, created_at, number LIMIT 1 FOR UPDATE SKIP LOCKED),
stale AS (
    SELECT id, priority, created_at, number, claimed_by FROM issues
    WHERE status = 'in_progress' AND lease_expires_at <= now()
    AND is_blocked = false AND open_blockers = 0
    ORDER BY priority, created_at, number LIMIT 1 FOR UPDATE SKIP LOCKED),
pick AS (
    SELECT * FROM fresh UNION ALL SELECT * FROM stale
    ORDER BY priority, created_at, number LIMIT 1),
taken AS (
    UPDATE issues SET status = 'in_progress', claimed_by = %(me)s, claimed_at = now(),
        lease_expires_at = now() + interval '30 minutes', updated_at = now(),
        fence = issues.fence + 1
    FROM pick WHERE issues.id = pick.id
        AND (issues.claimed_by IS NULL OR issues.claimed_by = pick.claimed_by)
    RETURNING issues.id, issues.number, issues.title, issues.description, issues.priority,
        issues.issue_type, issues.agent, issues.created_at, pick.claimed_by AS previous,
        issues.claimed_at, issues.fence),
event AS (
    INSERT INTO events (issue_id, number, kind, actor, before, after, created_at)
    SELECT id, number, 'claimed', %(me)s, NULL, %(after)s, now() FROM taken
    RETURNING id)
SELECT taken.*, (SELECT count(*) FROM event) FROM taken
"""
_READY = (
    "SELECT id, number, title, status, claimed_by FROM issues WHERE {where} "
    "AND is_blocked = false AND open_blockers = 0 ORDER BY priority, created_at, number "
    "LIMIT 1 FOR UPDATE SKIP LOCKED"
)
RAW_FRESH = _READY.format(where="status = 'open'")
RAW_STALE = _READY.format(where="status = 'in_progress' AND lease_expires_at < %(now)s")
RAW_TAKE = (
    "UPDATE issues SET status = 'in_progress', claimed_by = %(me)s, claimed_at = %(now)s, "
    "lease_expires_at = %(until)s, updated_at = %(now)s "
    "WHERE id = %(id)s AND (claimed_by IS NULL OR claimed_by = %(previous)s)"
)
RAW_EVENT = (
    "INSERT INTO events (issue_id, number, kind, actor, before, after, created_at) "
    "VALUES (%(id)s, %(number)s, 'claimed', %(me)s, NULL, %(after)s, %(now)s)"
)


def driver_url(url: str) -> str:
    """The SQLAlchemy URL as libpq understands it."""
    return re.sub(r"^postgresql\+psycopg://", "postgresql://", url)


def with_database(url: str, name: str) -> str:
    return url.rsplit("/", 1)[0] + "/" + name


def build_template(url: str, size: int) -> None:
    """A migrated database of ``size`` open issues (a fifth wait on another), as a template."""
    admin = psycopg.connect(driver_url(url), autocommit=True)
    admin.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE}"')
    admin.execute(f'CREATE DATABASE "{TEMPLATE}"')
    target = with_database(url, TEMPLATE)
    open_queue(Settings(database_url=target), migrate=True).db.dispose()
    start = datetime(2026, 1, 1, tzinfo=UTC)
    ids = [uuid.uuid4().hex for _ in range(size)]
    with psycopg.connect(driver_url(target)) as conn:
        with conn.cursor().copy(
            "COPY issues (id, number, title, description, status, priority, issue_type, agent,"
            " is_blocked, open_blockers, created_at, updated_at) FROM STDIN"
        ) as copy:
            for n in range(1, size + 1):
                stamp = start + timedelta(seconds=n)
                text_fields = (ids[n - 1], n, f"issue {n}", "", "open", n % 4, "task", "claude")
                copy.write_row((*text_fields, False, 0, stamp, stamp))
        edges = [(ids[(n * 7919) % (n - 1)], ids[n - 1]) for n in range(2, size + 1, 5)]
        with conn.cursor().copy(
            "COPY dependencies (blocker_id, blocked_id, created_at) FROM STDIN"
        ) as copy:
            for blocker, blocked in edges:
                copy.write_row((blocker, blocked, start))
        conn.execute(
            "UPDATE issues SET open_blockers = (SELECT count(*) FROM dependencies d "
            "WHERE d.blocked_id = issues.id)"
        )
        conn.execute("UPDATE counters SET value = %s", (size,))
    with psycopg.connect(driver_url(target), autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    admin.close()


def fresh_copy(url: str, name: str) -> str:
    with psycopg.connect(driver_url(url), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{TEMPLATE}"')
    return with_database(url, name)


def drop(url: str, name: str) -> None:
    """Drop a copy; an autovacuum worker on it (not ours to end) is waited for."""
    with psycopg.connect(driver_url(url), autocommit=True) as admin:
        for _ in range(100):
            try:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                return
            except psycopg.errors.InsufficientPrivilege:
                time.sleep(0.1)
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# -- the three ways to claim, each run in its own process --------------------------------


def loop_raw(url: str, me: str) -> Callable[[], bool]:
    conn = psycopg.connect(driver_url(url), autocommit=True)
    params = {"me": me}

    def claim() -> bool:
        return conn.execute(RAW_CLAIM, params, prepare=True).fetchone() is not None

    return claim


def loop_raw_same(url: str, me: str) -> Callable[[], bool]:
    conn = psycopg.connect(driver_url(url), autocommit=True)
    params = {"me": me, "after": json.dumps({"claimed_by": me})}

    def claim() -> bool:
        return conn.execute(RAW_SAME, params, prepare=True).fetchone() is not None

    return claim


def loop_raw_txn(url: str, me: str) -> Callable[[], bool]:
    conn = psycopg.connect(driver_url(url))

    def claim() -> bool:
        now = datetime.now(UTC)
        params: dict[str, Any] = {"me": me, "now": now, "until": now + timedelta(minutes=30)}
        with conn.transaction():
            row = conn.execute(RAW_FRESH, params, prepare=True).fetchone()
            stale = conn.execute(RAW_STALE, params, prepare=True).fetchone()
            row = row or stale
            if row is None:
                return False
            params.update(id=row[0], number=row[1], previous=row[4], after='{"claimed_by": 1}')
            conn.execute(RAW_TAKE, params, prepare=True)
            conn.execute(RAW_EVENT, params, prepare=True)
        return True

    return claim


def loop_service(url: str, me: str) -> Callable[[], bool]:
    queue = open_queue(Settings(database_url=url, pool_size=1, pool_max_overflow=0))
    return lambda: claims.claim_next(queue, Authority.of({me})) is not None


LOOPS = {
    "raw": loop_raw,
    "raw-same": loop_raw_same,
    "raw-txn": loop_raw_txn,
    "service": loop_service,
}


def worker(
    mode: str, url: str, me: str, seconds: float, ready: Any, go: Event, results: Any
) -> None:
    claim = LOOPS[mode](url, me)
    claim()  # warm up: connect, prepare, import
    ready.put(me)
    go.wait()
    count = 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        if not claim():
            break
        count += 1
    results.put((count, count + 1))  # timed claims, all claims (with the warm-up)


def measure(url: str, mode: str, workers: int, seconds: float) -> tuple[float, int]:
    """Claims per second with ``workers`` processes, and the double claims found after."""
    name = f"workq_bench_{mode.replace('-', '_')}_{workers}"
    target = fresh_copy(url, name)
    context = mp.get_context("spawn")
    ready, results, go = context.Queue(), context.Queue(), context.Event()
    procs = [
        context.Process(target=worker, args=(mode, target, f"w{i}", seconds, ready, go, results))
        for i in range(workers)
    ]
    for proc in procs:
        proc.start()
    for _ in procs:
        ready.get(timeout=120)
    began = time.perf_counter()
    go.set()
    counted = [results.get(timeout=seconds + 120) for _ in procs]
    elapsed = time.perf_counter() - began
    timed, total = sum(c[0] for c in counted), sum(c[1] for c in counted)
    for proc in procs:
        proc.join(timeout=60)
    with psycopg.connect(driver_url(target)) as conn:
        claimed = conn.execute("SELECT count(*) FROM issues WHERE claimed_by IS NOT NULL")
        in_db = claimed.fetchone()
    doubles = total - (in_db[0] if in_db else 0)
    drop(url, name)
    return timed / elapsed, doubles


def throwaway_server() -> tuple[str, Callable[[], None]]:
    folder = tempfile.mkdtemp(prefix="workq-bench-pg-")
    env = {**os.environ, "WORKQ_PG_DIR": folder}
    out = subprocess.run(
        [str(ROOT / "scripts" / "pg_start.sh")], env=env, capture_output=True, text=True, check=True
    ).stdout
    found = re.search(r"WORKQ_TEST_PG_URL='([^']+)'", out)
    assert found, out

    def stop() -> None:
        subprocess.run([str(ROOT / "scripts" / "pg_stop.sh")], env=env, check=False)
        shutil.rmtree(folder, ignore_errors=True)

    return found.group(1), stop


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default=os.environ.get("WORKQ_TEST_PG_URL"))
    parser.add_argument("--issues", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--workers", default="1,4,8")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    stop: Callable[[], None] | None = None
    url = args.url
    if not url:
        url, stop = throwaway_server()
    try:
        counts = [int(w) for w in args.workers.split(",")]
        print(f"PostgreSQL at {url.split('@')[-1]}; {args.issues} issues; {os.cpu_count()} CPUs")
        build_template(url, args.issues)
        best: dict[tuple[str, int], float] = {}
        doubles = 0
        for _ in range(args.rounds):
            for workers in counts:
                for mode in MODES:
                    rate, double = measure(url, mode, workers, args.seconds)
                    doubles += double
                    best[mode, workers] = max(best.get((mode, workers), 0.0), rate)
        print(
            f"\n{'workers':>7} {'raw/s':>9} {'raw-same/s':>11} {'raw-txn/s':>10} {'service/s':>10}"
            f" {'service/raw':>12} {'service/raw-same':>17} {'service/raw-txn':>16}"
        )
        for workers in counts:
            raw, same, txn, svc = (best[m, workers] for m in MODES)
            print(
                f"{workers:>7} {raw:>9.0f} {same:>11.0f} {txn:>10.0f} {svc:>10.0f}"
                f" {svc / raw:>12.2f} {svc / same:>17.2f} {svc / txn:>16.2f}"
            )
        print("target: service/raw-same at least 0.6 with 1 worker")
        print(f"\ndouble claims: {doubles}")
        with psycopg.connect(driver_url(url), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE}"')
    finally:
        if stop is not None:
            stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
