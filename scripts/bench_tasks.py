"""Benchmark: 1,000 agents waiting for work as tasks against 1,000 waiting calls (figures,
no asserts).

    .venv/bin/python scripts/bench_tasks.py [--waiters 1000] [--wakes 50] [--idle 10]

In one run, for each way of waiting, a fresh `workq serve --http` (the 2026-07-28 protocol,
stateless) on its own SQLite file with nothing ready, and N agents (each its own run id)
asking for work:
- ``calls``: each an ``issue_claim_next(wait_seconds=300)`` held open on its own
  connection, as a client without the Tasks extension waits today;
- ``tasks``: each the same call from a client that declares the extension: the server
  answers at once with a task, and nobody holds a connection.
Then, with every waiter waiting: the server's resident memory and threads, and its CPU
over ``--idle`` quiet seconds; and the wake latency, ``--wakes`` times: a new issue
created, and the time from its ``created`` event to its ``claimed`` event (both written by
the server, on its clock), p50 and p99.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx2

VERSION = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def proc_status(pid: int) -> dict[str, str]:
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        found[key] = value.strip()
    return found


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def body(request_id: int, name: str, arguments: dict[str, Any], *, tasks: bool) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}} if tasks else {},
    }
    params = {"name": name, "arguments": arguments, "_meta": meta}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def wait_for_work(i: int) -> dict[str, Any]:
    """Agent ``i``'s call: the longest wait, under its own run id."""
    return {"wait_seconds": 300, "run_id": f"agent-{i}"}


HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": VERSION,
    "mcp-method": "tools/call",
}


async def call(
    http: httpx2.AsyncClient, url: str, n: int, name: str, arguments: dict[str, Any], tasks: bool
) -> dict[str, Any]:
    answer = await http.post(
        url, json=body(n, name, arguments, tasks=tasks), headers={**HEADERS, "mcp-name": name}
    )
    found: dict[str, Any] = answer.json()
    return found


def stamps(db: Path, kind: str) -> dict[int, datetime]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT number, min(created_at) FROM events WHERE kind = ? GROUP BY number", (kind,)
        ).fetchall()
    return {int(n): datetime.fromisoformat(str(at)) for n, at in rows}


async def measure(mode: str, waiters: int, wakes: int, idle: float, folder: Path) -> dict[str, Any]:
    db = folder / f"{mode}.db"
    subprocess.run(
        [sys.executable, "-m", "workq.cli.main", "--db", str(db), "init"],
        check=True,
        capture_output=True,
    )
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    argv = [sys.executable, "-m", "workq.cli.main", "--db", str(db), "serve", "--http"]
    log = (folder / f"{mode}.log").open("w")
    server = subprocess.Popen(
        [*argv, "--port", str(port), "--run-id", "bench"], stdout=log, stderr=log
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit(f"the {mode} server did not start") from None
                await asyncio.sleep(0.05)
        limits = httpx2.Limits(max_connections=waiters + 20, max_keepalive_connections=20)
        async with httpx2.AsyncClient(timeout=900, limits=limits) as http:
            tasks = mode == "tasks"
            held = [
                asyncio.create_task(call(http, url, i, "issue_claim_next", wait_for_work(i), tasks))
                for i in range(waiters)
            ]
            if tasks:
                created = await asyncio.gather(*held)
                made = sum(1 for a in created if a.get("result", {}).get("resultType") == "task")
                held = []
            else:
                made = 0
            await asyncio.sleep(3)  # every waiter is in by now
            status = proc_status(server.pid)
            before = cpu_seconds(server.pid)
            await asyncio.sleep(idle)
            idle_cpu = cpu_seconds(server.pid) - before
            for i in range(wakes):
                await call(http, url, 10_000 + i, "issue_create", {"title": f"work {i}"}, False)
                await asyncio.sleep(0.3)
            await asyncio.sleep(2)
            for waiting in held:
                waiting.cancel()
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:  # still answering calls that wait: not our figures
            server.kill()
            server.wait(timeout=10)
        log.close()
    made_at, claimed_at = stamps(db, "created"), stamps(db, "claimed")
    latency = sorted(
        (claimed_at[n] - made_at[n]).total_seconds() for n in made_at if n in claimed_at
    )
    at = min(len(latency) - 1, int(0.99 * len(latency)))
    return {
        "rss_mb": int(status["VmRSS"].split()[0]) / 1024,
        "threads": int(status["Threads"]),
        "idle_cpu_s": idle_cpu,
        "tasks": made,
        "woken": len(latency),
        "p50_ms": statistics.median(latency) * 1000 if latency else float("nan"),
        "p99_ms": latency[at] * 1000 if latency else float("nan"),
    }


async def main(waiters: int, wakes: int, idle: float, modes: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        found = {m: await measure(m, waiters, wakes, idle, Path(tmp)) for m in modes}
    print(f"{waiters} agents waiting for work on one `workq serve --http`, {wakes} wakes")
    print("| waiting as | server RSS | threads | idle CPU | wake p50 | wake p99 | tasks made |")
    print("|---|---|---|---|---|---|---|")
    for mode, f in found.items():
        print(
            f"| {mode} | {f['rss_mb']:.0f} MB | {f['threads']} | {f['idle_cpu_s']:.2f} s in"
            f" {idle:.0f} s | {f['p50_ms']:.0f} ms | {f['p99_ms']:.0f} ms | {f['tasks']} |"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--waiters", type=int, default=1000)
    parser.add_argument("--wakes", type=int, default=50)
    parser.add_argument("--idle", type=float, default=10.0)
    parser.add_argument("--modes", default="calls,tasks", help="calls, tasks or both")
    options = parser.parse_args()
    asyncio.run(main(options.waiters, options.wakes, options.idle, options.modes.split(",")))
