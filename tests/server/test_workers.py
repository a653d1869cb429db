"""``workq serve --http --workers N``: several processes answer on one port, a legacy
session acts as one run id whichever process answers, and the supervisor stops them all."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.server.conftest import serve_argv
from tests.server.test_http import HEADERS, INITIALIZE, http_process

CONNECTIONS = 16
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def workers_of(process: subprocess.Popen[bytes], count: int) -> list[int]:
    """The server's worker processes, once ``count`` of them listen."""
    deadline = time.monotonic() + 60
    while True:
        # multiprocessing's resource tracker is a child too; workers hold the socket.
        found = [pid for pid in children(process.pid) if sockets(pid) > 0]
        if len(found) == count:
            return found
        assert time.monotonic() < deadline and process.poll() is None, found
        time.sleep(0.1)


def sockets(pid: int) -> int:
    try:
        links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
    except (FileNotFoundError, PermissionError):
        return 0
    return sum(link.startswith("socket:") for link in links)


def call(http: httpx2.Client, url: str, session: str, tool: str, **arguments: Any) -> Any:
    message = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }
    headers = HEADERS | {"mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}
    answer = http.post(url, json=message, headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()["result"]


def open_session(url: str) -> str:
    answer = httpx2.post(url, json=INITIALIZE, headers=HEADERS, timeout=30)
    assert answer.status_code == 200, answer.text
    session = answer.headers["mcp-session-id"]
    assert "This session acts as run id run-" in answer.json()["result"]["instructions"]
    return session


def test_a_session_is_one_caller_whichever_worker_answers(db: Path) -> None:
    with http_process(db, "--workers", "2") as (url, process):
        workers = workers_of(process, 2)
        session = open_session(url)
        before = {pid: sockets(pid) for pid in workers}
        # Each client its own connection: the kernel hands them to both workers.
        clients = [httpx2.Client() for _ in range(CONNECTIONS)]
        try:
            for i, http in enumerate(clients):
                call(http, url, session, "issue_create", title=f"issue {i}")
            assert all(sockets(pid) > before[pid] for pid in workers), "one worker took all"
            claimed = [
                call(http, url, session, "issue_claim_next")["structuredContent"]
                for http in clients
            ]
            assert len({c["number"] for c in claimed}) == CONNECTIONS
            assert len({c["claimed_by"] for c in claimed}) == 1
            # Another session is another caller, on every worker.
            other = open_session(url)
            for http, taken in zip(clients, claimed, strict=True):
                refused = call(http, url, other, "issue_complete", number=taken["number"])
                assert refused["isError"] and "NOT_HOLDER" in refused["content"][0]["text"]
            # Each claim completed through another connection than the one that took it.
            for http, taken in zip(clients, claimed[1:] + claimed[:1], strict=True):
                done = call(http, url, session, "issue_complete", number=taken["number"])
                assert not done["isError"], done
        finally:
            for http in clients:
                http.close()


@pytest.mark.parametrize("signal", ["terminate", "kill"])
def test_no_worker_outlives_its_server(db: Path, signal: str) -> None:
    """SIGTERM stops every worker; after kill -9 each stops by itself, so that none serves
    under a run id another server may then take."""
    with http_process(db, "--workers", "2") as (_, process):
        workers = workers_of(process, 2)
        getattr(process, signal)()
        process.wait(timeout=30)
    deadline = time.monotonic() + 30
    while any(alive(pid) for pid in workers):
        assert time.monotonic() < deadline, f"a worker outlived its server ({signal})"
        time.sleep(0.1)


def alive(pid: int) -> bool:
    """Running, not a zombie waiting for its parent to reap it."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_workers_need_http(db: Path) -> None:
    done = subprocess.run(
        [sys.executable, *serve_argv("--workers", "2", db=db)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "INVALID_INPUT" in done.stderr and "add --http" in done.stderr


ORPHAN = """
import os, time
from workq.server import workers

supervisor = os.getpid()
child = os.fork()
if child:
    print(child, flush=True)
    os._exit(0)  # killed before its worker watches it: the worker's parent is init by then
time.sleep(0.3)
workers._end_with(supervisor)  # as _worker starts it, with the pid the supervisor gave
time.sleep(60)
"""


def test_a_worker_that_starts_after_its_supervisor_died_stops() -> None:
    """A worker slow to start (a loaded machine) may find its supervisor killed already and
    init as its parent; told its supervisor's pid by the supervisor, it still stops. (Asking
    for its parent at that point, it waited for init forever: found as a live orphan.)"""
    started = subprocess.run(
        [sys.executable, "-c", ORPHAN], capture_output=True, text=True, timeout=30, check=True
    )
    orphan = int(started.stdout)
    deadline = time.monotonic() + 20
    while alive(orphan):
        assert time.monotonic() < deadline, "the orphaned worker kept running"
        time.sleep(0.05)
