"""The hot calls on the server's event loop (server/inline.py), through a real ``workq
serve``: a claim and a completion run on the loop when they need not wait; when another
process holds the write lock they wait on a worker thread instead, and the loop goes on
answering (a ping, a read) meanwhile. Which tools run on the loop is listed here, read
from the source, so a new one is a decision with its tests, never an accident."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from mcp import Client
from mcp.types import CallToolResult

from tests import storage
from tests.server.conftest import call_ok, make_server, stdio_server, text
from workq.server import inline

SERVER = Path(inline.__file__).parent
SRC = SERVER.parent
# The tools whose work runs on the loop (through on_loop, or until_found without waiting),
# each with its no-wait checks tested in tests/services/queue/test_no_waiting.py.
ON_LOOP = {"issue_ready", "issue_claim_next", "issue_complete"}


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_held_write_lock_waits_on_a_thread_and_the_loop_goes_on(
    db: Path, mode: str
) -> None:
    done: dict[str, str] = {}

    async def call(client: Client, name: str, args: dict[str, Any]) -> None:
        done[name] = text(await call_ok(client, name, **args))

    with anyio.fail_after(120):
        async with stdio_server(db, mode=mode, env={"WORKQ_BUSY_TIMEOUT_MS": "60000"}) as client:
            await call_ok(client, "issue_create", title="first")
            await call_ok(client, "issue_create", title="second")
            await call_ok(client, "issue_claim_next")
            with storage.write_lock(db) as holder:
                async with anyio.create_task_group() as group:
                    group.start_soon(call, client, "issue_complete", {"number": 1})
                    group.start_soon(call, client, "issue_claim_next", {})
                    await anyio.sleep(0.5)  # both are in the server, waiting for the lock
                    assert (await client.list_tools()).tools  # the loop answers meanwhile
                    ready = json.loads(text(await call_ok(client, "issue_ready")))
                    assert ready["number"] == 2  # a read goes on too (WAL)
                    assert done == {}  # nothing was written while the lock was held
                    assert holder.stdin is not None
                    holder.stdin.write("\n")
                    holder.stdin.flush()
            assert done["issue_complete"] == "Completed issue #1"
            assert done["issue_claim_next"].startswith("Claimed issue #2")


@pytest.mark.anyio
async def test_a_claim_and_a_completion_run_on_the_loop_when_they_need_not_wait(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In-process: a worker thread is not asked for the claim loop's calls. (One of the
    server's own threads may write at the same moment, a lease renewal or a sweep: that
    call then goes to a thread, as it should; so the loop is tried a few times.)"""
    server = make_server(db)
    server.state.start()
    server.state.wait_open()
    hops: list[str] = []
    to_thread = anyio.to_thread.run_sync

    async def counted(work: object, *args: object, **kwargs: object) -> object:
        hops.append(getattr(work, "__qualname__", repr(work)))
        return await to_thread(work, *args, **kwargs)  # type: ignore[arg-type]

    try:
        for number in range(1, 4):
            await server.call_tool("issue_create", {"title": f"issue {number}"})
            hops.clear()
            monkeypatch.setattr(anyio.to_thread, "run_sync", counted)
            ready = await server.call_tool("issue_ready", {})
            taken = await server.call_tool("issue_claim_next", {})
            done = await server.call_tool("issue_complete", {"number": number})
            monkeypatch.undo()
            assert isinstance(taken, CallToolResult) and not taken.is_error
            assert isinstance(ready, CallToolResult) and not ready.is_error
            assert isinstance(done, CallToolResult) and not done.is_error
            assert (taken.structured_content or {})["number"] == number
            if not hops:
                break
        assert hops == []
    finally:
        server.state.stop()


class _OnLoop(ast.NodeVisitor):
    """The innermost functions (the tools) that call ``on_loop`` or ``until_found``."""

    def __init__(self) -> None:
        self.stack: list[str] = []
        self.found: set[str] = set()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.stack.append(node.name)
        self.generic_visit(node)
        self.stack.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name) and node.func.id in ("on_loop", "until_found"):
            self.found.add(self.stack[-1] if self.stack else "<module>")
        self.generic_visit(node)


def test_the_tools_on_the_loop_are_the_ones_listed() -> None:
    on_loop: set[str] = set()
    for path in sorted(SERVER.rglob("*.py")):
        if path.name in ("inline.py", "waits.py"):
            continue  # the runners themselves
        visitor = _OnLoop()
        visitor.visit(ast.parse(path.read_text()))
        on_loop |= visitor.found
    assert on_loop == ON_LOOP


# Modules that may make a thread wait (a subprocess, a sleep) yet never ask first, and
# why no call on the loop reaches them.
NEVER_ON_LOOP = {
    "db/dialect.py": "PostgreSQL only: on_loop runs SQLite work only",
    "services/workspaces/merge_lease.py": "the merge queue: issue_merge and the landings",
    "github/auth.py": "GitHub's token, read when the GitHub tools or the mirror start",
    "server/workers.py": "a worker process's own thread, watching its parent",
}
WAITS = ("subprocess.run(", "subprocess.Popen(", "time.sleep(")


def test_every_module_that_may_wait_asks_first_or_says_why_it_need_not() -> None:
    waiting = set()
    for path in sorted(SRC.rglob("*.py")):
        source = path.read_text()
        if any(wait in source for wait in WAITS):
            name = path.relative_to(SRC).as_posix()
            waiting.add(name)
            asks = "before_waiting(" in source or "must_not_wait()" in source
            assert asks != (name in NEVER_ON_LOOP), (
                f"{name}: ask first (workq/nowait.py), or say in NEVER_ON_LOOP why no call "
                "on the loop reaches it (and not both)"
            )
    assert set(NEVER_ON_LOOP) <= waiting, "NEVER_ON_LOOP names a module that no longer waits"
