"""Hostile protocol input: malformed JSON-RPC, huge messages, wrong types, unknown methods
and messages out of order, on stdio (raw pipes, not the SDK's client) and on Streamable
HTTP (raw requests and raw sockets). The server answers with an error or drops the
message, stays up, and keeps serving: the same connection, and the other clients."""

from __future__ import annotations

import fcntl
import json
import socket
import sys
import termios
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client

from tests.torture.conftest import env_int, record
from tests.torture.servers import PROTOCOL, RawServer, http, stdio, text_of
from workq.db import sqlite

HUGE_MB = env_int("WORKQ_TORTURE_HUGE_MB", 16)
TRIED: Counter[str] = Counter()


def rpc(ident: Any, method: Any, params: Any = None, **extra: Any) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": method, **extra}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode() + b"\n"


def call(ident: Any, tool: Any, arguments: Any) -> bytes:
    return rpc(ident, "tools/call", {"name": tool, "arguments": arguments})


def nested(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


# Lines no well-behaved client sends. Each is followed by a ping that must be answered.
STDIO_CASES: dict[str, bytes] = {
    "not json": b"not json at all\n",
    "truncated json": b'{"jsonrpc": "2.0", "id": 1, "method": "pi\n',
    "empty line": b"\n",
    "blank line": b"   \t \n",
    "json null": b"null\n",
    "json number": b"42\n",
    "json string": b'"tools/list"\n',
    "empty object": b"{}\n",
    "empty batch": b"[]\n",
    "batch of requests": b"[" + rpc(1, "ping").strip() + b"," + rpc(2, "ping").strip() + b"]\n",
    "wrong jsonrpc version": b'{"jsonrpc": "1.0", "id": 3, "method": "ping"}\n',
    "no jsonrpc member": b'{"id": 4, "method": "ping"}\n',
    "object id": rpc({"nested": 1}, "ping"),
    "float id": rpc(1.5, "ping"),
    "huge id": rpc(2**80, "ping"),
    "null id": rpc(None, "ping"),
    "method is a number": rpc(5, 123),
    "unknown method": rpc(6, "no/such/method"),
    "a 1 MB method name": rpc(7, "m" * 1_000_000),
    "params is a string": rpc(8, "tools/call", "oops"),
    "tool name is a number": call(9, 5, {}),
    "arguments is a list": call(10, "issue_create", [1, 2]),
    "arguments is null": call(11, "issue_create", None),
    "operator injection": call(12, "issue_create", {"title": {"$gt": ""}}),
    "tool name as a path": call(13, "../../etc/passwd", {}),
    "unknown tool": call(14, "drop_database", {}),
    "file resource": rpc(15, "resources/read", {"uri": "file:///etc/passwd"}),
    "resource path escape": rpc(16, "resources/read", {"uri": "workq://issues/../../../etc"}),
    "unknown prompt": rpc(17, "prompts/get", {"name": "nope"}),
    "response to nothing": b'{"jsonrpc": "2.0", "id": 999, "result": {}}\n',
    "error response to nothing": b'{"jsonrpc":"2.0","id":998,"error":{"code":1,"message":"x"}}\n',
    "cancel of nothing": b'{"jsonrpc": "2.0", "method": "notifications/cancelled", '
    b'"params": {"requestId": 12345}}\n',
    "unknown notification": b'{"jsonrpc": "2.0", "method": "notifications/whatever"}\n',
    "initialized again": b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n',
    "initialize again, odd version": rpc(
        18,
        "initialize",
        {
            "protocolVersion": "1999-01-01",
            "capabilities": {},
            "clientInfo": {"name": "x", "version": "0"},
        },
    ),
    "deep array": b"[" * 100_000 + b"\n",
    "deep arguments": b'{"jsonrpc":"2.0","id":19,"method":"tools/call","params":'
    b'{"name":"issue_create","arguments":{"title":"deep","description":' + nested(5_000) + b"}}}\n",
    "invalid utf-8": b'{"jsonrpc": "2.0", "id": 20, "method": "ping", "x": "\xff\xfe\xc0"}\n',
    "nul byte": b'{"jsonrpc": "2.0", "id": 21, "method": "ping"}\x00\n',
    "crlf": b'{"jsonrpc": "2.0", "id": 22, "method": "ping"}\r\n',
    "two messages on one line": rpc(23, "ping").strip() + rpc(24, "ping"),
    "lone surrogate escape": call(25, "issue_create", {"title": "x"}).replace(b'"x"', b'"\\ud800"'),
    f"{HUGE_MB} MB line of garbage": b"x" * (HUGE_MB << 20) + b"\n",
    f"{HUGE_MB} MB title": call(26, "issue_create", {"title": "t" * (HUGE_MB << 20)}),
    f"{HUGE_MB} MB description": call(
        27, "issue_create", {"title": "big", "description": "d" * (HUGE_MB << 20)}
    ),
}


def issue_count(db: Path) -> int:
    with closing(sqlite.connect(db)) as conn:
        return int(conn.execute("SELECT count(*) FROM issues").fetchone()[0])


def refused_or_dropped(replies: list[Any]) -> None:
    """No hostile tool call succeeded. (A protocol request that is odd but valid, such as a
    second initialize, may get its normal answer: the server then names its own version.)"""
    for reply in replies:
        if not isinstance(reply, dict) or "method" in reply:
            continue  # a notification (a log line) from the server
        result = reply.get("result")
        if isinstance(result, dict) and "content" in result:
            assert result.get("isError"), f"a hostile tool call succeeded: {reply}"


@pytest.mark.slow
@pytest.mark.anyio
async def test_hostile_lines_on_stdio_are_refused_or_dropped_and_serving_goes_on(
    tmp_path: Path,
) -> None:
    db = tmp_path / "queue.db"
    hostile = RawServer(db)
    neighbour_calls = 0
    try:
        hostile.initialize()
        hostile.call("issue_create", title="before")  # the database exists from here on

        async def neighbour(up: anyio.Event, done: anyio.Event) -> None:
            """Another client of the same database, busy while the first is abused."""
            nonlocal neighbour_calls
            async with stdio(db) as client:
                while not done.is_set():
                    result = await client.call_tool("issue_ready", {})
                    assert not result.is_error, text_of(result)
                    neighbour_calls += 1
                    up.set()
                    await anyio.sleep(0.02)

        up, done = anyio.Event(), anyio.Event()
        with anyio.fail_after(600):
            async with anyio.create_task_group() as group:
                group.start_soon(neighbour, up, done)
                await up.wait()
                for name, line in STDIO_CASES.items():
                    await anyio.to_thread.run_sync(_one_line, hostile, name, line)
                    TRIED[f"stdio: {name}"] += 1
                done.set()
        reply = hostile.call("issue_create", title="after")
        assert reply["result"]["structuredContent"]["number"] == 2
        assert issue_count(db) == 2  # no hostile line created anything
    finally:
        code = hostile.close()
    assert code == 0, "the server did not leave cleanly when its client closed stdin"
    assert neighbour_calls > 1


def _one_line(server: RawServer, name: str, line: bytes) -> None:
    server.send(line)
    ping = server.request("ping")
    reply, before = server.until(ping, timeout=120)
    assert reply.get("result") == {}, (name, reply)
    assert server.process.poll() is None, f"the server died on: {name}"
    refused_or_dropped(before)


def _read_by_the_server(server: RawServer, timeout: float = 60) -> None:
    """Until the server has read everything written to its stdin (the pipe is empty)."""
    assert server.process.stdin is not None
    pipe = server.process.stdin.fileno()
    deadline = time.monotonic() + timeout
    while True:
        unread = bytearray(4)
        fcntl.ioctl(pipe, termios.FIONREAD, unread)  # bytes in the pipe, either end (Linux)
        if int.from_bytes(unread, sys.byteorder) == 0:
            return
        assert server.process.poll() is None, "the server died"
        assert time.monotonic() < deadline, "the server does not read its stdin"
        time.sleep(0.005)


@pytest.mark.anyio
async def test_out_of_order_on_a_fresh_stdio_server(tmp_path: Path) -> None:
    """Calls before initialize, a request split across writes, an id reused while the first
    is in flight: answered, and the session works normally after."""
    server = RawServer(tmp_path / "queue.db")
    try:
        early = server.request("tools/call", {"name": "issue_create", "arguments": {"title": "e"}})
        reply, _ = server.until(early)
        TRIED["stdio: call before initialize"] += 1
        assert "error" in reply or reply["result"].get("isError") is not True, reply
        server.initialize()
        half = rpc(50, "ping")
        server.send(half[:10])
        _read_by_the_server(server)  # the first part read alone, before the rest is written
        server.send(half[10:])
        assert server.until(50)[0]["result"] == {}
        TRIED["stdio: request split across writes"] += 1
        twice = call(60, "issue_list", {})
        server.send(twice + twice)
        first, _ = server.until(60)
        assert "result" in first or "error" in first
        TRIED["stdio: one id used twice at once"] += 1
        ok = server.call("issue_create", title="normal")
        assert not ok["result"].get("isError"), ok
    finally:
        assert server.close() == 0


# -- HTTP ------------------------------------------------------------------------------

JSON_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": PROTOCOL,
        "capabilities": {},
        "clientInfo": {"name": "torture", "version": "0"},
    },
}


