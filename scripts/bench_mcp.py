"""Benchmark the MCP server against a bare MCPServer driven the same way (figures, no asserts).

    .venv/bin/python scripts/bench_mcp.py [--calls 1000] [--spawns 10]

In one run, over stdio with the SDK's client:
- round trips of ``issue_claim_next`` (a real claim on a file with enough issues) and of
  ``issue_complete``, against the same-work floor (scripts/floor_server.py: a bare
  MCPServer doing the same claim and completion with raw sqlite3 and answering the same
  fields; target p50 <= 1.10x) and against a no-op tool on a bare MCPServer. Each server
  serves a block of pairs in turn (``--block``, 25: a server busy with a stream of calls,
  as a serving process is; 1 gives each call a server that has just been idle while the
  others ran, colder, and is printed too);
- spawn to initialized of ``workq serve`` against the bare server (target 1.3x);
- a call to an unknown tool name (one no toolset has, and one of a toolset the server does
  not enable) against a real call (``issue_get``): it must cost about the same;
- the size of tools/list for the default toolset (target under 16 KB).

Servers run with this process's environment, so ``PYTHONPATH=other/src`` measures another
checkout with the same interpreter.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

FLOOR = Path(__file__).with_name("floor_server.py")
BARE_SERVER = """\
from mcp.server.mcpserver import MCPServer

server = MCPServer("bare")


@server.tool()
def noop() -> str:
    return "ok"


server.run()
"""


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def bare_params(folder: Path) -> StdioServerParameters:
    script = folder / "bare_server.py"
    script.write_text(BARE_SERVER)
    return StdioServerParameters(command=sys.executable, args=[str(script)])


def workq_params(db: Path, *extra: str) -> StdioServerParameters:
    """``workq serve`` (the CLI's entry point, run by this interpreter)."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "workq.cli.main", "--db", str(db), "serve", *extra],
        env=dict(os.environ),
    )


async def spawn_to_initialized(params: StdioServerParameters, log: Any) -> float:
    started = time.perf_counter()
    async with Client(stdio_client(params, errlog=log), mode="legacy"):
        return time.perf_counter() - started


# The three servers of the round trip: each answers a claim and a completion.
CALLS = {
    "bare noop": ("noop", "noop"),
    "same-work floor": ("issue_claim_next", "issue_complete"),
    "workq": ("issue_claim_next", "issue_complete"),
}
Samples = dict[str, dict[str, list[float]]]


async def _pair(client: Client, claim: str, complete: str) -> tuple[float, float]:
    """One claim and the completion of what it claimed: how long each took."""
    started = time.perf_counter()
    claimed = await client.call_tool(claim, {})
    took = time.perf_counter() - started
    assert not claimed.is_error, claimed.content
    data = claimed.structured_content or {}
    arguments = {} if complete == "noop" else {"number": data["number"], "fence": data["fence"]}
    started = time.perf_counter()
    done = await client.call_tool(complete, arguments)
    finished = time.perf_counter() - started
    assert not done.is_error, done.content
    return took, finished


