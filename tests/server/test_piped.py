"""``workq serve`` driven by hand: JSON-RPC lines piped in, as seed 002's README tells people
to test it, and as shell scripts and ``printf | workq serve`` do. No SDK client."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import CALL_TIMEOUT, serve_argv
from workq.config import Settings
from workq.server.registry import Catalog, Registry
from workq.server.state import ServerState
from workq.server.toolsets import GROUPS, register

FRESH_SERVERS = 3


def request(number: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": number, "method": method}
    if params is not None:
        message["params"] = params
    return message


def call(message_id: int, tool: str, /, **arguments: Any) -> dict[str, Any]:
    return request(message_id, "tools/call", {"name": tool, "arguments": arguments})


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
INITIALIZE = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "by-hand", "version": "0"},
}


def pipe(
    db: Path, *messages: dict[str, Any], args: tuple[str, ...] = ()
) -> tuple[dict[Any, dict[str, Any]], subprocess.CompletedProcess[str]]:
    """Write every message at once, close stdin, and read the answers by id."""
    done = subprocess.run(
        [sys.executable, *serve_argv(*args, db=db)],
        input="".join(json.dumps(m) + "\n" for m in messages),
        capture_output=True,
        text=True,
        timeout=CALL_TIMEOUT * 2,
        cwd=db.parent,
    )
    answers = {}
    for line in done.stdout.splitlines():
        answer = json.loads(line)
        answers[answer["id"]] = answer
    return answers, done


def converse(db: Path, *messages: dict[str, Any]) -> dict[Any, dict[str, Any]]:
    """Write every message at once, keep stdin open until every request is answered."""
    expected = {m["id"] for m in messages if "id" in m}
    with subprocess.Popen(
        [sys.executable, *serve_argv(db=db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=db.parent,
    ) as process:
        watchdog = threading.Timer(CALL_TIMEOUT * 2, process.kill)
        watchdog.start()
        try:
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write("".join(json.dumps(m) + "\n" for m in messages))
            process.stdin.flush()
            answers: dict[Any, dict[str, Any]] = {}
            while set(answers) != expected:
                line = process.stdout.readline()
                assert line, f"the server ended with {sorted(expected - set(answers))} unanswered"
                answer = json.loads(line)
                answers[answer["id"]] = answer
            process.stdin.close()
            assert process.wait() == 0
            return answers
        finally:
            watchdog.cancel()
            if process.poll() is None:
                process.kill()


def tool_text(answer: dict[str, Any]) -> str:
    assert "result" in answer, answer
    text: str = answer["result"]["content"][0]["text"]
    return text


def test_seed_002s_manual_session_works_without_initialized(db: Path) -> None:
    answers, done = pipe(
        db,
        request(1, "initialize", {}),
        request(2, "tools/list"),
        call(3, "issue_create", title="pasted by hand"),
        call(4, "issue_ready"),
    )
    assert done.returncode == 0, done.stderr
    assert answers[1]["result"]["protocolVersion"] == "2024-11-05"
    assert "issue_create" in {tool["name"] for tool in answers[2]["result"]["tools"]}
    assert tool_text(answers[3]).startswith("Created issue #1: pasted by hand")
    assert json.loads(tool_text(answers[4]))["title"] == "pasted by hand"


def test_an_initialize_with_only_some_fields_keeps_what_it_sent(db: Path) -> None:
    answers, _ = pipe(db, request(1, "initialize", {"protocolVersion": "2025-06-18"}))
    assert answers[1]["result"]["protocolVersion"] == "2025-06-18"


def test_a_request_before_initialize_says_what_is_missing(db: Path) -> None:
    answers, done = pipe(
        db,
        request(1, "tools/list"),
        call(2, "issue_ready"),
        request(3, "initialize", {"protocolVersion": 20241105}),
    )
    assert done.returncode == 0, done.stderr
    for number in (1, 2):
        error = answers[number]["error"]
        assert "initialize" in error["message"], error
        assert error["data"], error
    refused = answers[3]["error"]
    assert refused["data"] == "params.protocolVersion: Input should be a valid string"


@pytest.mark.slow
def test_closing_stdin_answers_every_request_already_read(db: Path) -> None:
    """Fresh servers in a row, each cold: every call answered, in arrival order."""
    for run in range(1, FRESH_SERVERS + 1):
        answers, done = pipe(
            db.with_name(f"run{run}.db"),
            request(1, "initialize", {}),
            INITIALIZED,
            request(2, "tools/list"),
            call(3, "issue_create", title=f"run {run}"),
            call(4, "issue_get", number=1),
        )
        assert done.returncode == 0, done.stderr
        assert sorted(answers) == [1, 2, 3, 4], (run, done.stdout, done.stderr)
        assert tool_text(answers[3]).startswith(f"Created issue #1: run {run}")
        assert json.loads(tool_text(answers[4]))["title"] == f"run {run}", answers[4]


def test_calls_sent_while_the_queue_opens_run_in_arrival_order(db: Path) -> None:
    """A cold server with a pipelined backlog: each call sees every write sent before it."""
    messages = [request(1, "initialize", INITIALIZE), INITIALIZED]
    for n in range(1, 6):
        messages.append(call(10 * n, "issue_create", title=f"issue {n}"))
        messages.append(call(10 * n + 1, "issue_get", number=n))
        messages.append(call(10 * n + 2, "issue_update", number=n, priority="urgent"))
        messages.append(call(10 * n + 3, "issue_list", priority="urgent"))
    answers = converse(db, *messages)
    for n in range(1, 6):
        assert tool_text(answers[10 * n]).startswith(f"Created issue #{n}:")
        assert json.loads(tool_text(answers[10 * n + 1]))["title"] == f"issue {n}"
        listed = answers[10 * n + 3]["result"]["structuredContent"]["items"]
        assert [item["number"] for item in listed] == list(range(1, n + 1))


def test_the_start_line_names_the_database_by_its_absolute_path(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "workq.cli.main", "--db", "relative.db", "serve"],
        input="",
        capture_output=True,
        text=True,
        timeout=CALL_TIMEOUT,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert f"(database sqlite:///{tmp_path.resolve() / 'relative.db'}, SQLite " in done.stderr


@pytest.mark.parametrize(
    ("where", "code", "said"),
    [
        ("no-such-folder/queue.db", "STORAGE_ERROR", "the folder of the database does not exist"),
        ("notes.txt", "CORRUPT_DATABASE", "is not a SQLite database"),
        ("folder", "STORAGE_ERROR", "is a folder, not a database file"),
    ],
)
def test_a_database_that_can_never_open_is_refused_at_start(
    tmp_path: Path, where: str, code: str, said: str
) -> None:
    (tmp_path / "notes.txt").write_text("a shopping list\n")
    (tmp_path / "folder").mkdir()
    done = subprocess.run(
        [sys.executable, *serve_argv(db=tmp_path / where)],
        input=json.dumps(request(1, "initialize", {})) + "\n",
        capture_output=True,
        text=True,
        timeout=CALL_TIMEOUT,
        cwd=tmp_path,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith(f"error: {code}: "), done.stderr
    assert said in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr
    assert (tmp_path / "notes.txt").read_text() == "a shopping list\n"


@pytest.mark.parametrize("option", [("--host", "0.0.0.0"), ("--port", "9000")])
def test_host_or_port_without_http_is_refused(tmp_path: Path, option: tuple[str, str]) -> None:
    db = tmp_path / "new.db"
    done = subprocess.run(
        [sys.executable, *serve_argv(*option, db=db)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=CALL_TIMEOUT,
        cwd=db.parent,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert "--host and --port" in done.stderr and "add --http" in done.stderr, done.stderr
    assert not db.exists()


def test_an_unknown_tool_names_the_toolset_that_has_it(db: Path) -> None:
    answers, _ = pipe(
        db,
        request(1, "initialize", {}),
        call(2, "issue_comment", number=1, body="x"),
        call(3, "no_such_tool"),
        args=("--toolsets", "core"),
    )
    assert answers[2]["result"]["isError"] is True
    assert "'notes' toolset" in tool_text(answers[2])
    assert tool_text(answers[3]).startswith("UNKNOWN_TOOL: Unknown tool: no_such_tool")


def test_the_catalog_knows_every_tool_of_every_toolset(tmp_path: Path) -> None:
    """The unknown-tool answer reads a catalog built without schemas: it must name the
    same tools, in the same toolsets, as the real registry."""
    state = ServerState(Settings(db_path=tmp_path / "q.db"))
    full, catalog = Registry(state), Catalog(state)
    register(full, list(GROUPS))
    register(catalog, list(GROUPS))
    assert catalog.toolset_of == full.toolset_of
    assert catalog.tools == {}


def test_end_of_input_ends_a_waiting_call_and_it_claims_nothing(db: Path) -> None:
    """A piped client that asked to wait and left: the server answers that call at once
    (nothing ready) and exits, rather than waiting out its 300 s and claiming an issue
    for nobody."""
    answers, done = pipe(
        db,
        request(1, "initialize", INITIALIZE),
        INITIALIZED,
        call(2, "issue_claim_next", wait_seconds=300),
        call(3, "issue_list"),
    )
    assert done.returncode == 0, done.stderr
    assert not answers[2]["result"].get("isError")
    assert answers[2]["result"]["structuredContent"] == {"claimed": False}
    assert not answers[3]["result"].get("isError")


def test_end_of_input_does_not_wait_for_a_modern_clients_listen_stream(db: Path) -> None:
    """A 2026-07-28 client opens ``subscriptions/listen`` (answered only when the
    connection ends) and closes stdin: the server answers the call read before and exits
    at once, instead of waiting out its drain timeout (the Inspector SIGTERMs it after
    2 s; a client that waits for the process hung for 300 s)."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "by-hand", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    listen = request(1, "subscriptions/listen", {"_meta": meta, "notifications": {}})
    create = request(2, "tools/call", {"_meta": meta, "name": "issue_create", "arguments": {}})
    create["params"]["arguments"] = {"title": "while listening"}
    done = subprocess.run(
        [sys.executable, *serve_argv(db=db)],
        input=json.dumps(listen) + "\n" + json.dumps(create) + "\n",
        capture_output=True,
        text=True,
        timeout=CALL_TIMEOUT,
        cwd=db.parent,
    )
    assert done.returncode == 0, done.stderr
    answers = {m.get("id"): m for m in map(json.loads, done.stdout.splitlines())}
    assert tool_text(answers[2]).startswith("Created issue #1: while listening")
    assert "left unanswered" not in done.stderr


def test_a_line_that_is_no_message_gets_a_json_rpc_error_with_id_null(db: Path) -> None:
    lines = [
        "not json",
        '{"id": 1, "method": "ping"}',
        '[{"jsonrpc": "2.0", "id": 2, "method": "ping"}]',
        json.dumps(request(3, "initialize", {})),
        json.dumps(INITIALIZED),
        json.dumps(call(4, "issue_list")),
        '{"jsonrpc": "2.0", "id": 5',
    ]
    done = subprocess.run(
        [sys.executable, *serve_argv(db=db)],
        input="".join(line + "\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=CALL_TIMEOUT * 2,
        cwd=db.parent,
    )
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    errors = [(a["id"], a["error"]["code"]) for a in answers if "error" in a]
    assert errors == [(None, -32700), (None, -32600), (None, -32600), (None, -32700)]
    assert "batches are not supported" in answers[2]["error"]["message"]
    assert [a["id"] for a in answers if "result" in a] == [3, 4]  # the session goes on
    assert done.stderr.count("answered a line that is no message") == 4
