"""Benchmark SQLite under many writers (figures, no asserts).

    .venv/bin/python scripts/bench_writers.py [--writers 1,2,4,8] [--seconds 5]
                                              [--held 500] [--issues 5000]

1. The write lock, in one process: how long a claim_next and a complete hold it, from
   ``BEGIN IMMEDIATE`` to ``COMMIT`` (sqlite3's trace callback, so exactly the
   transaction), over ``--held`` of each, against raw sqlite3 running the very statements
   workq ran (recorded with their values, replayed with those values as parameters on a
   copy of the same database), in the same run. The commit itself costs both the same and
   is not counted.
2. K stdio servers on one file: K ``workq serve`` processes, each driven by its own
   client process looping claim_next -> complete for ``--seconds``, against K bare
   MCPServers whose tools only answer a number (the SDK's floor), driven the same way:
   pairs per second, and their ratio.

Every figure comes from this run; compare ratios, not absolute numbers (a shared 2-core
machine varies by 20-30%, and with K clients and K servers on 2 cores the clients' CPU
counts as much as the servers').
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

import anyio
from bench_http import BARE_TOOLS
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from sqlalchemy import event
from sqlalchemy.pool import Pool

from workq.config import Settings
from workq.db import sqlite
from workq.domain.authority import Authority
from workq.services.queue import claims, issues
from workq.services.runtime import open_queue

BARE_SERVER = BARE_TOOLS + "\nserver.run()\n"


# -- 1. the write lock --------------------------------------------------------------------


class Transactions:
    """Each write transaction's statements, with values, and its BEGIN -> COMMIT time."""

    def __init__(self) -> None:
        self.open: dict[int, tuple[list[str], float]] = {}  # per connection
        self.done: list[tuple[list[str], float]] = []

    def tracer(self, conn: Any) -> Callable[[str], None]:
        key = id(conn)

        def trace(statement: str) -> None:
            now = time.perf_counter()
            if statement.startswith("BEGIN IMMEDIATE"):
                self.open[key] = ([], now)
            elif key in self.open and statement.startswith("COMMIT"):
                statements, began = self.open.pop(key)
                self.done.append((statements, (now - began) * 1000))
            elif key in self.open:
                self.open[key][0].append(statement)

        return trace


def held(db: Path, count: int) -> tuple[list[float], list[float], list[list[str]]]:
    """workq's claim_next and complete lock times (ms), and every write transaction's
    statements in order."""
    seen = Transactions()

    def on_connect(dbapi: Any, record: Any) -> None:
        if sqlite.is_connection(dbapi):
            dbapi.set_trace_callback(seen.tracer(dbapi))

    event.listen(Pool, "connect", on_connect)
    try:
        queue = open_queue(Settings(db_path=db))
        by = Authority.of(frozenset({"bench"}))
        claiming, completing = [], []
        for _ in range(count):
            start = len(seen.done)
            taken = claims.claim_next(queue, Authority.of({"bench"}))
            assert taken is not None
            claiming += [ms for _, ms in seen.done[start:]]
            start = len(seen.done)
            claims.complete(queue, taken.number, by)
            completing += [ms for _, ms in seen.done[start:]]
        queue.db.dispose()
    finally:
        event.remove(Pool, "connect", on_connect)
    return claiming, completing, [statements for statements, _ in seen.done]


# A literal of the traced SQL: a quoted string, or a number standing alone.
_LITERAL = re.compile(r"'(?:[^']|'')*'|(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")


def parameterized(statement: str) -> tuple[str, list[Any]]:
    """The traced statement (values written in) with its values as parameters again, so
    that raw sqlite3 prepares each statement once, as workq's driver does."""
    values: list[Any] = []

    def take(found: re.Match[str]) -> str:
        text = found.group(0)
        if text.startswith("'"):
            values.append(text[1:-1].replace("''", "'"))
        else:
            values.append(float(text) if "." in text else int(text))
        return "?"

    return _LITERAL.sub(take, statement), values


def replayed(db: Path, transactions: list[list[str]]) -> list[float]:
    """Raw sqlite3: each transaction's statements between BEGIN IMMEDIATE and COMMIT."""
    conn = sqlite.connect(db, isolation_level=None, cached_statements=512)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    prepared = [[parameterized(statement) for statement in t] for t in transactions]
    # Timed as workq's are, by the trace callback (whose own cost both then carry).
    seen = Transactions()
    conn.set_trace_callback(seen.tracer(conn))
    for statements in prepared:
        conn.execute("BEGIN IMMEDIATE")
        for sql, values in statements:
            conn.execute(sql, values).fetchall()
        conn.execute("COMMIT")
    conn.close()
    return [ms for _, ms in seen.done]


