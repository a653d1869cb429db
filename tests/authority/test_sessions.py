"""The matrix's callers over HTTP: two sessions of one ``workq serve --http`` process are
two callers (sessions of the protocol's stateful era; a stateless request is served as the
server's own run id, docs/mcp.md). Session A claims an issue per face (every queue tool
that names a claimed issue); then, on each, session B calls the face, session B names A's
run id, and A calls it: the outcome must be the table's (``decide`` on the same facts;
naming another live session's run id is RUN_ID_IN_USE) and a refusal must leave the
database byte-identical. One server for every face (starting one costs a second); on
SQLite and, with WORKQ_TEST_PG_URL, on PostgreSQL."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.authority import snapshot
from tests.authority.recipes import TOOL_RECIPES, Ctx, Recipe
from tests.authority.world import LEASE, code_of, text_of
from tests.conftest import ENGINES, database
from tests.server.conftest import CALL_TIMEOUT, EVERYTHING_LOCAL, serve_argv
from workq.config import Settings
from workq.domain.authority import Authority
from workq.domain.decisions import decide
from workq.services.handle import load
from workq.services.queue import door
from workq.services.runtime import open_queue

pytestmark = pytest.mark.anyio

START_TIMEOUT = 30.0
LIMIT = 240

# The queue's faces that name one claimed issue and answer with a code (a claim of the
# next issue, and the faces of two issues (depend), have their own cases in test_matrix).
FACES = [
    r
    for r in TOOL_RECIPES
    if r.family == "queue"
    and r.outcome == "code"
    and r.target == 1
    and set(r.prepare) <= {"reserve"}
    and r.face not in ("issue_depend", "issue_undepend")
]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def http_server(settings: Settings, folder: Path) -> Iterator[str]:
    """``workq serve --http`` (every local toolset and profile) on the database; its URL."""
    port = _free_port()
    where: dict[str, Any] = (
        {"url": settings.database_url} if settings.database_url else {"db": settings.db_path}
    )
    argv = serve_argv("--http", "--port", str(port), "--toolsets", EVERYTHING_LOCAL, **where)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("WORKQ_")},
        "WORKQ_LEASE_SECONDS": str(LEASE),
        "WORKQ_TESTS_GATE": "trust",
        "WORKQ_PLANS_DIR": str(folder / "plans"),
    }
    with (folder / "http.log").open("w") as log:
        process = subprocess.Popen(
            [sys.executable, *argv],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=folder,
            env=env,
        )
        try:
            deadline = time.monotonic() + START_TIMEOUT
            while True:
                assert process.poll() is None, (folder / "http.log").read_text()
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                    break
                except OSError:
                    assert time.monotonic() < deadline, "the HTTP server did not start"
                    time.sleep(0.05)
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            process.terminate()
            process.wait(timeout=START_TIMEOUT)


@pytest.fixture(params=ENGINES)
def settings(
    request: pytest.FixtureRequest, tmp_path: Path, sqlite_template: Path, pg_template: str | None
) -> Iterator[Settings]:
    template = sqlite_template if request.param == "sqlite" else pg_template
    with database(request.param, tmp_path / "queue.db", template=template) as found:
        yield found.model_copy(update={"lease_seconds": LEASE})


async def _call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, f"{tool}({arguments}): {text_of(result)}"
    return dict(result.structured_content or {})


def _expected(settings: Settings, recipe: Recipe, number: int, by: Authority) -> str:
    q = open_queue(settings)
    try:
        with q.db.read() as conn:
            for action in recipe.actions:
                row = load(conn, number)
                refusal = decide(action, door.facts(conn, row, action, by), by, q.now())
                if refusal is not None:
                    return refusal.code
    finally:
        q.db.dispose()
    return "allowed"


async def test_sessions_of_one_http_server_are_callers(settings: Settings, tmp_path: Path) -> None:
    problems: list[str] = []
    with anyio.fail_after(LIMIT), http_server(settings, tmp_path) as url:
        async with (
            Client(url, mode="legacy", read_timeout_seconds=CALL_TIMEOUT) as a,
            Client(url, mode="legacy", read_timeout_seconds=CALL_TIMEOUT) as b,
        ):
            mine = {}
            for name, client in (("a", a), ("b", b)):
                told = re.search(r"acts as run id (run-[0-9a-f]+)", client.instructions or "")
                assert told is not None, client.instructions
                mine[name] = told.group(1)
                await _call(client, "issue_heartbeat")  # binds the session's own run id
            assert mine["a"] != mine["b"]
            numbers: dict[str, int] = {}
            for i, recipe in enumerate(FACES):
                made = await _call(a, "issue_create", title=recipe.id, touches=[f"src/{i}/**"])
                numbers[recipe.id] = made["number"]
                await _call(a, "issue_claim", number=made["number"])
                if "reserve" in recipe.prepare:
                    await _call(a, "issue_reserve", number=made["number"], glob="docs/**")
            for recipe in FACES:
                n = numbers[recipe.id]
                callers: list[tuple[str, Client, Ctx, Authority | None]] = [
                    ("other session", b, Ctx(None, None, None, None, n), Authority.of({mine["b"]}))
                ]
                if recipe.names == "run_id":
                    naming = Ctx(mine["a"], None, None, None, n)
                    callers.append(("session naming A's run id", b, naming, None))
                fence = 1 if recipe.fence else None
                holder = Authority.of({mine["a"]}, fence=fence)
                callers.append(("holder session", a, Ctx(None, None, fence, None, n), holder))
                for who, client, ctx, by in callers:
                    wanted = "RUN_ID_IN_USE" if by is None else _expected(settings, recipe, n, by)
                    before = snapshot.dump_database(settings)
                    result = await client.call_tool(recipe.face, recipe.build(ctx))
                    got = code_of(result) if result.is_error else "allowed"
                    if got != wanted:
                        problems.append(f"{recipe.id} as {who}: expected {wanted}, got {got}")
                    if got != "allowed":
                        after = snapshot.dump_database(settings)
                        shown = snapshot.Snapshot(before).differences(snapshot.Snapshot(after))
                        problems += [f"{recipe.id} as {who}: {line}" for line in shown]
    assert not problems, "\n".join(problems)