def http_cases(url: str) -> dict[str, dict[str, Any]]:
    """Requests no well-behaved client sends: method, headers, body."""
    ping = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"})
    return {
        "invalid json": {"content": b"{not json"},
        "empty body": {"content": b""},
        "json array": {"content": b"[1, 2, 3]"},
        "json null": {"content": b"null"},
        "non-utf-8 body": {"content": b'{"jsonrpc": "2.0", "x": "\xff\xfe"}'},
        "no accept header": {"content": json.dumps(INITIALIZE), "headers": {"Accept": ""}},
        "text/plain": {
            "content": json.dumps(INITIALIZE),
            "headers": {"Content-Type": "text/plain"},
        },
        "unknown session": {
            "content": ping,
            "headers": {"mcp-session-id": "not-a-session"},
        },
        "session id of 64 KB": {
            "content": ping,
            "headers": {"mcp-session-id": "s" * 65_536},
        },
        "get without a session": {"method": "GET"},
        "delete an unknown session": {
            "method": "DELETE",
            "headers": {"mcp-session-id": "0123456789abcdef"},
        },
        "put": {"method": "PUT", "content": b"x"},
        "path escape": {"url": url.replace("/mcp", "/mcp/../../etc/passwd"), "method": "GET"},
        "another path": {"url": url.replace("/mcp", "/admin"), "content": ping},
        "foreign host (dns rebinding)": {
            "content": json.dumps(INITIALIZE),
            "headers": {"Host": "evil.example.com"},
        },
        "foreign origin": {
            "content": json.dumps(INITIALIZE),
            "headers": {"Origin": "http://evil.example.com"},
        },
        f"{HUGE_MB} MB body": {"content": b"x" * (HUGE_MB << 20)},
        "5 MB json": {
            "content": json.dumps({**INITIALIZE, "padding": "p" * (5 << 20)}).encode(),
        },
        "1000 headers": {
            "content": ping,
            "headers": {f"x-junk-{i}": "j" * 50 for i in range(1000)},
        },
    }


