"""A raw JSON-RPC client of the 2026-07-28 protocol, for tests that must see the wire: over
a ``workq serve`` subprocess's stdio (``Stdio``) or over Streamable HTTP (``Http``). Every
request carries its own envelope in ``_meta`` (protocol version, client info, per-request
capabilities); ``tasks=True`` declares the Tasks extension."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx2

VERSION = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
SRC = str(Path(__file__).resolve().parents[2] / "src")
TIMEOUT = 30.0


def envelope(*, tasks: bool) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientInfo": {"name": "raw-modern", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": (
            {"extensions": {TASKS: {}}} if tasks else {}
        ),
    }


def message(request_id: int, method: str, params: dict[str, Any], *, tasks: bool) -> dict[str, Any]:
    meta = {**envelope(tasks=tasks), **params.get("_meta", {})}
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {**params, "_meta": meta},
    }


class Client:
    """What both transports offer: ``request`` (the whole answer: ``result`` or ``error``)
    and the calls tests make."""

    tasks = True
    _ids = itertools.count(1)

    def request(
        self, method: str, params: dict[str, Any], *, tasks: bool | None = None
    ) -> dict[str, Any]:
        raise NotImplementedError

    def call(
        self, name: str, arguments: dict[str, Any], *, tasks: bool | None = None
    ) -> dict[str, Any]:
        """``tools/call``: its result (a CallToolResult or a CreateTaskResult)."""
        answer = self.request("tools/call", {"name": name, "arguments": arguments}, tasks=tasks)
        assert "result" in answer, answer
        result: dict[str, Any] = answer["result"]
        return result

    def task(self, method: str, task_id: str, *, tasks: bool | None = None) -> dict[str, Any]:
        """``tasks/get`` / ``tasks/update`` / ``tasks/cancel`` of ``task_id``: the answer."""
        return self.request(method, {"taskId": task_id}, tasks=tasks)


class Stdio(Client):
    """A ``workq serve`` subprocess (this tree's code) on the database ``where`` names
    (``--db PATH`` or ``--database-url URL``), spoken to line by line; its stderr goes to
    ``log``."""

    def __init__(
        self, where: list[str], log: Path, *args: str, env: dict[str, str] | None = None
    ) -> None:
        environment = {**os.environ, "PYTHONPATH": SRC, **(env or {})}
        self.log = log.open("a")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "workq.cli.main", *where, "serve", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            cwd=log.parent,
            env=environment,
            text=True,
        )
        self._answers: dict[Any, queue.Queue[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self.notifications: queue.Queue[dict[str, Any]] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _box(self, request_id: Any) -> queue.Queue[dict[str, Any]]:
        with self._lock:
            return self._answers.setdefault(request_id, queue.Queue())

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            found = json.loads(line)
            if "id" in found and ("result" in found or "error" in found):
                self._box(found["id"]).put(found)
            else:
                self.notifications.put(found)

    def send(
        self, request_id: int, method: str, params: dict[str, Any], *, tasks: bool | None = None
    ) -> None:
        assert self.process.stdin is not None
        declared = self.tasks if tasks is None else tasks
        self.process.stdin.write(
            json.dumps(message(request_id, method, params, tasks=declared)) + "\n"
        )
        self.process.stdin.flush()

    def answer(self, request_id: int, timeout: float = TIMEOUT) -> dict[str, Any]:
        return self._box(request_id).get(timeout=timeout)

    def request(
        self, method: str, params: dict[str, Any], *, tasks: bool | None = None
    ) -> dict[str, Any]:
        request_id = next(self._ids)
        self.send(request_id, method, params, tasks=tasks)
        return self.answer(request_id)

    def kill(self) -> None:
        """kill -9."""
        self.process.kill()
        self.close()

    def close(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        if not self.process.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self.process.stdin.close()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        self._reader.join(timeout=10)
        self.process.stdout.close()
        self.log.close()

    def __enter__(self) -> Stdio:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Http(Client):
    """A client of a ``workq serve --http`` at ``url``; ``session``: an ``Mcp-Session-Id``
    header to send (an HTTP session: a caller of its own)."""

    def __init__(self, url: str, *, session: str | None = None) -> None:
        self.url = url
        self.session = session
        self.http = httpx2.Client(timeout=TIMEOUT)

    def request(
        self, method: str, params: dict[str, Any], *, tasks: bool | None = None
    ) -> dict[str, Any]:
        declared = self.tasks if tasks is None else tasks
        body = message(next(self._ids), method, params, tasks=declared)
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": VERSION,
            "mcp-method": method,
        }
        if method.startswith("tasks/"):
            headers["mcp-name"] = params["taskId"]
        elif method == "tools/call":
            headers["mcp-name"] = params["name"]
        if self.session:
            headers["mcp-session-id"] = self.session
        answer = self.http.post(self.url, json=body, headers=headers)
        found: dict[str, Any] = answer.json()
        return found

    def close(self) -> None:
        self.http.close()
