"""Real ``workq serve`` processes for the torture tests: over stdio with the SDK's client,
over stdio with raw pipes (for bytes no client would send), and over Streamable HTTP."""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult

CALL_TIMEOUT = 60.0
START_TIMEOUT = 30.0
PROTOCOL = "2025-06-18"


def command(db: Path, *args: str, url: str | None = None) -> list[str]:
    """``workq serve``, through the CLI's entry point, on the SQLite file ``db`` (or on the
    database at ``url``)."""
    where = ["--database-url", url] if url else ["--db", str(db)]
    return [sys.executable, "-m", "workq.cli.main", *where, "serve", *args]


# The toolsets holding every tool these tests call (fewer than ``all``: each server
# starts ~0.5 s sooner).
TOOLSETS = "core,deps,notes,insight"


def environment(**extra: str) -> dict[str, str]:
    return {**os.environ, "WORKQ_TOOLSETS": TOOLSETS, **extra}


@asynccontextmanager
async def stdio(db: Path, *args: str, log: Path | None = None, **env: str) -> AsyncIterator[Client]:
    """The SDK's client of a ``workq serve`` process, run in the database's folder; its
    stderr goes to ``log`` (default: beside the database)."""
    cmd = command(db, *args)
    params = StdioServerParameters(
        command=cmd[0], args=cmd[1:], env=environment(**env), cwd=db.parent
    )
    with (log or db.with_suffix(".server.log")).open("a") as errlog:
        transport = stdio_client(params, errlog=errlog)
        async with Client(transport, read_timeout_seconds=CALL_TIMEOUT) as client:
            yield client


def text_of(result: CallToolResult) -> str:
    return result.content[0].text if result.content and result.content[0].type == "text" else ""


def code_of(result: CallToolResult) -> str | None:
    """The stable code of an error result (None for a success)."""
    if not result.is_error:
        return None
    error: dict[str, Any] = (result.meta or {}).get("workq/error", {})
    return str(error.get("code"))


class RawServer:
    """``workq serve`` on plain pipes: write any bytes, read whatever lines come back. Its
    log and working folder are beside ``db`` (the database too, unless ``url`` names one)."""

    def __init__(self, db: Path, *args: str, url: str | None = None, **env: str) -> None:
        self.log = db.with_suffix(".raw.log").open("ab")
        self.process = subprocess.Popen(
            command(db, *args, url=url),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            cwd=db.parent,
            env=environment(**env),
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.next_id = 1000

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def send(self, data: bytes | dict[str, Any]) -> None:
        raw = data if isinstance(data, bytes) else json.dumps(data).encode() + b"\n"
        assert self.process.stdin is not None
        self.process.stdin.write(raw)
        self.process.stdin.flush()

    def request(self, method: str, params: dict[str, Any] | None = None) -> int:
        self.next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self.next_id

    def until(self, wanted: int, timeout: float = CALL_TIMEOUT) -> tuple[dict[str, Any], list[Any]]:
        """Read until the reply to request ``wanted``; also returns what came before it."""
        deadline = time.monotonic() + timeout
        before: list[Any] = []
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no reply to request {wanted}; before it: {before}")
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            message = json.loads(line)
            if isinstance(message, dict) and message.get("id") == wanted:
                return message, before
            before.append(message)

    def initialize(self) -> None:
        ident = self.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "torture", "version": "0"},
            },
        )
        reply, _ = self.until(ident)
        assert "result" in reply, reply
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        reply, _ = self.until(self.request("tools/call", {"name": tool, "arguments": arguments}))
        return reply

    def close(self) -> int:
        """Close stdin (the way a client leaves) and wait for a clean exit."""
        assert self.process.stdin is not None
        with suppress(BrokenPipeError):
            self.process.stdin.close()
        try:
            return self.process.wait(timeout=START_TIMEOUT)
        finally:
            self._release()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=START_TIMEOUT)
        self._release()

    def _release(self) -> None:
        self.reader.join(timeout=START_TIMEOUT)
        assert self.process.stdin is not None and self.process.stdout is not None
        with suppress(BrokenPipeError):
            self.process.stdin.close()
        self.process.stdout.close()
        self.log.close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def http(db: Path, *args: str, **env: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``workq serve --http`` on a free loopback port; yields its URL and process."""
    port = free_port()
    with db.with_suffix(".http.log").open("ab") as log:
        process = subprocess.Popen(
            command(db, "--http", "--port", str(port), *args),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=db.parent,
            env=environment(**env),
        )
        try:
            deadline = time.monotonic() + START_TIMEOUT
            while True:
                assert process.poll() is None, db.with_suffix(".http.log").read_text()
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                    break
                except OSError:
                    assert time.monotonic() < deadline, "the HTTP server did not start"
                    time.sleep(0.05)
            yield f"http://127.0.0.1:{port}/mcp", process
        finally:
            process.terminate()
            process.wait(timeout=START_TIMEOUT)