RAW_SOCKET_CASES: dict[str, bytes] = {
    "garbage request line": b"GARBAGE\r\n\r\n",
    "binary junk": bytes(range(256)) * 4,
    "http/0.9": b"GET /mcp\r\n\r\n",
    "content-length lies (100 MB, 10 bytes sent)": b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    b"Content-Type: application/json\r\nContent-Length: 100000000\r\n\r\n0123456789",
    "negative content-length": b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    b"Content-Length: -5\r\n\r\n",
    "chunked lies": b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n"
    b"\r\nzzzz\r\n",
    "header without a colon": b"POST /mcp HTTP/1.1\r\nHost 127.0.0.1\r\n\r\n",
}


def _session(web: httpx2.Client, url: str) -> str:
    answer = web.post(url, content=json.dumps(INITIALIZE), headers=JSON_HEADERS)
    assert answer.status_code == 200, answer.text
    session = answer.headers["mcp-session-id"]
    initialized = b'{"jsonrpc": "2.0", "method": "notifications/initialized"}'
    assert _in_session(web, url, session, initialized)[0] == 202
    return session


def _in_session(web: httpx2.Client, url: str, session: str, body: bytes) -> tuple[int, list[Any]]:
    """POST a body in a session: the status, and the JSON-RPC messages that came back."""
    answer = web.post(
        url,
        content=body,
        headers={**JSON_HEADERS, "mcp-session-id": session, "mcp-protocol-version": PROTOCOL},
    )
    if answer.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in answer.text.splitlines() if line.startswith("data:")]
        return answer.status_code, [json.loads(d) for d in data if d]
    if answer.headers.get("content-type", "").startswith("application/json") and answer.content:
        return answer.status_code, [answer.json()]
    return answer.status_code, []


