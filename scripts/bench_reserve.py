"""Benchmark what file reservations cost ``claim_next``.

Usage: .venv/bin/python scripts/bench_reserve.py [--url URL] [--claims 400] [--held 8]

Per engine (a SQLite file; PostgreSQL when --url or $WORKQ_TEST_PG_URL is set), one process
claims and completes --claims issues one after another, timing each ``claim_next``:

- baseline: issues without touches, nobody holding anything;
- held, no touches: the same, while --held other runs hold claims with touches (their live
  reservations exist, but the issues claimed declare none);
- touches: every issue declares two globs (disjoint from the held ones), so every claim
  reads the live reservations and compares globs, under --held live claims.

Reported: p50 and p99 per claim, and each scenario's p50 as a ratio of the baseline p50
from the same run. A shared 2-core machine varies by 20-30%.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from sqlalchemy import create_engine, text

from workq.config import Settings
from workq.domain.authority import Authority
from workq.services.handle import Queue
from workq.services.queue import claims, issues
from workq.services.runtime import open_queue


def _fresh(where: str, tmp: Path) -> Settings:
    if not where.startswith("postgresql"):
        return Settings(db_path=tmp / f"{uuid.uuid4().hex}.db")
    name = f"bench_{uuid.uuid4().hex[:12]}"
    admin = create_engine(where, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return Settings(database_url=where.rsplit("/", 1)[0] + "/" + name)


def _scenario(queue: Queue, count: int, held: int, touching: bool) -> list[float]:
    for i in range(held):
        made = issues.create(queue, title=f"held {i}", touches=[f"held{i}/**"], priority="urgent")
        claims.claim(queue, made.number, Authority.of({f"holder-{i}"}))
    for i in range(count):
        issues.create(
            queue, title=f"work {i}", touches=[f"src/m{i}/**", f"docs/m{i}.md"] if touching else ()
        )
    times: list[float] = []
    while True:
        start = time.perf_counter()
        got = claims.claim_next(queue, Authority.of({"bench"}))
        times.append(time.perf_counter() - start)
        if got is None:
            break
        claims.complete(queue, got.number, Authority.of({"bench"}))
    return times[:-1]


def _figures(times: list[float]) -> tuple[float, float]:
    ordered = sorted(times)
    return statistics.median(ordered), ordered[int(len(ordered) * 0.99) - 1]


def run(where: str, label: str, count: int, held: int, tmp: Path) -> None:
    results: dict[str, tuple[float, float]] = {}
    for name, n_held, touching in (
        ("baseline", 0, False),
        ("held, no touches", held, False),
        ("touches", held, True),
    ):
        queue = open_queue(_fresh(where, tmp), migrate=True)
        try:
            results[name] = _figures(_scenario(queue, count, n_held, touching))
        finally:
            queue.db.dispose()
    base = results["baseline"][0]
    print(f"{label}: claim_next over {count} issues, {held} live claims with touches")
    for name, (p50, p99) in results.items():
        print(
            f"  {name:18} p50 {p50 * 1e3:7.3f} ms  p99 {p99 * 1e3:7.3f} ms  ratio {p50 / base:5.2f}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("WORKQ_TEST_PG_URL"))
    parser.add_argument("--claims", type=int, default=400)
    parser.add_argument("--held", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run("sqlite", "SQLite", args.claims, args.held, Path(tmp))
        if args.url:
            run(args.url, "PostgreSQL", args.claims, args.held, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
