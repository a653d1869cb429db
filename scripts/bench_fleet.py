"""Benchmark a fleet of agents over Streamable HTTP (figures, no asserts).

    .venv/bin/python scripts/bench_fleet.py [--agents 10,100,500] [--servers 1,2,4]
        [--eras modern,legacy] [--engines sqlite,postgresql] [--pairs 600] [--clients 2]
        [--url URL]

N agents, each its own MCP client (legacy: initialize and a session, no run_id; modern:
stateless, naming its run id), spread over ``--clients`` client processes. Each agent
connects and runs one claim_next -> complete pair unmeasured (a session's and a run id's
first use), then after a common start signal loops claim_next -> complete, together at
least ``--pairs`` pairs. The server is
``workq serve --http`` with S processes (``--workers S``; S = 1 is the plain server), on a
fresh SQLite file or PostgreSQL database (``--url``, else $WORKQ_TEST_PG_URL; with
``--engines postgresql`` and neither, a throwaway server from scripts/pg_start.sh). The
floor, in the same run: the SDK's bare MCPServer (scripts/bench_http.py), one process,
whose tools only answer a number, driven by the same agents.

Printed per run: pairs/s (wall clock, start signal to the last answer), claim latency
p50/p99, the server's CPU per pair (every process of it, from /proc) and its ratio to the
floor's, errors (a refused call, or nothing to claim), and double claims counted from the
history (must be 0). Every figure comes from this run; compare ratios, not absolute
numbers (a shared 2-core machine varies by 20-30%, and there the clients compete with the
server for the cores).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AsyncExitStack, contextmanager, suppress
from dataclasses import dataclass
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from bench_http import BARE_SERVER, cpu_seconds, free_port, started
from mcp import Client
from sqlalchemy import func, select

from workq.config import Settings
from workq.db.tables import events
from workq.services.queue import issues
from workq.services.runtime import open_queue

MODES = {"legacy": "legacy", "modern": "auto"}
CONNECTING = 20


@dataclass
class Run:
    pairs_per_second: float
    claim_p50: float
    claim_p99: float
    cpu_per_pair: float
    errors: int
    doubles: int


# -- the agents, in client processes ------------------------------------------------------


async def _agents(
    url: str,
    era: str,
    first: int,
    count: int,
    pairs: int,
    named: bool,
    connected: Any,
    go: Event,
    close: Event,
    results: Any,
) -> None:
    latencies: list[float] = []
    errors = 0
    finished = anyio.Event()
    done = 0
    # Agents connect a few at a time (a fleet does not start in one millisecond); then all
    # start together on ``go``.
    connecting = anyio.Semaphore(CONNECTING)

    def finish() -> None:
        nonlocal done
        done += 1
        if done == count:
            results.put((latencies, errors, time.perf_counter()))
            finished.set()

    async def agent(index: int) -> None:
        nonlocal errors
        arguments = {"run_id": f"agent-{index}"} if named else {}

        async def pair(client: Client) -> float:
            nonlocal errors
            started_at = time.perf_counter()
            taken = await client.call_tool("issue_claim_next", arguments)
            took = (time.perf_counter() - started_at) * 1000
            claimed = taken.structured_content or {}
            if taken.is_error or "number" not in claimed:
                errors += 1
                return took
            completed = await client.call_tool(
                "issue_complete", {"number": claimed["number"], **arguments}
            )
            errors += completed.is_error
            return took

        told = False
        try:
            async with AsyncExitStack() as stack:
                async with connecting:
                    client = await stack.enter_async_context(
                        Client(url, mode=MODES[era], read_timeout_seconds=600)
                    )
                    await pair(client)  # warm-up, not measured: first use of session, run id
                connected.put(1)
                told = True
                await anyio.to_thread.run_sync(go.wait)
                latencies.extend([await pair(client) for _ in range(pairs)])
                finish()
                await finished.wait()
                # Sessions end after the server's CPU was read: closing is not measured.
                await anyio.to_thread.run_sync(close.wait)
        except Exception:  # a connection refused or reset: counted, never a hang
            errors += 1
            if not told:
                connected.put(1)
            if not finished.is_set():
                finish()

    async with anyio.create_task_group() as group:
        for index in range(first, first + count):
            group.start_soon(agent, index)


def client_process(*args: Any) -> None:
    anyio.run(_agents, *args)


# -- servers and databases ----------------------------------------------------------------


def process_tree(pid: int) -> list[int]:
    found = [pid]
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            found += process_tree(int(child))
    return found


def tree_cpu(pid: int) -> float:
    total = 0.0
    for member in process_tree(pid):
        with suppress(FileNotFoundError):  # it exited meanwhile
            total += cpu_seconds(member)
    return total


@contextmanager
def database(engine: str, url: str | None, folder: Path, issues_count: int) -> Iterator[list[str]]:
    """A fresh migrated database with ``issues_count`` open issues: the ``workq`` global
    options that name it."""
    if engine == "sqlite":
        path = folder / f"fleet-{uuid.uuid4().hex[:8]}.db"
        settings = Settings(db_path=path)
        where = ["--db", str(path)]
        drop: Callable[[], None] = lambda: None  # noqa: E731
    else:
        from bench_pg import driver_url, with_database
        from bench_pg import drop as drop_database

        assert url is not None
        import psycopg

        name = f"workq_fleet_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(driver_url(url), autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        target = with_database(url, name)
        settings = Settings(database_url=target)
        where = ["--database-url", target]

        def drop() -> None:
            drop_database(url, name)

    queue = open_queue(settings, migrate=True)
    try:
        for n in range(issues_count):
            issues.create(queue, title=f"fleet issue {n}")
    finally:
        queue.db.dispose()
    try:
        yield where
    finally:
        drop()


def double_claims(where: list[str]) -> int:
    """Claims beyond the first of any issue, from the history."""
    flag, value = where
    settings = Settings(db_path=Path(value)) if flag == "--db" else Settings(database_url=value)
    queue = open_queue(settings)
    try:
        with queue.db.read() as conn:
            counts = conn.execute(
                select(func.count())
                .select_from(events)
                .where(events.c.kind.in_(("claimed", "claim_takeover")))
                .group_by(events.c.number)
            ).scalars()
            return sum(count - 1 for count in counts if count > 1)
    finally:
        queue.db.dispose()


def drive(argv: list[str], era: str, agents: int, pairs: int, clients: int, named: bool) -> Run:
    """The figures of the agents run against the server ``argv`` (with ``{port}``)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with started([part.replace("{port}", str(port)) for part in argv], port) as server:
        context = mp.get_context("spawn")
        connected, results = context.Queue(), context.Queue()
        go, close = context.Event(), context.Event()
        shares = [agents // clients + (i < agents % clients) for i in range(clients)]
        starts = [sum(shares[:i]) for i in range(clients)]
        processes = [
            context.Process(
                target=client_process,
                args=(url, era, first, share, pairs, named, connected, go, close, results),
            )
            for first, share in zip(starts, shares, strict=True)
            if share
        ]
        for process in processes:
            process.start()
        try:
            for _ in range(agents):
                connected.get(timeout=600)
            before = tree_cpu(server.pid)
            began = time.perf_counter()
            go.set()
            answers = [results.get(timeout=1800) for _ in processes]
            cpu = tree_cpu(server.pid) - before
        finally:
            close.set()
            for process in processes:
                process.join(timeout=120)
                if process.is_alive():
                    process.kill()
    latencies = [ms for found, _, _ in answers for ms in found]
    errors = sum(count for _, count, _ in answers)
    elapsed = max(end for _, _, end in answers) - began
    ordered = sorted(latencies)
    total = agents * pairs
    return Run(
        pairs_per_second=total / elapsed,
        claim_p50=statistics.median(ordered),
        claim_p99=ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))],
        cpu_per_pair=cpu / total * 1000,
        errors=errors,
        doubles=0,
    )


