"""Benchmark the queue core: claim_next throughput against raw sqlite3, ready latency by size.

Usage: .venv/bin/python scripts/bench_core.py [--sizes 1000,10000,100000] [--claims 2000]

Every figure is measured in this run; compare the ratios, not the absolute numbers (a shared
2-core machine varies by 20-30% between runs). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from workq.config import Settings
from workq.db import sqlite
from workq.db.times import to_sqlite
from workq.domain import dates
from workq.domain.authority import Authority
from workq.services import handle as context
from workq.services.queue import claims, ready_queue
from workq.services.runtime import open_queue
from workq.services.sync import outbox

# The statements the claim_next service runs on SQLite, as it compiles them: the baseline
# runs exactly these on the raw driver, so it cannot drift from the service.
READY_FRESH, READY_STALE = ready_queue.ready_statements((False, 0, 0, 0, False), False)
TAKE = claims._take
EVENT = context._record_event
OUTBOX = outbox.queue_statement("sqlite")


def build(path: Path, size: int) -> None:
    """A migrated database with ``size`` issues, a fifth of them waiting on another."""
    queue = open_queue(Settings(db_path=path))
    queue.db.dispose()
    rng = random.Random(size)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    rows = []
    for n in range(1, size + 1):
        stamp = to_sqlite(start + timedelta(seconds=n))
        rows.append(
            (
                uuid.uuid4().hex,
                n,
                f"issue {n}",
                "",
                "open",
                rng.randrange(4),
                "task",
                "claude",
                0,
                0,
                stamp,
                stamp,
            )
        )
    edges = [
        (rows[rng.randrange(blocked - 1)][0], rows[blocked - 1][0])
        for blocked in range(2, size + 1)
        if rng.random() < 0.2
    ]
    with sqlite.connect(path) as conn:
        conn.executemany(
            "INSERT INTO issues (id, number, title, description, status, priority, issue_type,"
            " agent, is_blocked, open_blockers, created_at, updated_at)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            rows,
        )
        conn.executemany(
            "INSERT OR IGNORE INTO dependencies (blocker_id, blocked_id, created_at)"
            " VALUES (?, ?, '2026-01-01 00:00:00')",
            edges,
        )
        conn.execute(
            "UPDATE issues SET open_blockers = (SELECT count(*) FROM dependencies d"
            " WHERE d.blocked_id = issues.id)"
        )
        conn.execute("UPDATE counters SET value = ?", (size,))
    with sqlite.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def raw_claims(path: Path, count: int) -> float:
    conn = sqlite.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA busy_timeout=10000")
    conn.execute("PRAGMA foreign_keys=ON")
    began = time.perf_counter()
    for _ in range(count):
        now = datetime.now(UTC)
        until = now + timedelta(minutes=30)
        ready = {"limit": 1, "now": now}
        conn.execute("BEGIN IMMEDIATE")
        row = conn.execute(*READY_FRESH.sqlite_call(ready)).fetchone()
        stale = conn.execute(*READY_STALE.sqlite_call(ready)).fetchone()
        row = row or stale
        if row is None:
            conn.execute("COMMIT")
            break
        issue_id, number, previous = row[0], row[1], row[9]
        take = {"issue_id": issue_id, "previous": previous, "run_id": "bench"}
        conn.execute(*TAKE.sqlite_call({**take, "now": now, "until": until}))
        after = json.dumps({"claimed_by": "bench", "lease_expires_at": dates.iso(until)})
        event = {"issue_id": issue_id, "number": number, "kind": "claimed", "actor": "bench"}
        event.update(before=None, after=after, created_at=now)
        conn.execute(*EVENT.sqlite_call(event))
        queued = {"issue_id": issue_id, "number": number, "kind": "claimed", "now": now}
        conn.execute(*OUTBOX.sqlite_call(queued))
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - began
    conn.close()
    return count / elapsed


def service_claims(path: Path, count: int) -> float:
    queue = open_queue(Settings(db_path=path))
    began = time.perf_counter()
    for _ in range(count):
        if claims.claim_next(queue, Authority.of({"bench"})) is None:
            break
    elapsed = time.perf_counter() - began
    queue.db.dispose()
    return count / elapsed


def ready_latency(path: Path, samples: int) -> tuple[float, float, float, float]:
    """(service p50, service p99, raw p50, raw p99) in microseconds."""
    queue = open_queue(Settings(db_path=path))
    timings = []
    for _ in range(samples):
        began = time.perf_counter()
        ready_queue.ready(queue, limit=1)
        timings.append(time.perf_counter() - began)
    queue.db.dispose()
    conn = sqlite.connect(path, isolation_level=None)
    raw = []
    for _ in range(samples):
        began = time.perf_counter()
        ready = {"limit": 1, "now": datetime.now(UTC)}
        conn.execute("BEGIN")
        conn.execute(*READY_FRESH.sqlite_call(ready)).fetchone()
        conn.execute(*READY_STALE.sqlite_call(ready)).fetchall()
        conn.execute("COMMIT")
        raw.append(time.perf_counter() - began)
    conn.close()

    def pct(values: list[float], q: float) -> float:
        return statistics.quantiles(values, n=100)[int(q) - 1] * 1e6

    return pct(timings, 50), pct(timings, 99), pct(raw, 50), pct(raw, 99)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--claims", type=int, default=2000)
    parser.add_argument("--samples", type=int, default=2000)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    work = Path(tempfile.mkdtemp(prefix="workq-bench-"))
    print(
        f"{'issues':>8} {'raw claims/s':>13} {'service/s':>10} {'ratio':>6} "
        f"{'ready p50 us':>13} {'p99 us':>8} {'raw p50 us':>11} {'raw p99':>8}"
    )
    try:
        for size in sizes:
            template = work / f"t{size}.db"
            build(template, size)
            raw_db, svc_db = work / f"raw{size}.db", work / f"svc{size}.db"
            shutil.copy(template, raw_db)
            shutil.copy(template, svc_db)
            n = min(args.claims, size // 2)
            raw = raw_claims(raw_db, n)
            svc = service_claims(svc_db, n)
            p50, p99, r50, r99 = ready_latency(template, args.samples)
            print(
                f"{size:>8} {raw:>13,.0f} {svc:>10,.0f} {svc / raw:>6.2f} "
                f"{p50:>13.1f} {p99:>8.1f} {r50:>11.1f} {r99:>8.1f}"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