def _raw(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except (TimeoutError, ConnectionResetError):
            pass
        return b"".join(chunks)


@contextmanager
def slowloris(port: int, count: int) -> Iterator[list[socket.socket]]:
    """``count`` connections that send half a request and then nothing."""
    socks = []
    try:
        for _ in range(count):
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le")
            socks.append(sock)
        yield socks
    finally:
        for sock in socks:
            sock.close()


@pytest.mark.slow
@pytest.mark.anyio
async def test_hostile_http_requests_get_4xx_and_serving_goes_on(tmp_path: Path) -> None:
    db = tmp_path / "queue.db"
    statuses: dict[str, int | str] = {}
    with http(db) as (url, server):
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        good_calls = 0
        up, done = threading.Event(), threading.Event()

        async def good_client() -> None:
            nonlocal good_calls
            async with Client(url, read_timeout_seconds=60) as client:
                await client.call_tool("issue_create", {"title": "from the good client"})
                while not done.is_set():
                    with anyio.fail_after(60):
                        result = await client.call_tool("issue_ready", {})
                    assert not result.is_error, text_of(result)
                    good_calls += 1
                    up.set()
                    await anyio.sleep(0.02)

        def abuse() -> None:
            try:
                assert up.wait(120), "the good client never got going"
                with (
                    slowloris(port, 200),
                    httpx2.Client(timeout=60) as web,
                ):
                    for name, case in http_cases(url).items():
                        answer = web.request(
                            case.get("method", "POST"),
                            case.get("url", url),
                            content=case.get("content"),
                            headers={**JSON_HEADERS, **case.get("headers", {})},
                        )
                        statuses[name] = answer.status_code
                        TRIED[f"http: {name}"] += 1
                        assert server.poll() is None, f"the server died on: {name}"
                    session = _session(web, url)
                    for name, line in STDIO_CASES.items():
                        status, replies = _in_session(web, url, session, line)
                        statuses[f"in a session: {name}"] = status
                        TRIED[f"http: in a session: {name}"] += 1
                        if status < 300:
                            refused_or_dropped(replies)
                        assert server.poll() is None, f"the server died on: {name}"
                    status, replies = _in_session(web, url, session, rpc(77, "ping"))
                    assert status == 200 and replies[-1]["result"] == {}, replies
                    for name, data in RAW_SOCKET_CASES.items():
                        reply = _raw(port, data)
                        statuses[name] = reply.split(b"\r\n", 1)[0].decode("latin-1") or "closed"
                        TRIED[f"http: {name}"] += 1
                        assert server.poll() is None, f"the server died on: {name}"
            finally:
                done.set()

        with anyio.fail_after(600):
            async with anyio.create_task_group() as group:
                group.start_soon(good_client)
                await anyio.to_thread.run_sync(abuse)
        assert good_calls > 1
        async with Client(url, read_timeout_seconds=60) as late:  # a new session still works
            assert not (await late.call_tool("issue_ready", {})).is_error
    for name, status in statuses.items():
        if name.startswith("in a session"):  # an answer (2xx with an error) or a refusal
            assert isinstance(status, int) and status < 500, f"{name}: HTTP {status}"
        elif isinstance(status, int):
            assert 400 <= status < 500, f"{name}: HTTP {status}"
        else:
            assert " 5" not in status, f"{name}: {status}"
    assert statuses[f"{HUGE_MB} MB body"] == 413 and statuses["5 MB json"] == 413
    assert issue_count(db) == 1
    answers = Counter(
        str(s).split(" ")[1] if isinstance(s, str) else str(s) for s in statuses.values()
    )
    record(
        "protocol-http",
        [f"HTTP answers to {len(statuses)} hostile requests: {dict(sorted(answers.items()))}"],
        {"statuses": statuses},
    )


@pytest.fixture(scope="module", autouse=True)
def _figures() -> Iterator[None]:
    yield
    total = sum(TRIED.values())
    stdio_n = sum(n for k, n in TRIED.items() if k.startswith("stdio"))
    record(
        "protocol",
        [f"hostile protocol inputs tried: {total} (stdio {stdio_n}, http {total - stdio_n})"],
        {"inputs_tried": total, "stdio": stdio_n, "http": total - stdio_n},
    )
