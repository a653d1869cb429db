"""Waiting calls are coroutines, not threads: a real ``workq serve`` fed 300 waiting calls
on a raw pipe keeps a handful of threads (it kept one per call), every call still wakes
and answers, and past ``WAITERS_MAX`` a waiting call is refused instead of piling up."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.server.conftest import CALL_TIMEOUT, call_ok, error_of, make_server, serve_argv
from tests.workq_cli import ok
from workq.server import waits

WAITING = 300
DEADLINE = 120.0


def _line(message: dict[str, Any]) -> bytes:
    return (json.dumps(message) + "\n").encode()


def _threads(pid: int) -> int:
    for row in Path(f"/proc/{pid}/status").read_text().splitlines():
        if row.startswith("Threads:"):
            return int(row.split()[1])
    raise AssertionError("no thread count")


def test_three_hundred_waiting_calls_hold_a_handful_of_threads(db: Path) -> None:
    with subprocess.Popen(
        [sys.executable, *serve_argv(db=db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=db.parent,
    ) as server:
        try:
            _wait_and_wake(server, db)
        finally:
            server.kill()
            server.wait(timeout=CALL_TIMEOUT)


def _wait_and_wake(server: subprocess.Popen[bytes], db: Path) -> None:
    assert server.stdin is not None and server.stdout is not None
    server.stdin.write(_line({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}))
    for i in range(1, WAITING + 1):
        arguments = {"run_id": f"w{i}", "wait_seconds": 60}
        call = {"name": "issue_claim_next", "arguments": arguments}
        server.stdin.write(
            _line({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": call})
        )
    server.stdin.flush()
    assert json.loads(server.stdout.readline())["id"] == 0  # initialized: then calls
    peak = 0
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # while the calls settle into their waits
        peak = max(peak, _threads(server.pid))
        time.sleep(0.2)
    assert peak < 60, f"{peak} threads for {WAITING} waiting calls"
    for n in range(3):  # another process adds work: three waiters wake and take it
        ok("--db", str(db), "create", f"work {n}")
    answered: list[int] = []
    end = time.monotonic() + DEADLINE
    while len(answered) < 3 and time.monotonic() < end:
        answer = json.loads(server.stdout.readline())
        if answer["result"]["structuredContent"].get("claimed"):
            answered.append(answer["result"]["structuredContent"]["number"])
    assert sorted(answered) == [1, 2, 3]


@pytest.mark.anyio
async def test_past_the_bound_a_waiting_call_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(waits, "WAITERS_MAX", 2)
    server = make_server(tmp_path / "queue.db", "default")
    with anyio.fail_after(DEADLINE):
        async with Client(server) as client, anyio.create_task_group() as group:
            for i in range(2):
                arguments = {"run_id": f"w{i}", "wait_seconds": 30}
                group.start_soon(client.call_tool, "issue_claim_next", arguments)
            while _waiting() < 2:  # both calls are in their wait
                await anyio.sleep(0.05)
            refused = await client.call_tool(
                "issue_claim_next", {"run_id": "third", "wait_seconds": 30}
            )
            assert refused.is_error and error_of(refused)["code"] == "SERVER_BUSY"
            await call_ok(client, "issue_create", title="for a waiter")
            await call_ok(client, "issue_create", title="for the other")


def _waiting() -> int:
    """Calls waiting on this event loop (its bell counts them; none before the first)."""
    try:
        return waits._bell_of_loop.get().sleepers
    except LookupError:
        return 0
