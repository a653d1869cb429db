"""Benchmark: a notice receiver that hangs or fails slows no claim (figures, no asserts).

    .venv/bin/python scripts/bench_notices.py [--calls 300]

In one run, four `workq serve` processes over stdio, each on its own SQLite file: one
with no sink, the others with a webhook sink that takes the ``blocked`` notice, pointing
at a receiver on 127.0.0.1 that answers 200 at once (the baseline), one that accepts the
connection and never answers, one that answers 500 at once. Each round, on each server in turn,
an agent claims the next issue (``issue_claim_next``) and blocks it (``issue_block``),
which queues a notice that the server's delivery thread then tries to send. Printed: the
round trip of the claim and of the block (p50, p99) per receiver, their ratio to the
baseline, and where the notices stand at the end (delivered, pending, failed).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

MODES = ("none", "healthy", "hanging", "failing")


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


@contextmanager
def hanging_receiver() -> Iterator[str]:
    """A TCP listener that accepts every connection and never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/hook"
    finally:
        stop.set()
        thread.join(timeout=2)
        for conn in held:
            conn.close()
        listener.close()


class _Answering(BaseHTTPRequestHandler):
    status = 200

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(self.status)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Failing(_Answering):
    status = 500


@contextmanager
def answering_receiver(handler: type[_Answering]) -> Iterator[str]:
    """A receiver on 127.0.0.1 that answers every POST at once with ``handler.status``."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()
        server.server_close()


def prepare(db: Path, issues: int, url: str | None) -> None:
    from workq.config import Settings
    from workq.services.notices import sinks
    from workq.services.queue import issues as issue_service
    from workq.services.runtime import open_queue

    queue = open_queue(Settings(db_path=db))
    try:
        for n in range(issues):
            issue_service.create(queue, title=f"benchmark issue {n}")
        if url is not None:  # not checked: the hanging receiver takes the connection
            sinks.add(queue, "bench", url=url, events="blocked", check=False)
    finally:
        queue.db.dispose()


def notice_states(db: Path) -> dict[str, int]:
    from sqlalchemy import func, select

    from workq.config import Settings
    from workq.db.tables import notices
    from workq.services.runtime import open_queue

    queue = open_queue(Settings(db_path=db))
    try:
        with queue.db.read() as conn:
            rows = conn.execute(
                select(notices.c.state, func.count()).group_by(notices.c.state)
            ).all()
        return {str(r[0]): int(r[1]) for r in rows}
    finally:
        queue.db.dispose()


def params(db: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "workq.cli.main", "--db", str(db), "serve", "--run-id", "bench"],
        env=dict(os.environ),
    )


Samples = dict[str, dict[str, list[float]]]


async def measure(dbs: dict[str, Path], calls: int, log: object) -> Samples:
    samples: Samples = {m: {"claim": [], "block": []} for m in MODES}
    async with AsyncExitStack() as stack:
        clients = {
            mode: await stack.enter_async_context(
                Client(stdio_client(params(db), errlog=log), mode="legacy")  # type: ignore[arg-type]
            )
            for mode, db in dbs.items()
        }
        for i in range(calls + 5):
            for mode, client in clients.items():
                started = time.perf_counter()
                claimed = await client.call_tool("issue_claim_next", {})
                took = time.perf_counter() - started
                assert not claimed.is_error, claimed.content
                number = (claimed.structured_content or {})["number"]
                started = time.perf_counter()
                blocked = await client.call_tool(
                    "issue_block", {"number": number, "reason": "benchmark: a person decides"}
                )
                blocking = time.perf_counter() - started
                assert not blocked.is_error, blocked.content
                if i >= 5:
                    samples[mode]["claim"].append(took)
                    samples[mode]["block"].append(blocking)
    return samples


def report(samples: Samples, states: dict[str, dict[str, int]]) -> None:
    """Ratios against the healthy receiver: the same notices written, only the receiver
    differs (``none`` shows what queueing a notice costs at all)."""
    base = {kind: statistics.median(samples["healthy"][kind]) for kind in ("claim", "block")}
    print(f"{'receiver':10} {'call':6} {'p50 ms':>8} {'p99 ms':>8} {'vs healthy':>10}  notices")
    for mode in MODES:
        for kind in ("claim", "block"):
            found = samples[mode][kind]
            p50 = statistics.median(found)
            print(
                f"{mode:10} {kind:6} {p50 * 1000:8.2f} {percentile(found, 0.99) * 1000:8.2f}"
                f" {p50 / base[kind]:9.2f}x  {states[mode] if kind == 'claim' else ''}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as tmp,
        answering_receiver(_Answering) as healthy,
        hanging_receiver() as hanging,
        answering_receiver(_Failing) as failing,
    ):
        folder = Path(tmp)
        urls = {"none": None, "healthy": healthy, "hanging": hanging, "failing": failing}
        dbs = {mode: folder / f"{mode}.db" for mode in MODES}
        for mode, db in dbs.items():
            prepare(db, args.calls + 10, urls[mode])
        with (folder / "servers.log").open("w") as log:
            samples = anyio.run(measure, dbs, args.calls, log)
        states = {mode: notice_states(db) for mode, db in dbs.items()}
    print(f"{args.calls} claims and blocks per server, alternating servers each round")
    report(samples, states)


if __name__ == "__main__":
    main()