def pg_url(given: str | None) -> tuple[str, Callable[[], None] | None]:
    if given:
        return given, None
    from bench_pg import throwaway_server

    return throwaway_server()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agents", default="10,100,500")
    parser.add_argument("--servers", default="1,2,4")
    parser.add_argument("--eras", default="modern,legacy")
    parser.add_argument(
        "--engines", default=None, help="default: sqlite, and postgresql with a URL"
    )
    parser.add_argument(
        "--pairs",
        type=int,
        default=600,
        help="claim_next + complete pairs per run, at least 1 per agent",
    )
    parser.add_argument("--clients", type=int, default=2, help="client processes")
    parser.add_argument("--url", default=os.environ.get("WORKQ_TEST_PG_URL"))
    args = parser.parse_args()
    engines = (args.engines or ("sqlite,postgresql" if args.url else "sqlite")).split(",")
    counts = [int(n) for n in args.agents.split(",")]
    servers = [int(s) for s in args.servers.split(",")]
    eras = args.eras.split(",")
    url, stop = pg_url(args.url) if "postgresql" in engines else (None, None)
    load = os.getloadavg()[0]
    print(
        f"{os.cpu_count()} CPUs, load {load:.2f}; at least {args.pairs} pairs per run after one "
        f"warm-up pair per agent; {args.clients} client processes"
    )
    print(
        "| server | processes | client | agents | pairs/s | claim p50 | claim p99 | "
        "server CPU per pair | vs floor | errors | double claims |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    workq = [sys.executable, "-m", "workq.cli.main"]
    try:
        with tempfile.TemporaryDirectory() as temp:
            folder = Path(temp)
            script = folder / "bare_http.py"
            script.write_text(BARE_SERVER)
            floors: dict[tuple[str, int], float] = {}
            for era in eras:
                for agents in counts:
                    bare = [sys.executable, str(script), "{port}", "json"]
                    each = -(-args.pairs // agents)
                    run = drive(bare, era, agents, each, args.clients, named=False)
                    floors[era, agents] = run.cpu_per_pair
                    row("bare MCPServer", 1, era, agents, run, None)
            for engine in engines:
                for workers in servers:
                    for era in eras:
                        for agents in counts:
                            each = -(-args.pairs // agents)
                            with database(engine, url, folder, agents * (each + 1)) as where:
                                argv = [*workq, *where, "serve", "--http", "--port", "{port}"]
                                if workers > 1:
                                    argv += ["--workers", str(workers)]
                                named = era == "modern"
                                run = drive(argv, era, agents, each, args.clients, named)
                                run.doubles = double_claims(where)
                            row(f"workq, {engine}", workers, era, agents, run, floors[era, agents])
    finally:
        if stop is not None:
            stop()
    return 0


def row(name: str, workers: int, era: str, agents: int, run: Run, floor: float | None) -> None:
    ratio = f"{run.cpu_per_pair / floor:.2f}x" if floor else "1.00x"
    print(
        f"| {name} | {workers} | {era} | {agents} | {run.pairs_per_second:.0f} | "
        f"{run.claim_p50:.1f} ms | {run.claim_p99:.1f} ms | {run.cpu_per_pair:.2f} ms | "
        f"{ratio} | {run.errors} | {run.doubles} |",
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main())
