"""Overload: 16 or more clients at once for a bounded time, through each door. The only
error allowed is a clear DATABASE_BUSY; no client stalls (every call returns within a
bound); nothing is handed out twice. Latency percentiles are printed, never asserted."""

from __future__ import annotations

import json
import random
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.torture import procs
from tests.torture.conftest import env_float, env_int, latency_lines, record
from tests.torture.servers import code_of, http, stdio, text_of
from workq.config import Settings
from workq.domain.authority import Authority
from workq.errors import WorkqError
from workq.services.maintenance import maintenance
from workq.services.queue import claims, issues, listing, ready_queue
from workq.services.runtime import open_queue

CLIENTS = env_int("WORKQ_TORTURE_CLIENTS", 16)
SECONDS = env_float("WORKQ_TORTURE_OVERLOAD_SECONDS", 6)
CALL_LIMIT = 60.0  # a call slower than this is a stalled client
ALLOWED = {"DATABASE_BUSY"}
SEEDED = 400


def _seeded(db: Path) -> None:
    queue = open_queue(Settings(db_path=db))
    try:
        for n in range(SEEDED):
            issues.create(queue, title=f"seeded {n}", priority=("high", "medium", "low")[n % 3])
    finally:
        queue.db.dispose()


def _settled(db: Path, claimed: list[int]) -> None:
    """Nothing handed out twice, the database intact, doctor clean."""
    duplicates = [n for n, count in Counter(claimed).items() if count > 1]
    assert not duplicates, f"claimed more than once: {duplicates[:10]}"
    queue = open_queue(Settings(db_path=db), migrate=False)
    try:
        report = maintenance.doctor(queue)
        assert not report.findings, report.findings
    finally:
        queue.db.dispose()


def service_client(db: str, name: str, seconds: float, busy_ms: int, out: str) -> None:
    """One overload client process: mixed calls on the services as fast as it can."""
    queue = open_queue(Settings(db_path=Path(db), busy_timeout_ms=busy_ms, lease_seconds=600))
    rng = random.Random(name)
    latency: dict[str, list[float]] = defaultdict(list)
    errors: Counter[str] = Counter()
    claimed: list[int] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        roll = rng.random()
        started = time.perf_counter()
        try:
            if roll < 0.25:
                issues.create(queue, title=f"{name} {started}")
                latency["create"].append(time.perf_counter() - started)
            elif roll < 0.75:
                got = claims.claim_next(queue, Authority.of({name}))
                latency["claim_next"].append(time.perf_counter() - started)
                if got is not None:
                    claimed.append(got.number)
                    started = time.perf_counter()
                    claims.complete(queue, got.number, Authority.of({name}))
                    latency["complete"].append(time.perf_counter() - started)
            elif roll < 0.95:
                ready_queue.ready(queue, limit=10)
                latency["ready"].append(time.perf_counter() - started)
            else:
                listing.list_issues(queue, limit=20)
                latency["list"].append(time.perf_counter() - started)
        except WorkqError as exc:
            errors[exc.code] += 1
    queue.db.dispose()
    Path(out).write_text(json.dumps({"latency": latency, "errors": errors, "claimed": claimed}))


@pytest.mark.slow
@pytest.mark.parametrize("busy_ms", [10_000, 100], ids=["busy-timeout-10s", "busy-timeout-100ms"])
def test_sixteen_processes_on_one_file(tmp_path: Path, busy_ms: int) -> None:
    db = tmp_path / "queue.db"
    _seeded(db)
    context = procs.forkserver()
    outs = [tmp_path / f"client-{i}.json" for i in range(CLIENTS)]
    workers = [
        context.Process(
            target=service_client, args=(str(db), f"c{i}", SECONDS, busy_ms, str(outs[i]))
        )
        for i in range(CLIENTS)
    ]
    for worker in workers:
        worker.start()
    deadline = time.monotonic() + SECONDS + CALL_LIMIT
    for worker in workers:
        worker.join(max(0.0, deadline - time.monotonic()))
    stalled = [w.name for w in workers if w.is_alive()]
    for worker in workers:
        if worker.is_alive():
            worker.kill()
            worker.join(10)
    assert not stalled, f"clients still running {CALL_LIMIT} s after the end: {stalled}"
    assert all(w.exitcode == 0 for w in workers), [w.exitcode for w in workers]
    latency: dict[str, list[float]] = defaultdict(list)
    errors: Counter[str] = Counter()
    claimed: list[int] = []
    for out in outs:
        result = json.loads(out.read_text())
        assert sum(len(v) for v in result["latency"].values()) > 0, f"{out.name} did nothing"
        for op, samples in result["latency"].items():
            latency[op].extend(samples)
        errors.update(result["errors"])
        claimed.extend(result["claimed"])
    label = f"{CLIENTS} processes, busy timeout {busy_ms} ms"
    calls = sum(len(v) for v in latency.values())
    record(
        f"overload-services-{busy_ms}ms",
        [
            f"{label}, {SECONDS:.0f} s: {calls} calls, {calls / SECONDS:.0f}/s; "
            f"errors {dict(errors) or 'none'}",
            *latency_lines(label, latency),
        ],
        {"clients": CLIENTS, "calls": calls, "errors": dict(errors)},
    )
    assert set(errors) <= ALLOWED, errors
    _settled(db, claimed)


