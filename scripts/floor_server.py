"""The same-work floor: a bare MCPServer whose tools do a claim and a completion on a workq
SQLite file with the standard library's sqlite3 and nothing else, for the benchmarks to
measure workq against (figures, not a product).

    python scripts/floor_server.py DB_FILE                 # over stdio
    python scripts/floor_server.py DB_FILE PORT json|sse   # over Streamable HTTP

Its tools are named as workq's, so a benchmark drives both alike. ``issue_create(title)``:
one row, its number the next. ``issue_claim_next(run_id)``: in one transaction, the first
ready issue by priority, age and number, taken by a compare-and-set that grows its fence
and sets a lease, and its audit event. ``issue_complete(number, run_id, fence)``: in one
transaction, the holder's check by compare-and-set, done, the issues it blocked counted
down, the audit event. On the SQLite library and with the settings workq uses (WAL,
``synchronous=NORMAL``, foreign keys enforced), the calls in the SDK's worker thread as
workq's are. Each answers what workq's tool answers (the claimed issue with its
description, or the completion), as a typed model, so a client checks as much of it as it
checks of workq's. What it leaves out is workq's own: the door's decision table,
reservations, plan mode, worktrees, the hooks, the outbox, run id bindings, and events
beyond these.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import threading
import uuid
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, ConfigDict

LEASE = timedelta(minutes=30)


def _library() -> Any:
    """The SQLite library workq runs on: the bundled one (pysqlite3) where it is installed
    and newer than the standard library's (workq/db/sqlite.py), so both do the same work on
    the same engine."""
    try:
        import pysqlite3.dbapi2 as bundled  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:
        return sqlite3
    return bundled if bundled.sqlite_version_info > sqlite3.sqlite_version_info else sqlite3


dbapi = _library()
server = MCPServer("floor")
_local = threading.local()


def _conn() -> sqlite3.Connection:
    conn: sqlite3.Connection | None = getattr(_local, "conn", None)
    if conn is None:
        conn = dbapi.connect(sys.argv[1], isolation_level=None, timeout=10)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")  # as workq's connections: the schema's rules
        _local.conn = conn
    return conn


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")


def _event(
    conn: sqlite3.Connection, issue_id: str, number: int, kind: str, actor: str, now: str
) -> None:
    conn.execute(
        "INSERT INTO events (issue_id, number, kind, actor, before, after, created_at)"
        " VALUES (?, ?, ?, ?, NULL, ?, ?)",
        (issue_id, number, kind, actor, json.dumps({"status": kind}), now),
    )


@server.tool()
def noop() -> str:
    return "ok"


@server.tool()
def issue_create(title: str) -> dict[str, object]:
    conn = _conn()
    now = _stamp(datetime.now(UTC))
    conn.execute("BEGIN IMMEDIATE")
    try:
        number = conn.execute("SELECT coalesce(max(number), 0) + 1 FROM issues").fetchone()[0]
        conn.execute(
            "INSERT INTO issues (id, number, title, description, status, priority, issue_type,"
            " agent, is_blocked, open_blockers, created_at, updated_at, fence)"
            " VALUES (?, ?, ?, '', 'open', 2, 'task', 'claude', 0, 0, ?, ?, 0)",
            (uuid.uuid4().hex, number, title, now, now),
        )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return {"number": number, "title": title}


def _published(schema: dict[str, Any]) -> None:
    """The schema as workq publishes its answers: no titles or defaults, and a field that
    is only absent when nothing was claimed is not null (``previous_holder`` may be)."""
    schema.pop("title", None)
    for name, node in schema["properties"].items():
        node.pop("title", None)
        node.pop("default", None)
        options = node.get("anyOf")
        if options and name != "previous_holder":
            node.pop("anyOf")
            node.update(next(o for o in options if o != {"type": "null"}))


class Claimed(BaseModel):
    """What workq's issue_claim_next answers: ``claimed``, and the claim when there was one."""

    model_config = ConfigDict(json_schema_extra=_published)

    claimed: bool
    number: int | None = None
    title: str | None = None
    claimed_by: str | None = None
    claimed_at: str | None = None
    lease_expires_at: str | None = None
    fence: int | None = None
    previous_holder: str | None = None
    already_held: bool | None = None
    waits_on: list[int] | None = None
    description: str | None = None
    priority: str | None = None
    issue_type: str | None = None
    agent: str | None = None


