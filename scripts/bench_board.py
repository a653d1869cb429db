"""Time to first byte of the board at 100k issues.

Builds a SQLite queue of N issues (default 100,000: most ready, some in progress with a live
lease, waiting on another issue, blocked by hand and done, each with a label), starts
`workq board` on it, and times the first byte of each page over a fresh connection. The
baseline from the same run is the board's static stylesheet: the same server, HTTP and
connection, and no database.

    .venv/bin/python scripts/bench_board.py [--issues 100000] [--rounds 30] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from workq.config import Settings
from workq.db import sqlite
from workq.db.times import to_sqlite
from workq.services.runtime import open_queue

WORKQ = Path(sys.executable).with_name("workq")
BUDGET_MS = 100.0
# The columns the rows below fill, in their order (later columns keep their defaults).
COLUMNS = (
    "id", "number", "title", "description", "status", "priority", "issue_type", "agent",
    "is_blocked", "blocked_reason", "open_blockers", "claimed_by", "claimed_at",
    "lease_expires_at", "created_at", "updated_at", "closed_at",
)  # fmt: skip


def build(db: Path, count: int) -> None:
    open_queue(Settings(db_path=db), migrate=True).db.dispose()
    rng = random.Random(16)
    now = datetime.now(UTC)
    text = "A description of the work to do, long enough to look like a real one. " * 3
    issue_rows: list[tuple[object, ...]] = []
    labels: list[tuple[str, str]] = []
    deps: list[tuple[str, str, str]] = []
    events: list[tuple[object, ...]] = []
    for n in range(1, count + 1):
        roll = rng.random()
        created = to_sqlite(now - timedelta(minutes=count - n))
        status, blocked, reason, opened, holder, lease, closed = (
            "open", False, None, 0, None, None, None,
        )  # fmt: skip
        if roll < 0.10:
            status, holder = "in_progress", f"run-{n % 8}"
            lease = to_sqlite(now + timedelta(minutes=20))
        elif roll < 0.20 and n > 1:
            opened = 1
            deps.append((f"{n - 1:032x}", f"{n:032x}", created))
        elif roll < 0.25:
            blocked, reason = True, "waiting for a person"
        elif roll < 0.40:
            status, closed = "done", created
            events.append((f"{n:032x}", n, "completed", "bench", None, None, created))
        issue_rows.append(
            (
                f"{n:032x}", n, f"Issue {n}", text, status, rng.randrange(4),
                ["task", "bug", "feature"][n % 3], "claude", blocked, reason, opened, holder,
                created if holder else None, lease, created, created, closed,
            )
        )  # fmt: skip
        labels.append((f"{n:032x}", f"area-{n % 20}"))
        events.append((f"{n:032x}", n, "created", "bench", None, json.dumps({}), created))
    # A waiting issue waits on the one before it, which must not be done.
    open_numbers = {r[1] for r in issue_rows if r[4] != "done"}
    deps = [d for d in deps if int(d[0], 16) in open_numbers]
    waiting = {int(d[1], 16) for d in deps}
    issue_rows = [
        (*r[:10], 1 if r[1] in waiting else 0, *r[11:]) if r[10] else r for r in issue_rows
    ]
    events.sort(key=lambda e: str(e[6]))
    with sqlite.connect(db) as conn:
        conn.executemany(
            f"INSERT INTO issues ({', '.join(COLUMNS)}) VALUES ({','.join('?' * len(COLUMNS))})",
            issue_rows,
        )
        conn.executemany("INSERT INTO labels VALUES (?, ?)", labels)
        conn.executemany("INSERT INTO dependencies VALUES (?, ?, ?)", deps)
        conn.executemany(
            "INSERT INTO events (issue_id, number, kind, actor, before, after, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            events,
        )
        conn.execute("UPDATE counters SET value = ? WHERE name = 'issue_number'", (count,))
        conn.execute("ANALYZE")


def first_byte_ms(port: int, path: str) -> float:
    with socket.create_connection(("127.0.0.1", port)) as conn:
        request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
        start = time.perf_counter()
        conn.sendall(request.encode())
        first = conn.recv(1)
        took = (time.perf_counter() - start) * 1000
        assert first == b"H"
        while conn.recv(65536):  # read it all, so the server is idle for the next one
            pass
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--issues", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--keep", type=Path, help="build the database here and keep it")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="workq-bench-board-"))
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "board.db"
    if not db.exists():
        began = time.perf_counter()
        build(db, args.issues)
        print(f"built {args.issues} issues in {time.perf_counter() - began:.1f}s")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    server = subprocess.Popen(
        [str(WORKQ), "--db", str(db), "board", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        pages = {
            "baseline: /static/board.css": "/static/board.css",
            "board /": "/",
            "board, label filter": "/?label=area-3",
            "board, type filter": "/?type=bug",
            "board, ready page 20": "/?page_ready=20",
            "live refresh /columns": "/columns",
            "issue view": f"/issues/{args.issues // 2}",
        }
        for path in pages.values():  # warm: templates compiled, pages cached by SQLite
            first_byte_ms(port, path)
        results = {}
        for name, path in pages.items():
            times = sorted(first_byte_ms(port, path) for _ in range(args.rounds))
            results[name] = (statistics.median(times), times[int(len(times) * 0.95) - 1])
        base = results["baseline: /static/board.css"][0]
        print(f"{args.issues} issues, {args.rounds} rounds each, first byte in ms")
        print(f"{'page':32} {'median':>8} {'p95':>8} {'x base':>8}  under {BUDGET_MS:.0f} ms")
        for name, (median, p95) in results.items():
            ok = "yes" if p95 < BUDGET_MS else "NO"
            print(f"{name:32} {median:8.1f} {p95:8.1f} {median / base:8.1f}  {ok}")
    finally:
        server.terminate()
        server.wait(timeout=30)
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