async def round_trips(
    servers: dict[str, StdioServerParameters], log: Any, calls: int, warmup: int, block: int
) -> Samples:
    """Every server open at once, ``block`` claims and completions on each in turn, so
    load on a shared machine hits them alike."""
    samples: Samples = {name: {"claim": [], "complete": []} for name in servers}
    async with AsyncExitStack() as stack:
        clients = {
            name: await stack.enter_async_context(
                Client(stdio_client(params, errlog=log), mode="legacy")
            )
            for name, params in servers.items()
        }
        for name, client in clients.items():
            for _ in range(warmup):
                await _pair(client, *CALLS[name])
        for _ in range(max(1, calls // block)):
            for name, client in clients.items():
                for _ in range(block):
                    took, finished = await _pair(client, *CALLS[name])
                    samples[name]["claim"].append(took)
                    samples[name]["complete"].append(finished)
    return samples


def report_round_trips(samples: Samples) -> None:
    for name, by_call in samples.items():
        for call, found in by_call.items():
            print(
                f"  {name:16} {call:8} p50 {percentile(found, 0.5) * 1000:6.2f} ms"
                f"   p99 {percentile(found, 0.99) * 1000:6.2f} ms"
                f"   mean {statistics.fmean(found) * 1000:6.2f} ms"
            )
    for call in ("claim", "complete"):
        mine = percentile(samples["workq"][call], 0.5)
        floor = percentile(samples["same-work floor"][call], 0.5)
        noop = percentile(samples["bare noop"][call], 0.5)
        print(
            f"  workq {call:8} p50 {mine / floor:.2f}x the same-work floor (target 1.10x),"
            f" {mine / noop:.2f}x the bare no-op"
        )


async def unknown_tools(
    workq: StdioServerParameters, log: Any, calls: int
) -> dict[str, list[float]]:
    """Round trips of a real call and of two unknown names, interleaved, on one server."""
    kinds: dict[str, tuple[str, dict[str, Any], bool]] = {
        "issue_get (real)": ("issue_get", {"number": 1}, False),
        "no_such_tool": ("no_such_tool", {}, True),
        "issue_comment (off)": ("issue_comment", {"number": 1, "body": "x"}, True),
    }
    samples: dict[str, list[float]] = {name: [] for name in kinds}
    async with Client(stdio_client(workq, errlog=log), mode="legacy") as client:
        for i in range(calls + 5):
            for name, (tool, arguments, refused) in kinds.items():
                started = time.perf_counter()
                result = await client.call_tool(tool, arguments)
                elapsed = time.perf_counter() - started
                assert result.is_error == refused, result.content
                if i >= 5:
                    samples[name].append(elapsed)
    return samples


async def tools_list_bytes(params: StdioServerParameters, log: Any) -> tuple[int, int]:
    async with Client(stdio_client(params, errlog=log), mode="legacy") as client:
        listed = await client.list_tools()
    wire = listed.model_dump(mode="json", by_alias=True, exclude_none=True)
    return len(listed.tools), len(json.dumps(wire, separators=(",", ":")).encode())


def fill(db: Path, count: int) -> None:
    from workq.config import Settings
    from workq.services.queue import issues
    from workq.services.runtime import open_queue

    queue = open_queue(Settings(db_path=db))
    try:
        for n in range(count):
            issues.create(queue, title=f"benchmark issue {n}", description="x" * 200)
    finally:
        queue.db.dispose()


async def alternate(
    runs: int, first: Callable[[], Awaitable[float]], second: Callable[[], Awaitable[float]]
) -> tuple[list[float], list[float]]:
    """Interleave the two measurements so drift on a noisy machine hits both alike."""
    a: list[float] = []
    b: list[float] = []
    for _ in range(runs):
        a.append(await first())
        b.append(await second())
    return a, b


async def main(calls: int, spawns: int, block: int) -> None:
    with (
        tempfile.TemporaryDirectory(prefix="workq-bench-") as tmp,
        open(Path(tmp) / "servers.log", "w") as log,
    ):
        folder = Path(tmp)
        bare = bare_params(folder)
        db, floor_db = folder / "bench.db", folder / "floor.db"
        warmup = min(50, calls)
        fill(db, 2 * (calls + warmup) + 10)
        fill(floor_db, 2 * (calls + warmup) + 10)
        workq = workq_params(db)
        floor = StdioServerParameters(
            command=sys.executable, args=[str(FLOOR), str(floor_db)], env=dict(os.environ)
        )
        servers = {"bare noop": bare, "same-work floor": floor, "workq": workq}
        for each in sorted({min(block, calls), 1}, reverse=True):
            print(
                f"round trip over stdio, {calls} claims and completions on each server, in"
                f" turns of {each} pair(s), after {warmup} warm-up"
            )
            report_round_trips(await round_trips(servers, log, calls, warmup, each))

        print(f"spawn to initialized (initialize handshake), {spawns} runs each, interleaved")
        bare_sp, workq_sp = await alternate(
            spawns,
            lambda: spawn_to_initialized(bare, log),
            lambda: spawn_to_initialized(workq, log),
        )
        for name, samples in (("bare MCPServer", bare_sp), ("workq serve", workq_sp)):
            print(
                f"  {name:17} median {statistics.median(samples) * 1000:6.0f} ms"
                f"   min {min(samples) * 1000:6.0f} ms"
            )
        ratio = statistics.median(workq_sp) / statistics.median(bare_sp)
        print(f"  ratio             median {ratio:.2f}x   (target: within 1.3x)")

        unknown_calls = max(20, calls // 10)
        print(f"unknown tool names against a real call, {unknown_calls} calls each, interleaved")
        by_kind = await unknown_tools(workq, log, unknown_calls)
        real = percentile(by_kind["issue_get (real)"], 0.5)
        for name, samples in by_kind.items():
            print(
                f"  {name:19} p50 {percentile(samples, 0.5) * 1000:7.2f} ms"
                f"   p99 {percentile(samples, 0.99) * 1000:7.2f} ms"
                f"   p50 ratio {percentile(samples, 0.5) / real:5.2f}x"
            )

        count, size = await tools_list_bytes(workq, log)
        every, every_size = await tools_list_bytes(workq_params(db, "--toolsets", "all"), log)
        print(f"tools/list, default toolset: {count} tools, {size:,} bytes (target: <= 12,000)")
        print(f"tools/list, all toolsets:    {every} tools, {every_size:,} bytes")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--spawns", type=int, default=10)
    parser.add_argument("--block", type=int, default=25, help="pairs per server per turn")
    options = parser.parse_args()
    anyio.run(main, options.calls, options.spawns, options.block)
