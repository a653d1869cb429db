"""The same queue rules through the MCP server: claims that come to wait, self-renewal by
claim_next, and what text may be stored.

The rules run against an in-process server (the SDK's ``Client(server)``); the two tests of
what text may be stored run against a real ``workq serve`` over stdio, since their values
(C1 controls, U+2028/U+2029, 256 KiB of emoji) are also a test of the newline-framed JSON
on its stdin and stdout."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests import storage
from tests.server.conftest import (
    EVERYTHING,
    EVERYTHING_LOCAL,
    error_of,
    make_server,
    stdio_server,
    text,
)
from tests.workq_cli import workq
from workq.db import sqlite
from workq.schemas import COMMENT_MAX, DESCRIPTION_MAX, TITLE_MAX

pytestmark = pytest.mark.anyio


async def call(client: Client, tool: str, **arguments: Any) -> tuple[str, dict[str, Any]]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, text(result)
    return text(result), dict(result.structured_content or {})


async def refused(client: Client, tool: str, **arguments: Any) -> tuple[str, dict[str, Any]]:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, f"{tool} accepted {arguments!r:.200}: {text(result)}"
    return text(result), error_of(result)


async def test_a_claim_that_comes_to_wait_cannot_be_completed(db: Path) -> None:
    with anyio.fail_after(120):
        async with Client(make_server(db, EVERYTHING, run_id="agent-1")) as client:
            await call(client, "issue_create", title="blocker")
            await call(client, "issue_create", title="dependent")
            await call(client, "issue_claim", number=2)
            said, _ = await call(client, "issue_depend", blocker=1, blocked=2)
            assert "agent-1 keeps its claim but cannot complete it" in said

            before = storage.dump(db)
            line, error = await refused(client, "issue_complete", number=2)
            assert line.startswith(
                "Could not complete issue #2: OPEN_BLOCKERS: Issue #2 waits on #1, which is "
                "not done; finish those first"
            ), line
            assert error["code"] == "OPEN_BLOCKERS" and error["details"]["waits_on"] == [1]
            assert storage.dump(db) == before

            # The holder keeps the claim; its next calls say what changed.
            said, claim = await call(client, "issue_claim", number=2)
            assert claim["already_held"] is True and claim["waits_on"] == [1]
            assert "Issue #2 now waits on #1, not done yet" in said
            said, renewed = await call(client, "issue_heartbeat", number=2)
            assert renewed["waiting"] == [{"number": 2, "waits_on": [1]}]
            assert "now waits on #1" in said
            said, renewed = await call(client, "issue_heartbeat")
            assert renewed["waiting"] == [{"number": 2, "waits_on": [1]}]

            await call(client, "issue_claim", number=1)
            await call(client, "issue_complete", number=1)
            said, claim = await call(client, "issue_claim", number=2)
            assert claim["waits_on"] == [] and said == "Claimed issue #2"
            said, done = await call(client, "issue_complete", number=2)
            assert said == "Completed issue #2" and done["already_done"] is False


async def test_a_reopened_blocker_holds_back_its_claimed_dependent(db: Path) -> None:
    with anyio.fail_after(120):
        async with Client(make_server(db, EVERYTHING, run_id="agent-1")) as client:
            await call(client, "issue_create", title="blocker")
            await call(client, "issue_create", title="dependent")
            await call(client, "issue_depend", blocker=1, blocked=2)
            await call(client, "issue_claim", number=1)
            await call(client, "issue_complete", number=1)
            await call(client, "issue_claim", number=2)
            _cli(db, "reopen", "1")  # no tool reopens: an admin's command
            line, error = await refused(client, "issue_complete", number=2)
            assert error["code"] == "OPEN_BLOCKERS" and "#1" in line
            _, issue = await call(client, "issue_get", number=2)
            assert issue["status"] == "in_progress" and issue["claimed_by"] == "agent-1"


def _cli(db: Path, *args: str) -> None:
    done = workq("--db", str(db), *args, cwd=db.parent)
    assert done.returncode == 0, done.stderr


async def test_claim_next_of_its_own_expired_claim_is_a_renewal(db: Path) -> None:
    _cli(db, "create", "only")
    _cli(db, "claim", "1", "--run-id", "agent-1")
    with closing(sqlite.connect(db)) as conn, conn:
        claimed_at = conn.execute("SELECT claimed_at FROM issues").fetchone()[0]
        conn.execute("UPDATE issues SET lease_expires_at = '2000-01-01 00:00:00.000000'")
    with anyio.fail_after(60):
        async with Client(make_server(db, "default")) as client:
            said, got = await call(client, "issue_claim_next", run_id="agent-1")
    assert got["number"] == 1 and got["previous_holder"] is None
    assert "taken over" not in said
    with closing(sqlite.connect(db)) as conn:
        assert conn.execute("SELECT claimed_at FROM issues").fetchone()[0] == claimed_at
        kinds = [k for (k,) in conn.execute("SELECT kind FROM events ORDER BY id")]
    assert kinds == ["created", "claimed"]


ONE_LINE_REFUSED = {
    "CSI (C1)": "red\x9b31m",
    "NEL (C1)": "one\x85two",
    "line separator": "one\u2028two",
    "paragraph separator": "one\u2029two",
}


async def test_c1_controls_and_separators_are_refused_where_text_is_one_line(db: Path) -> None:
    with anyio.fail_after(120):
        async with stdio_server(db, "--toolsets", EVERYTHING_LOCAL) as client:
            await call(client, "issue_create", title="first")
            before = storage.dump(db)
            for value in ONE_LINE_REFUSED.values():
                one_line: tuple[tuple[str, dict[str, Any]], ...] = (
                    ("issue_create", {"title": value}),
                    ("issue_update", {"number": 1, "title": value}),
                    ("issue_create", {"title": "t", "labels": [value]}),
                    ("issue_claim", {"number": 1, "run_id": value}),
                    ("issue_search", {"query": value}),
                    ("enter_plan_mode", {"slug": f"plan{value}", "goal": "g"}),
                )
                for tool, arguments in one_line:
                    line, error = await refused(client, tool, **arguments)
                    assert error["code"] == "INVALID_INPUT", line
            for c1 in ("\x9b2J", "a\x85b", "\x80"):
                multi_line: tuple[tuple[str, dict[str, Any]], ...] = (
                    ("issue_create", {"title": "t", "description": c1}),
                    ("issue_comment", {"number": 1, "body": c1}),
                    ("issue_block", {"number": 1, "reason": c1}),
                    ("enter_plan_mode", {"slug": "p", "goal": c1}),
                )
                for tool, arguments in multi_line:
                    line, error = await refused(client, tool, **arguments)
                    assert error["code"] == "INVALID_INPUT", line
            assert storage.dump(db) == before
            kept = "one\u2028two\u2029three"
            _, made = await call(client, "issue_create", title="t", description=kept)
            _, issue = await call(client, "issue_get", number=made["number"])
            assert issue["description"] == kept


async def test_text_limits_count_characters_of_the_trimmed_title(db: Path) -> None:
    with anyio.fail_after(120):
        async with stdio_server(db, "--toolsets", EVERYTHING_LOCAL) as client:
            _, made = await call(client, "issue_create", title=" " + "x" * TITLE_MAX + " ")
            _, issue = await call(client, "issue_get", number=made["number"])
            assert issue["title"] == "x" * TITLE_MAX
            line, _ = await refused(client, "issue_create", title="x" * (TITLE_MAX + 1))
            assert f"{TITLE_MAX + 1} characters long; the limit is {TITLE_MAX}" in line

            # 65,536 emoji are 256 KiB of UTF-8: within the limit, which counts characters.
            at_limit = "\U0001f525" * DESCRIPTION_MAX
            _, made = await call(client, "issue_create", title="t", description=at_limit)
            _, issue = await call(client, "issue_get", number=made["number"])
            assert issue["description"] == at_limit
            await call(client, "issue_comment", number=1, body="\U0001f525" * COMMENT_MAX)
            before = storage.dump(db)
            for tool, arguments in (
                ("issue_create", {"title": "t", "description": at_limit + "a"}),
                ("issue_update", {"number": 1, "description": at_limit + "a"}),
                ("issue_comment", {"number": 1, "body": at_limit + "a"}),
            ):
                line, error = await refused(client, tool, **arguments)
                assert error["code"] == "INVALID_INPUT" and str(DESCRIPTION_MAX) in line, line
            assert storage.dump(db) == before
