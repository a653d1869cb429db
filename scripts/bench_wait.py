"""Benchmark waiting for work: wake-up latency and the idle cost of waiting.

Usage: .venv/bin/python scripts/bench_wait.py [--url URL] [--waiters 1,8,32] [--rounds 40]
                                              [--served 100,1000] [--idle-seconds 10]

1. Wake-up latency, per engine (SQLite file; PostgreSQL when --url or $WORKQ_TEST_PG_URL is
   set): N waiter processes each loop on ``claim_next`` with ``wait_seconds``; the main
   process creates one issue per round and times creation -> the woken waiter's claim
   returned (wall clock, one machine). p50/p99 over the rounds. The baseline, from the
   same run: one plain ``claim_next`` of a ready issue (what a polling agent pays at best
   per poll), as ratio = wake-up p50 / plain claim p50.
2. One server carrying the waiters, per engine: a real ``workq serve`` (stdio, fed JSON-RPC
   lines on a pipe) with N waiting ``issue_claim_next`` calls (--served), one run id each,
   as the agents behind one server are; the main process creates one issue per round and
   times creation -> the claim's answer read from the pipe. p50/p99, and the server's CPU
   time per new issue (what waking the N calls costs it).
3. The idle cost of a waiting server: a real ``workq serve`` (stdio) with N calls of
   ``issue_claim_next(wait_seconds=300)`` outstanding on an empty queue (--idle-calls,
   default 8 and 1000): CPU time of the server process over --idle-seconds, its threads
   and resident memory, against the same server with no call outstanding.

Every figure comes from this run; a shared 2-core machine varies by 20-30%.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import queue as queue_module
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

from workq.config import Settings
from workq.domain.authority import Authority
from workq.services.queue import claims, issues, ready_queue, waiting
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
            got = waiting.until_found(
                queue,
                lambda: claims.claim_next(queue, Authority.of({f"w{i}"})),
                WAIT,
                lambda: bool(ready_queue.ready(queue, holder=f"w{i}")),  # as the server does
            )
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
        claims.claim_next(queue, Authority.of({"plain"}))
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


def threads_and_rss(pid: int) -> tuple[int, float]:
    """The process's thread count and resident memory in MB."""
    status = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return int(status["Threads"]), int(status["VmRSS"].split()[0]) / 1024


def idle_cost(db: Path, seconds: float, counts: list[int]) -> list[tuple[int, float, int, float]]:
    """(waiting calls, % of one core, threads, RSS MB) of a real workq serve fed JSON-RPC
    lines on a pipe (every call in flight at once, as agents' calls are): first with no
    call outstanding, then with each count of waiting calls."""
    server = _serve(str(db))
    assert server.stdin is not None
    rows, sent = [], 0
    try:
        for count in [0, *counts]:
            for i in range(sent, count):
                arguments = {"run_id": f"w{i}", "wait_seconds": 300}
                call = {"name": "issue_claim_next", "arguments": arguments}
                server.stdin.write(
                    _line({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": call})
                )
            server.stdin.flush()
            sent = max(sent, count)
            time.sleep(3.0 + count / 100)  # every call has reached its wait
            start = cpu_seconds(server.pid)
            time.sleep(seconds)
            cpu = (cpu_seconds(server.pid) - start) / seconds * 100
            rows.append((count, cpu, *threads_and_rss(server.pid)))
    finally:
        server.kill()
        server.wait()
    return rows


def _serve(where: str) -> subprocess.Popen[bytes]:
    """A ``workq serve`` over pipes on ``where``, initialized."""
    database = ["--database-url", where] if where.startswith("postgresql") else ["--db", where]
    server = subprocess.Popen(
        [sys.executable, "-m", "workq.cli.main", *database, "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert server.stdin is not None and server.stdout is not None
    server.stdin.write(_line({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}))
    server.stdin.write(_line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    server.stdin.flush()
    server.stdout.readline()
    return server


def _line(message: dict[str, Any]) -> bytes:
    return (json.dumps(message) + "\n").encode()


def served_latency(where: str, count: int, rounds: int) -> tuple[float, float, float]:
    """(p50, p99 in ms, server CPU ms per new issue) with ``count`` waiting calls in one
    server."""
    queue = open_queue(_settings(where), migrate=True)
    server = _serve(where)
    assert server.stdin is not None and server.stdout is not None
    answers: Any = queue_module.Queue()

    def read_answers() -> None:
        assert server.stdout is not None
        for raw in server.stdout:
            message = json.loads(raw)
            if "id" in message:
                answers.put((message, time.time()))

    threading.Thread(target=read_answers, daemon=True).start()
    sent = 0

    def wait_call(run_id: str) -> None:
        nonlocal sent
        sent += 1
        arguments = {"run_id": run_id, "wait_seconds": WAIT}
        call = {"name": "issue_claim_next", "arguments": arguments}
        assert server.stdin is not None
        server.stdin.write(
            _line({"jsonrpc": "2.0", "id": sent, "method": "tools/call", "params": call})
        )
        server.stdin.flush()

    try:
        for i in range(count):
            wait_call(f"w{i}")
        time.sleep(2.0 + count / 200)  # every call has reached its wait
        latencies = []
        cpu = cpu_seconds(server.pid)
        for n in range(rounds):
            t0 = time.time()
            made = issues.create(queue, title=f"round {n}")
            message, t1 = answers.get(timeout=120)
            claimed = message["result"]["structuredContent"]
            assert claimed["number"] == made.number, message
            latencies.append((t1 - t0) * 1000)
            wait_call(claimed["claimed_by"])  # that agent waits again
            time.sleep(0.05)
        cpu = cpu_seconds(server.pid) - cpu
        return pct(latencies, 0.5), pct(latencies, 0.99), cpu / rounds * 1000
    finally:
        server.kill()
        server.wait()
        queue.db.dispose()


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
    parser.add_argument("--served", default="100,1000")
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--idle-calls", default="8,1000")
    args = parser.parse_args()
    counts = [int(n) for n in args.waiters.split(",")]
    idle_counts = [int(n) for n in args.idle_calls.split(",")]
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
        served = [int(n) for n in args.served.split(",")]
        print(
            "\n| engine | waiting calls in one server | wake-up p50 ms | p99 ms |"
            " server CPU ms per new issue |"
        )
        print("|---|---|---|---|---|")
        for engine, where in engines:
            for count in served:
                p50, p99, cpu = served_latency(where(-count), count, args.rounds)
                print(f"| {engine} | {count} | {p50:.1f} | {p99:.1f} | {cpu:.1f} |", flush=True)
        db = Path(tmp) / "idle.db"
        open_queue(Settings(db_path=db), migrate=True).db.dispose()  # empty, migrated
        rows = idle_cost(db, args.idle_seconds, idle_counts)
        print(f"\nidle cost of workq serve (SQLite) over {args.idle_seconds:.0f} s, waiting calls:")
        print("| waiting calls | % of one core | threads | RSS MB |")
        print("|---|---|---|---|")
        for count, cpu, threads, rss in rows:
            print(f"| {count} | {cpu:.2f} | {threads} | {rss:.0f} |")


if __name__ == "__main__":
    main()
