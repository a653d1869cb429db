"""Benchmark the MCP server against a bare MCPServer driven the same way (figures, no asserts).

    .venv/bin/python scripts/bench_mcp.py [--calls 1000] [--spawns 10]

In one run, over stdio with the SDK's client:
- round trip of ``issue_claim_next`` (a real claim on a file with enough issues) against a
  no-op tool on a bare MCPServer with one tool: p50, p99 and their ratios (target p50 <= 1.5x);
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
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

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


async def round_trips(
    bare: StdioServerParameters, workq: StdioServerParameters, log: Any, calls: int, warmup: int
) -> tuple[list[float], list[float]]:
    """Both servers open at once, calls alternating, so load on a shared machine hits both."""
    samples: tuple[list[float], list[float]] = ([], [])
    async with (
        Client(stdio_client(bare, errlog=log), mode="legacy") as first,
        Client(stdio_client(workq, errlog=log), mode="legacy") as second,
    ):
        for i in range(warmup + calls):
            for client, tool, kept in (
                (first, "noop", samples[0]),
                (second, "issue_claim_next", samples[1]),
            ):
                started = time.perf_counter()
                result = await client.call_tool(tool, {})
                elapsed = time.perf_counter() - started
                assert not result.is_error, result.content
                if i >= warmup:
                    kept.append(elapsed)
    return samples


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


async def main(calls: int, spawns: int) -> None:
    with (
        tempfile.TemporaryDirectory(prefix="workq-bench-") as tmp,
        open(Path(tmp) / "servers.log", "w") as log,
    ):
        folder = Path(tmp)
        bare = bare_params(folder)
        db = folder / "bench.db"
        warmup = min(50, calls)
        fill(db, calls + warmup + 10)
        workq = workq_params(db)

        print(f"round trip over stdio, {calls} calls each (alternating) after {warmup} warm-up")
        bare_rt, workq_rt = await round_trips(bare, workq, log, calls, warmup)
        for name, samples in (("bare noop", bare_rt), ("issue_claim_next", workq_rt)):
            print(
                f"  {name:17} p50 {percentile(samples, 0.5) * 1000:6.2f} ms"
                f"   p99 {percentile(samples, 0.99) * 1000:6.2f} ms"
                f"   mean {statistics.fmean(samples) * 1000:6.2f} ms"
            )
        print(
            f"  ratio             p50 {percentile(workq_rt, 0.5) / percentile(bare_rt, 0.5):.2f}x"
            f"   p99 {percentile(workq_rt, 0.99) / percentile(bare_rt, 0.99):.2f}x"
            "   (target: p50 within 1.5x)"
        )

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
    options = parser.parse_args()
    anyio.run(main, options.calls, options.spawns)
