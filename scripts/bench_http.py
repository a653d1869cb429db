"""Benchmark one agent's claim loop over Streamable HTTP: server CPU per claim_next +
complete pair (figures, no asserts).

    .venv/bin/python scripts/bench_http.py [--pairs 300] [--rounds 3]

In one run, each server a process of its own on 127.0.0.1, driven by the SDK's client in
both protocol eras (legacy: initialize, a session; modern: stateless):
- ``workq serve --http`` on a SQLite file, each pair a real claim and completion;
- the same-work floor (scripts/floor_server.py): the same claim and completion with raw
  sqlite3 in a bare MCPServer, JSON answers;
- the SDK's floor: a bare MCPServer whose ``issue_claim_next`` and ``issue_complete`` do
  nothing but answer a number, answering each request as one JSON body (as workq does)
  and as the SDK does by default (an SSE stream per request).
The server's CPU time (user + system, all threads, from /proc) over the pairs, divided by
the pairs. In each era every server is started once and warmed, then the rounds are
interleaved (each server's pairs in turn) so that load on a shared machine meets every
server; the median round is shown, and workq against the same-work floor as the median of
the rounds' own ratios. ``PYTHONPATH=other/src`` measures another checkout's workq.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, ExitStack, contextmanager
from pathlib import Path

import anyio
from mcp import Client

FLOOR = Path(__file__).with_name("floor_server.py")  # the same claim and completion, raw

# The SDK's floor: a bare MCPServer whose tools only answer a number (bench_writers.py
# serves the same tools over stdio).
BARE_TOOLS = """\
from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel


class Answer(BaseModel):
    number: int


server = MCPServer("bare")
taken = [0]


@server.tool()
def issue_create(title: str) -> Answer:
    return Answer(number=0)


@server.tool()
def issue_claim_next() -> Answer:
    taken[0] += 1
    return Answer(number=taken[0])


@server.tool()
def issue_complete(number: int) -> Answer:
    return Answer(number=number)
"""

BARE_SERVER = (
    BARE_TOOLS
    + """
import sys

import uvicorn
from mcp.server.transport_security import TransportSecuritySettings

app = server.streamable_http_app(
    host="127.0.0.1",
    transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    json_response=sys.argv[2] == "json",
)
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
"""
)

ERAS = {"legacy": "legacy", "modern": "auto"}


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def started(argv: list[str], port: int) -> Iterator[subprocess.Popen[bytes]]:
    with subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    ) as process:
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                    break
                except OSError:
                    if process.poll() is not None or time.monotonic() > deadline:
                        raise SystemExit(f"the server did not start: {argv}") from None
                    time.sleep(0.05)
            yield process
        finally:
            process.terminate()
            process.wait(timeout=30)


def servers(folder: Path) -> dict[str, list[str]]:
    """Each server's command, with ``{port}`` to fill in."""
    script = folder / "bare_http.py"
    script.write_text(BARE_SERVER)
    db = folder / "queue.db"
    workq = [sys.executable, "-m", "workq.cli.main", "--db", str(db)]
    subprocess.run([*workq, "init"], check=True, capture_output=True)
    floor_db = folder / "floor.db"
    subprocess.run([*workq[:-1], str(floor_db), "init"], check=True, capture_output=True)
    return {
        "workq": [*workq, "serve", "--http", "--port", "{port}", "--run-id", "bench"],
        "same-work floor, JSON": [sys.executable, str(FLOOR), str(floor_db), "{port}", "json"],
        "bare, JSON answers": [sys.executable, str(script), "{port}", "json"],
        "bare, SSE answers": [sys.executable, str(script), "{port}", "sse"],
    }


async def era_costs(
    commands: dict[str, list[str]], mode: str, pairs: int, rounds: int
) -> dict[str, list[float]]:
    """Milliseconds of server CPU per claim_next + complete pair, per round, for each server
    in one client era: every server started once and warmed, then the rounds interleaved
    (each server's ``pairs`` in turn), so that load that comes and goes meets them all."""
    costs: dict[str, list[float]] = {name: [] for name in commands}
    with ExitStack() as processes:
        async with AsyncExitStack() as clients:
            loops: dict[str, tuple[int, Callable[[], Awaitable[None]]]] = {}
            for name, argv in commands.items():
                port = free_port()
                process = processes.enter_context(
                    started([part.replace("{port}", str(port)) for part in argv], port)
                )
                client = await clients.enter_async_context(
                    Client(f"http://127.0.0.1:{port}/mcp", mode=mode)
                )
                for i in range(pairs * rounds + 10):
                    await client.call_tool("issue_create", {"title": f"issue {i}"})
                pair = _pair_of(client)
                for _ in range(10):
                    await pair()
                loops[name] = (process.pid, pair)
            for _ in range(rounds):
                for name, (pid, pair) in loops.items():
                    before = cpu_seconds(pid)
                    for _ in range(pairs):
                        await pair()
                    costs[name].append((cpu_seconds(pid) - before) / pairs * 1000)
    return costs


def _pair_of(client: Client) -> Callable[[], Awaitable[None]]:
    """One claim_next and the completion of what it claimed, through ``client``."""

    async def pair() -> None:
        taken = await client.call_tool("issue_claim_next", {})
        assert not taken.is_error and taken.structured_content is not None, taken
        number = taken.structured_content["number"]
        done = await client.call_tool("issue_complete", {"number": number})
        assert not done.is_error, done

    return pair


async def main(pairs: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        commands = servers(Path(folder))
        costs: dict[tuple[str, str], list[float]] = {}
        for era, mode in ERAS.items():
            for name, values in (await era_costs(commands, mode, pairs, rounds)).items():
                costs[name, era] = values
    print(
        f"server CPU per claim_next + complete pair over HTTP, {pairs} pairs, median of "
        f"{rounds} round(s)"
    )
    print("| server | legacy client | modern client |")
    print("|---|---|---|")
    medians = {key: statistics.median(values) for key, values in costs.items()}
    for name in commands:
        print(f"| {name} | {medians[name, 'legacy']:.2f} ms | {medians[name, 'modern']:.2f} ms |")
    for era in ERAS:
        floor = medians["bare, JSON answers", era]
        print(
            f"{era}: workq {paired(costs, 'workq', 'same-work floor, JSON', era)} the same-work"
            f" floor (target 1.15x), {ratio(medians['workq', era], floor)} the bare JSON floor;"
            f" bare SSE {ratio(medians['bare, SSE answers', era], floor)} the bare JSON floor"
        )


def paired(costs: dict[tuple[str, str], list[float]], name: str, floor: str, era: str) -> str:
    """``name``'s cost against ``floor``'s as the median of each round's ratio: the two ran
    one after the other, so a load that came and went meets both (on a shared VM a server's
    own figure moves by a tenth or more from round to round)."""
    rounds = [
        cost / base for cost, base in zip(costs[name, era], costs[floor, era], strict=True) if base
    ]
    if not rounds:
        return ratio(0, 0)
    return f"{statistics.median(rounds):.2f}x (median of {len(rounds)} rounds' ratios)"


def ratio(cost: float, floor: float) -> str:
    """``cost`` as a multiple of ``floor``; none when the floor read 0 (the kernel counts a
    process's CPU in clock ticks of 10 ms: a short run can read none)."""
    if floor <= 0:
        return "n/a (the floor read 0 CPU: run more --pairs)"
    return f"{cost / floor:.2f}x"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    anyio.run(main, options.pairs, options.rounds)