def lock_figures(folder: Path, issues_count: int, count: int) -> None:
    db = folder / "lock.db"
    queue = open_queue(Settings(db_path=db), migrate=True)
    for n in range(issues_count):
        issues.create(queue, title=f"issue {n}", description="text " * 20)
    queue.db.dispose()
    copy = folder / "lock-copy.db"
    shutil.copy(db, copy)
    claiming, completing, transactions = held(db, count)
    raw = replayed(copy, transactions)
    # The transactions alternate claim, complete (each exactly one, checked by held()).
    assert len(claiming) == len(completing) == count and len(raw) == 2 * count
    raw_claim, raw_complete = raw[0::2], raw[1::2]
    print(f"write lock held, BEGIN IMMEDIATE to COMMIT, median of {count} ({issues_count} issues)")
    print("| transaction | workq | raw sqlite3, same statements | ratio |")
    print("|---|---|---|---|")
    for name, mine, theirs in (
        ("claim_next", claiming, raw_claim),
        ("complete", completing, raw_complete),
    ):
        a, b = statistics.median(mine), statistics.median(theirs)
        print(f"| {name} | {a * 1000:.0f} us | {b * 1000:.0f} us | {a / b:.2f}x |")


# -- 2. K stdio servers on one file --------------------------------------------------------


async def _loop(params: StdioServerParameters, go: Event, seconds: float, results: Any) -> None:
    with open(os.devnull, "w") as quiet:  # the servers' start lines
        await _timed(
            Client(stdio_client(params, errlog=quiet), mode="legacy"), go, seconds, results
        )


async def _timed(connecting: Client, go: Event, seconds: float, results: Any) -> None:
    async with connecting as client:
        for _ in range(3):  # warm up
            await _pair(client)
        results.put(None)
        await anyio.to_thread.run_sync(go.wait)
        pairs, deadline = 0, time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            await _pair(client)
            pairs += 1
        results.put(pairs)


async def _pair(client: Client) -> None:
    taken = await client.call_tool("issue_claim_next", {})
    assert not taken.is_error and "number" in (taken.structured_content or {}), taken
    assert taken.structured_content is not None
    done = await client.call_tool("issue_complete", {"number": taken.structured_content["number"]})
    assert not done.is_error, done


def driver(args: tuple[list[str], float], go: Event, results: Any) -> None:
    argv, seconds = args
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))
    anyio.run(_loop, params, go, seconds, results)


def throughput(servers: list[list[str]], seconds: float) -> float:
    """Pairs per second of ``servers`` (their commands) at once, each with its own client."""
    context = mp.get_context("spawn")
    go, results = context.Event(), context.Queue()
    drivers = [
        context.Process(target=driver, args=((argv, seconds), go, results)) for argv in servers
    ]
    for process in drivers:
        process.start()
    try:
        for _ in drivers:
            results.get(timeout=300)
        go.set()
        total = sum(results.get(timeout=300 + seconds) for _ in drivers)
    finally:
        for process in drivers:
            process.join(timeout=60)
            if process.is_alive():
                process.kill()
    return float(total) / seconds


def writers_figures(folder: Path, counts: list[int], seconds: float) -> None:
    script = folder / "bare_stdio.py"
    script.write_text(BARE_SERVER)
    db = folder / "writers.db"
    queue = open_queue(Settings(db_path=db), migrate=True)
    # More than the writers take at any rate seen on 2 cores (they fail loudly if not).
    for n in range(int(1000 * seconds * len(counts))):
        issues.create(queue, title=f"issue {n}")
    queue.db.dispose()
    print(f"\nK stdio servers on one file, each with its own client, {seconds:.0f} s each")
    print("| K | bare MCPServer pairs/s | workq pairs/s | workq / bare |")
    print("|---|---|---|---|")
    serve = [sys.executable, "-m", "workq.cli.main", "--db", str(db), "serve", "--run-id"]
    for k in counts:
        bare = throughput([[sys.executable, str(script)]] * k, seconds)
        workq = throughput([[*serve, f"writer-{k}-{i}"] for i in range(k)], seconds)
        print(f"| {k} | {bare:.0f} | {workq:.0f} | {workq / bare:.2f}x |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--writers", default="1,2,4,8")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--held", type=int, default=500)
    parser.add_argument("--issues", type=int, default=5000)
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp)
        lock_figures(folder, args.issues, args.held)
        writers_figures(folder, [int(k) for k in args.writers.split(",")], args.seconds)


if __name__ == "__main__":
    main()
