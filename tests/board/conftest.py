"""A real ``workq board`` process on 127.0.0.1 over a real SQLite file, and the CLI (run in
this process)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2
import pytest

from tests.workq_cli import workq
from workq.config import Settings
from workq.services.handle import Queue
from workq.services.runtime import open_queue

START_TIMEOUT = 30.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def cli(db: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``workq --db DB ARGS`` as the actor cli-test, in this process."""
    done = workq("--db", db, *args, cwd=db.parent, env={"WORKQ_ACTOR": "cli-test"})
    if check:
        assert done.returncode == 0, done.stderr
    return done


@contextmanager
def board_server(db: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """A ``workq board`` process; yields its base URL once it answers."""
    port = free_port()
    log_path = db.with_name(f"board-{port}.log")
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                *("-m", "workq.cli.main", "--db", str(db), "board", "--port", str(port), *args),
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=db.parent,
            env={**os.environ, **(env or {})},
        )
        try:
            deadline = time.monotonic() + START_TIMEOUT
            while True:
                assert process.poll() is None, log_path.read_text()
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                    break
                except OSError:
                    assert time.monotonic() < deadline, "the board did not start"
                    time.sleep(0.05)
            yield f"http://127.0.0.1:{port}"
        finally:
            process.terminate()
            process.wait(timeout=START_TIMEOUT)
    text = log_path.read_text()
    assert "Traceback" not in text, text


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "board.db"


@pytest.fixture
def q(db: Path) -> Iterator[Queue]:
    """The board's database, for setting a scene quickly (the CLI is the same services)."""
    queue = open_queue(Settings(db_path=db), migrate=True)
    yield queue
    queue.db.dispose()


@pytest.fixture
def client() -> Iterator[httpx2.Client]:
    with httpx2.Client(timeout=30.0) as c:
        yield c