class McpLoad:
    """Mixed tool calls from one MCP client until the end; every call bounded."""

    def __init__(self) -> None:
        self.latency: dict[str, list[float]] = defaultdict(list)
        self.errors: Counter[str] = Counter()
        self.claimed: list[int] = []
        self.calls_by_client: Counter[str] = Counter()

    async def call(self, client: Client, name: str, tool: str, **arguments: Any) -> Any:
        started = time.perf_counter()
        with anyio.fail_after(CALL_LIMIT):  # a stalled call fails the test
            result = await client.call_tool(tool, arguments)
        self.latency[tool].append(time.perf_counter() - started)
        self.calls_by_client[name] += 1
        if result.is_error:
            code = code_of(result) or "?"
            self.errors[code] += 1
            assert code in ALLOWED, text_of(result)
            return None
        return result.structured_content

    async def run(self, client: Client, name: str, seconds: float) -> None:
        rng = random.Random(name)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            roll = rng.random()
            if roll < 0.25:
                await self.call(client, name, "issue_create", title=f"{name} {time.time()}")
            elif roll < 0.75:
                got = await self.call(client, name, "issue_claim_next", run_id=name)
                if got and got["claimed"]:
                    number = got["number"]
                    self.claimed.append(number)
                    await self.call(client, name, "issue_complete", number=number, run_id=name)
            elif roll < 0.95:
                await self.call(client, name, "issue_ready")
            else:
                await self.call(client, name, "issue_list", limit=20)

    def report(self, section: str, label: str, seconds: float) -> None:
        calls = sum(len(v) for v in self.latency.values())
        record(
            section,
            [
                f"{label}, {seconds:.0f} s: {calls} calls, {calls / seconds:.0f}/s; "
                f"errors {dict(self.errors) or 'none'}",
                *latency_lines(label, self.latency),
            ],
            {"clients": CLIENTS, "calls": calls, "errors": dict(self.errors)},
        )


@pytest.mark.slow
@pytest.mark.anyio
async def test_sixteen_clients_on_one_http_server(tmp_path: Path) -> None:
    db = tmp_path / "queue.db"
    _seeded(db)
    load = McpLoad()
    with http(db) as (url, server):

        async def one(i: int) -> None:
            async with Client(url, read_timeout_seconds=CALL_LIMIT) as client:
                await load.run(client, f"h{i}", SECONDS)

        with anyio.fail_after(SECONDS + 2 * CALL_LIMIT):
            async with anyio.create_task_group() as group:
                for i in range(CLIENTS):
                    group.start_soon(one, i)
        assert server.poll() is None, "the server died under load"
        async with Client(url, read_timeout_seconds=CALL_LIMIT) as late:  # still serving
            assert not (await late.call_tool("issue_ready", {})).is_error
    assert len(load.calls_by_client) == CLIENTS and min(load.calls_by_client.values()) > 0
    load.report("overload-http", f"{CLIENTS} MCP clients on one HTTP server", SECONDS)
    _settled(db, load.claimed)


@pytest.mark.slow
@pytest.mark.anyio
async def test_sixteen_stdio_servers_on_one_file(tmp_path: Path) -> None:
    db = tmp_path / "queue.db"
    _seeded(db)
    load = McpLoad()
    ready = anyio.Event()
    started: list[int] = []

    async def one(i: int) -> None:
        async with stdio(db, "--run-id", f"s{i}") as client:
            await client.list_tools()
            started.append(i)
            if len(started) == CLIENTS:
                ready.set()
            await ready.wait()  # all servers up: then the storm
            await load.run(client, f"s{i}", SECONDS)

    with anyio.fail_after(SECONDS + 4 * CALL_LIMIT):
        async with anyio.create_task_group() as group:
            for i in range(CLIENTS):
                group.start_soon(one, i)
    assert len(load.calls_by_client) == CLIENTS and min(load.calls_by_client.values()) > 0
    load.report("overload-stdio", f"{CLIENTS} workq serve processes over stdio", SECONDS)
    _settled(db, load.claimed)
