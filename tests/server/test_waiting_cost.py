"""Waiting calls are coroutines, not threads: a real ``workq serve`` fed 300 waiting calls
on a raw pipe keeps a handful of threads (it kept one per call), every call still wakes
and answers, and past ``WAITERS_MAX`` a waiting call is refused instead of piling up."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.server.conftest import CALL_TIMEOUT, call_ok, error_of, make_server, serve_argv
from tests.storage import assert_intact
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
    assert_intact(db)


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


@pytest.mark.anyio
async def test_one_new_issue_costs_many_waiting_calls_a_few_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Forty waiting calls of one server, woken by one new issue: one of them takes it, and
    between them they read the queue a few times (whether anything is there, when the
    next lease lapses), not forty times each."""
    from workq.services.queue import ready_queue, waiting

    reads: Counter[str] = Counter()
    for module, name in ((ready_queue, "ready_rows"), (waiting, "next_lapse")):
        real = getattr(module, name)

        def counted(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            reads[_name] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)
    calls = 40
    server = make_server(tmp_path / "queue.db", "default")
    answers: list[int] = []

    async def wait_for_work(i: int) -> None:
        arguments = {"run_id": f"w{i}", "wait_seconds": 60}
        answer = await client.call_tool("issue_claim_next", arguments)
        assert not answer.is_error, answer.content
        assert answer.structured_content is not None
        answers.append(answer.structured_content["number"])

    with anyio.fail_after(DEADLINE):
        async with Client(server) as client, anyio.create_task_group() as group:
            for i in range(calls):
                group.start_soon(wait_for_work, i)
            while _waiting() < calls or sum(reads.values()) < 2 * calls:
                await anyio.sleep(0.05)  # every call tried once and went to sleep
            await _settled(reads)
            reads.clear()
            await call_ok(client, "issue_create", title="for one of them")
            while not answers:
                await anyio.sleep(0.02)
            await _settled(reads)
            assert answers == [1]
            assert reads["ready_rows"] <= 3, reads
            assert reads["next_lapse"] <= 3, reads
            group.cancel_scope.cancel()


async def _settled(reads: Counter[str]) -> None:
    """Until the reads stop for half a second."""
    before = None
    while before != sum(reads.values()):
        before = sum(reads.values())
        await anyio.sleep(0.5)
