"""Benchmark waiting for work: wake-up latency and the idle cost of waiting.

Usage: .venv/bin/python scripts/bench_wait.py [--url URL] [--waiters 1,8,32] [--rounds 40]
                                              [--idle-seconds 10]

1. Wake-up latency, per engine (SQLite file; PostgreSQL when --url or $WORKQ_TEST_PG_URL is
   set): N waiter processes each loop on ``claim_next`` with ``wait_seconds``; the main
   process creates one issue per round and times creation -> the woken waiter's claim
   returned (wall clock, one machine). p50/p99 over the rounds. The baseline, from the
   same run: one plain ``claim_next`` of a ready issue (what a polling agent pays at best
   per poll), as ratio = wake-up p50 / plain claim p50.
2. Idle CPU of a waiting server: a real ``workq serve`` (stdio) with 8 calls of
   ``issue_claim_next(wait_seconds=300)`` outstanding on an empty queue, CPU time of the
   server process over --idle-seconds, against the same server with no call outstanding.

Every figure comes from this run; a shared 2-core machine varies by 20-30%.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

from workq.config import Settings
from workq.services import claims, issues, waiting
from workq.services.runtime import open_queue

WAIT = 120


def _settings(where: str) -> Settings:
    if where.startswith("postgresql"):
        return Settings(database_url=where)
    return Settings(db_path=Path(where))


def waiter(where: str, i: int, results: Any, stop: Event) -> None:
    queue = open_queue(_settings(where))
    try:
        while not stop.is_set():
            got = waiting.until_found(queue, lambda: claims.claim_next(queue, f"w{i}"), WAIT)
            if got is not None:
                results.put((got.number, time.time()))
    finally:
        queue.db.dispose()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def wake_latency(where: str, count: int, rounds: int) -> tuple[float, float, float]:
    """(p50, p99, plain claim p50) in milliseconds."""
    queue = open_queue(_settings(where), migrate=True)
    plain = []
    for n in range(rounds):
        issues.create(queue, title=f"plain {n}")
    for _ in range(rounds):
        t0 = time.perf_counter()
        claims.claim_next(queue, "plain")
        plain.append((time.perf_counter() - t0) * 1000)
    ctx = mp.get_context("spawn")
    results: Any = ctx.Queue()
    stop = ctx.Event()
    procs = [ctx.Process(target=waiter, args=(where, i, results, stop)) for i in range(count)]
    for p in procs:
        p.start()
    try:
        # Warm up: every waiter claims one issue, so all are past their start.
        for n in range(count):
            issues.create(queue, title=f"warm {n}")
        for _ in range(count):
            results.get(timeout=120)
        time.sleep(1.0)  # all back to waiting
        latencies = []
        for n in range(rounds):
            t0 = time.time()
            made = issues.create(queue, title=f"round {n}")
            number, t1 = results.get(timeout=120)
            assert number == made.number
            latencies.append((t1 - t0) * 1000)
            time.sleep(0.05)
        stop.set()
        for n in range(count):  # one more issue each, so every waiter sees the stop
            issues.create(queue, title=f"release {n}")
        for p in procs:
            p.join(timeout=WAIT + 10)
        return pct(latencies, 0.5), pct(latencies, 0.99), statistics.median(plain)
    finally:
        stop.set()
        for p in procs:
            if p.is_alive():
                p.kill()
        queue.db.dispose()


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def idle_cpu(db: Path, seconds: float) -> tuple[float, float]:
    """(% of one core with 8 waiting calls, % with none), of a real workq serve."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    workq = str(Path(sys.executable).with_name("workq"))
    params = StdioServerParameters(command=workq, args=["--db", str(db), "serve"])
    with open(os.devnull, "w") as log:
        async with Client(stdio_client(params, errlog=log), read_timeout_seconds=400) as c:
            await c.call_tool("issue_list", {})
            pid = _server_pid(db)
            start = cpu_seconds(pid)
            await asyncio.sleep(seconds)
            baseline = (cpu_seconds(pid) - start) / seconds * 100
            calls = [
                asyncio.create_task(
                    c.call_tool("issue_claim_next", {"run_id": f"w{i}", "wait_seconds": 300})
                )
                for i in range(8)
            ]
            await asyncio.sleep(1.0)
            start = cpu_seconds(pid)
            await asyncio.sleep(seconds)
            waiting_cpu = (cpu_seconds(pid) - start) / seconds * 100
            for call in calls:
                call.cancel()
            return waiting_cpu, baseline


def _server_pid(db: Path) -> int:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"serve" in cmd and str(db).encode() in cmd:
                return int(entry.name)
    raise RuntimeError("the server process was not found")


def fresh_pg(base: str) -> str:
    name = f"bench_wait_{uuid.uuid4().hex[:8]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return base.rsplit("/", 1)[0] + f"/{name}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", default=os.environ.get("WORKQ_TEST_PG_URL"))
    parser.add_argument("--waiters", default="1,8,32")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    args = parser.parse_args()
    counts = [int(n) for n in args.waiters.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        engines: list[tuple[str, Callable[[int], str]]] = [
            ("sqlite", lambda n: str(Path(tmp) / f"wait-{n}.db"))
        ]
        url: str | None = args.url
        if url:
            engines.append(("postgresql", lambda n: fresh_pg(url)))
        print(
            "| engine | waiters | wake-up p50 ms | p99 ms | plain claim_next p50 ms | p50 / plain |"
        )
        print("|---|---|---|---|---|---|")
        for engine, where in engines:
            for count in counts:
                p50, p99, plain = wake_latency(where(count), count, args.rounds)
                print(
                    f"| {engine} | {count} | {p50:.1f} | {p99:.1f} | {plain:.2f} | "
                    f"{p50 / plain:.0f}x |",
                    flush=True,
                )
        db = Path(tmp) / "idle.db"
        open_queue(Settings(db_path=db), migrate=True).db.dispose()  # empty, migrated
        waiting_cpu, baseline = asyncio.run(idle_cpu(db, args.idle_seconds))
        print(
            f"\nidle CPU of workq serve (SQLite), % of one core over {args.idle_seconds:.0f} s: "
            f"{waiting_cpu:.2f}% with 8 waiting calls, {baseline:.2f}% with none"
        )


if __name__ == "__main__":
    main()