class Completed(BaseModel):
    """What workq's issue_complete answers."""

    model_config = ConfigDict(json_schema_extra=_published)

    number: int
    title: str
    already_done: bool = False
    unblocked: list[int] = []


PRIORITIES = ("urgent", "high", "medium", "low")


def _answer(text: str, data: dict[str, Any]) -> CallToolResult:
    """The cheapest answer the SDK takes with structured content: built, not converted."""
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


@server.tool()
def issue_claim_next(run_id: str = "floor") -> Annotated[CallToolResult, Claimed]:
    conn = _conn()
    moment = datetime.now(UTC)
    now, until = _stamp(moment), _stamp(moment + LEASE)
    conn.execute("BEGIN IMMEDIATE")
    try:
        row = conn.execute(
            "SELECT id, number FROM issues WHERE status = 'open' AND is_blocked = 0"
            " AND open_blockers = 0 ORDER BY priority, created_at, number LIMIT 1"
        ).fetchone()
        if row is None:
            conn.execute("COMMIT")
            return _answer("No issue is ready", {"claimed": False})
        issue_id, number = row
        title, description, priority, issue_type, agent, fence = conn.execute(
            "UPDATE issues SET status = 'in_progress', claimed_by = ?, claimed_at = ?,"
            " lease_expires_at = ?, fence = fence + 1, updated_at = ?"
            " WHERE id = ? AND status = 'open'"
            " RETURNING title, description, priority, issue_type, agent, fence",
            (run_id, now, until, now, issue_id),
        ).fetchone()
        _event(conn, issue_id, number, "claimed", run_id, now)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    data = {
        "claimed": True,
        "number": number,
        "title": title,
        "claimed_by": run_id,
        "claimed_at": moment.isoformat(),
        "lease_expires_at": (moment + LEASE).isoformat(),
        "fence": fence,
        "previous_holder": None,
        "already_held": False,
        "waits_on": [],
        "description": description,
        "priority": PRIORITIES[priority],
        "issue_type": issue_type,
        "agent": agent,
    }
    text = f"Claimed issue #{number}: {title}\npriority: {data['priority']} · type: {issue_type}"
    return _answer(f"{text}\n\n{description}", data)


@server.tool()
def issue_complete(
    number: int, run_id: str = "floor", fence: int | None = None
) -> Annotated[CallToolResult, Completed]:
    conn = _conn()
    now = _stamp(datetime.now(UTC))
    conn.execute("BEGIN IMMEDIATE")
    try:
        row = conn.execute(
            "UPDATE issues SET status = 'done', closed_at = ?, updated_at = ?, claimed_by = NULL,"
            " lease_expires_at = NULL WHERE number = ? AND claimed_by = ?"
            " AND (? IS NULL OR fence = ?) RETURNING id, title",
            (now, now, number, run_id, fence, fence),
        ).fetchone()
        if row is None:
            conn.execute("ROLLBACK")
            raise ValueError(f"issue #{number} is not held by {run_id}")
        issue_id, title = row
        unblocked = conn.execute(
            "UPDATE issues SET open_blockers = open_blockers - 1 WHERE id IN"
            " (SELECT blocked_id FROM dependencies WHERE blocker_id = ?)"
            " RETURNING number, open_blockers, is_blocked, status",
            (issue_id,),
        ).fetchall()
        _event(conn, issue_id, number, "completed", run_id, now)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    ready = sorted(n for n, left, blocked, status in unblocked if left == 0 and not blocked)
    data = {"number": number, "title": title, "already_done": False, "unblocked": ready}
    return _answer(f"Completed issue #{number}", data)


def serve_http(port: int, answers: str) -> None:
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    app = server.streamable_http_app(
        host="127.0.0.1",
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        json_response=answers == "json",
    )
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    if len(sys.argv) > 2:
        serve_http(int(sys.argv[2]), sys.argv[3])
    else:
        server.run()
