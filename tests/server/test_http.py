"""Streamable HTTP: works on loopback, refuses a non-loopback bind without a token, and
answers 401 to a request without the right token."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.server.conftest import CALL_TIMEOUT, call_error, call_ok, serve_argv, text

START_TIMEOUT = 30.0
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}
HEADERS = {"Accept": "application/json, text/event-stream"}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def http_server(db: Path, *args: str, address: str = "127.0.0.1") -> Iterator[str]:
    """A ``workq serve --http`` process; yields its URL (on ``address``) once it accepts."""
    with http_process(db, *args, address=address) as (url, _):
        yield url


@contextmanager
def http_process(
    db: Path, *args: str, address: str = "127.0.0.1"
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``http_server``, yielding the process too."""
    port = free_port()
    log = db.with_suffix(".http.log").open("w")
    process = subprocess.Popen(
        [sys.executable, *serve_argv("--http", "--port", str(port), *args, db=db)],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=db.parent,
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            assert process.poll() is None, db.with_suffix(".http.log").read_text()
            try:
                socket.create_connection((address, port), timeout=0.5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the HTTP server did not start"
                time.sleep(0.05)
        yield f"http://{address}:{port}/mcp", process
    finally:
        process.terminate()
        process.wait(timeout=START_TIMEOUT)
        log.close()


@pytest.mark.anyio
async def test_the_claim_loop_over_http_on_loopback(db: Path) -> None:
    with http_server(db) as url, anyio.fail_after(60):
        async with Client(url, read_timeout_seconds=CALL_TIMEOUT) as client:
            await call_ok(client, "issue_create", title="over http")
            claimed = await call_ok(client, "issue_claim_next", run_id="remote-1")
            assert text(claimed).startswith("Claimed issue #1: over http")
            refused = await call_error(client, "issue_complete", number=1, run_id="remote-2")
            assert "NOT_HOLDER" in text(refused)
            beat = await call_ok(client, "issue_heartbeat", number=1, run_id="remote-1")
            assert beat.structured_content is not None and beat.structured_content["renewed"] == 1
            done = await call_ok(client, "issue_complete", number=1, run_id="remote-1")
            assert text(done) == "Completed issue #1"


@pytest.mark.anyio
async def test_a_token_is_required_when_given(db: Path) -> None:
    with http_server(db, "--token", "s3cret") as url:
        for headers in (
            {},
            {"Authorization": "Bearer wrong"},
            {"Authorization": "s3cret"},
            {"Authorization": "Basic s3cret"},
            {"Authorization": "Bearer s3cret extra"},
        ):
            answer = httpx2.post(url, json=INITIALIZE, headers=HEADERS | headers, timeout=10)
            # 403 and no challenge: MCP clients take any 401 for the start of OAuth.
            assert answer.status_code == 403, headers
            assert "www-authenticate" not in answer.headers
            assert "Authorization: Bearer <token>" in answer.json()["hint"]
        for scheme in ("Bearer", "bearer", "BEARER"):
            authorized = {"Authorization": f"{scheme} s3cret"}
            answer = httpx2.post(url, json=INITIALIZE, headers=HEADERS | authorized, timeout=10)
            assert answer.status_code == 200, scheme
        authorized = {"Authorization": "bearer s3cret"}
        with anyio.fail_after(60):
            async with (
                httpx2.AsyncClient(headers=authorized, timeout=CALL_TIMEOUT) as http,
                Client(streamable_http_client(url, http_client=http)) as client,
            ):
                created = await call_ok(client, "issue_create", title="with a token")
                assert text(created).startswith("Created issue #1")


@pytest.mark.parametrize(
    ("bound", "address"), [("127.0.0.2", "127.0.0.2"), ("LOCALHOST", "127.0.0.1")]
)
def test_without_a_token_only_the_bound_names_reach_the_queue(
    db: Path, bound: str, address: str
) -> None:
    """DNS rebinding: a page of evil.example, its name rebound to the loopback address,
    sends Host: evil.example (and its Origin). Every loopback bind refuses it."""
    with http_server(db, "--host", bound, address=address) as url:
        good = httpx2.post(url, json=INITIALIZE, headers=HEADERS, timeout=10)
        assert good.status_code == 200
        session = {"mcp-session-id": good.headers["mcp-session-id"]}
        create = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "issue_create", "arguments": {"title": "planted"}},
        }
        port = url.split(":")[2].split("/")[0]
        for bad, status in (
            ({"Host": "evil.example"}, 421),
            ({"Host": f"evil.example:{port}"}, 421),
            ({"Origin": "http://evil.example"}, 403),
            ({"Origin": f"http://evil.example:{port}"}, 403),
            ({"Origin": "null"}, 403),
        ):
            refused = httpx2.post(url, json=create, headers=HEADERS | session | bad, timeout=10)
            assert refused.status_code == status, bad
        listed = subprocess.run(
            [sys.executable, "-m", "workq.cli.main", "--db", str(db), "list", "--json"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        assert '"planted"' not in listed.stdout  # nothing reached the queue
        own = {"Origin": f"http://{address}:{port}"}
        made = httpx2.post(url, json=create, headers=HEADERS | session | own, timeout=10)
        assert made.status_code == 200 and "Created issue #1" in made.text


def test_a_non_loopback_bind_without_a_token_refuses_to_start(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    done = subprocess.run(
        [
            sys.executable,
            *serve_argv("--http", "--host", "0.0.0.0", "--port", str(free_port()), db=db),
        ],
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT,
        stdin=subprocess.DEVNULL,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 1
    assert "refusing to serve on 0.0.0.0 without a bearer token" in done.stderr
    assert done.stdout == ""
    assert not db.exists()


@pytest.mark.anyio
async def test_each_http_session_acts_as_a_run_id_of_its_own(db: Path) -> None:
    """Two sessions of one HTTP server that name no run id: each is told its own run id at
    initialize and holds what it claims; the other cannot complete or release it."""
    with http_server(db) as url, anyio.fail_after(60):
        async with (
            Client(url, mode="legacy", read_timeout_seconds=CALL_TIMEOUT) as a,
            Client(url, mode="legacy", read_timeout_seconds=CALL_TIMEOUT) as b,
        ):
            mine = [_told_run_id(c.instructions) for c in (a, b)]
            assert mine[0] != mine[1]
            await call_ok(a, "issue_create", title="a's")
            claimed = await call_ok(a, "issue_claim", number=1)
            assert claimed.structured_content is not None
            assert claimed.structured_content["claimed_by"] == mine[0]
            for tool in ("issue_complete", "issue_release"):
                refused = await call_error(b, tool, number=1)
                assert "NOT_HOLDER" in text(refused) and mine[0] in text(refused)
            assert text(await call_ok(a, "issue_complete", number=1)) == "Completed issue #1"


def _told_run_id(instructions: str | None) -> str:
    assert instructions is not None
    told = re.search(r"This session acts as run id (run-[0-9a-f]+):", instructions)
    assert told is not None, instructions
    return told.group(1)


@pytest.mark.parametrize("command", [["serve", "--http"], ["board"]])
def test_a_port_in_use_is_one_error_line_and_nothing_claims_to_serve(
    tmp_path: Path, command: list[str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "workq.cli.main", "--db", str(tmp_path / "q.db"), *command,
             "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [
        f"error: INVALID_INPUT: port {port} on 127.0.0.1 is in use; stop what listens "
        "there, or choose another port with --port"
    ]
    assert done.stdout == ""


def test_the_token_may_come_from_a_file_and_is_never_printed(db: Path) -> None:
    secret = db.parent / "token"
    secret.write_text("s3cret-from-file\nignored\n")
    with http_server(db, "--token-file", str(secret)) as url:
        assert httpx2.post(url, json=INITIALIZE, headers=HEADERS, timeout=10).status_code == 403
        authorized = HEADERS | {"Authorization": "Bearer s3cret-from-file"}
        assert httpx2.post(url, json=INITIALIZE, headers=authorized, timeout=10).status_code == 200
    for args, says in (
        (["--token", "two words"], "--token=(hidden) is not valid"),
        (["--token", "line\nbreak"], "--token=(hidden) is not valid"),
        (["--token-file", str(db.parent / "nope")], "--token-file: cannot read"),
    ):
        done = subprocess.run(
            [sys.executable, *serve_argv("--http", *args, db=db)],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 1 and says in done.stderr, done.stderr
        assert "words" not in done.stderr and "break" not in done.stderr


def test_a_hand_typed_initialize_is_completed_over_http_as_on_stdio(db: Path) -> None:
    bare = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    with http_server(db) as url:
        answer = httpx2.post(url, json=bare, headers=HEADERS, timeout=10)
        assert answer.status_code == 200, answer.text
        assert '"protocolVersion":"2024-11-05"' in answer.text.replace(" ", "")
        session = {"mcp-session-id": answer.headers["mcp-session-id"]}
        listed = httpx2.post(
            url,
            json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            headers=HEADERS | session | {"mcp-protocol-version": "2024-11-05"},
            timeout=10,
        )
        assert listed.status_code == 200 and "issue_create" in listed.text


def _post(url: str, message: dict[str, object], headers: dict[str, str]) -> httpx2.Response:
    return httpx2.post(url, json=message, headers=HEADERS | headers, timeout=30)


def test_each_call_is_answered_as_one_json_body_not_an_event_stream(db: Path) -> None:
    """A request's answer is its JSON body (the SDK's JSON-response mode): no SSE stream per
    request, which cost the server about as much CPU as the call itself. A call that waits
    for work is answered the same way once it is woken."""
    with http_server(db) as url:
        opened = _post(url, INITIALIZE, {})
        assert opened.headers["content-type"].startswith("application/json"), opened.text
        session = {
            "mcp-session-id": opened.headers["mcp-session-id"],
            "mcp-protocol-version": "2025-06-18",
        }
        _post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)

        def call(request_id: int, name: str, **arguments: object) -> httpx2.Response:
            params = {"name": name, "arguments": arguments}
            message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
            return _post(url, message, session)

        created = call(2, "issue_create", title="answered as JSON")
        assert created.headers["content-type"].startswith("application/json")
        assert created.json()["result"]["structuredContent"]["number"] == 1

        call(3, "issue_claim_next")  # takes #1: the next call must wait
        with ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(call, 4, "issue_claim_next", wait_seconds=20)
            time.sleep(1.0)
            assert not waiting.done()
            call(5, "issue_create", title="wakes the waiter")
            answer = waiting.result(timeout=30)
        assert answer.headers["content-type"].startswith("application/json")
        assert answer.json()["result"]["structuredContent"]["number"] == 2
