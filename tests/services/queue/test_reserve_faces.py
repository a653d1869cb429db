"""Reservations over MCP (two agents on one queue) and the error code.

Agent a is a real ``workq serve`` over stdio, agent b the same server in this process
(``Client(server)``): what one reserves, the other sees across processes."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.conftest import migrated_sqlite
from tests.server.conftest import call_error, call_ok, error_of, make_server, text
from tests.services.plans.conftest import serve

pytestmark = pytest.mark.anyio


async def test_two_agents_reserve_skip_and_refuse(tmp_path: Path, sqlite_template: Path) -> None:
    db = migrated_sqlite(sqlite_template, tmp_path / "queue.db")  # a new queue, at head
    with anyio.fail_after(90):
        async with (
            serve(tmp_path, "agent-a", "--toolsets", "default,reserve") as a,
            Client(make_server(db, "default,reserve", run_id="agent-b")) as b,
        ):
            await call_ok(a, "issue_create", title="auth", touches=["src/auth/**"])
            await call_ok(a, "issue_create", title="login", touches=["src/auth/login.py"])
            await call_ok(a, "issue_create", title="free")
            took = (await call_ok(a, "issue_claim_next")).structured_content
            assert took is not None and took["number"] == 1

            ready = (await call_ok(b, "issue_ready")).structured_content
            assert ready is not None and ready["issue"]["number"] == 3
            refused = error_of(await call_error(b, "issue_claim", number=2))
            assert refused["code"] == "PATHS_RESERVED"
            assert refused["details"]["reserved"][0]["holder"] == "agent-a"

            await call_ok(b, "issue_claim", number=3)
            mine = (
                await call_ok(a, "issue_reserve", number=1, glob="docs/**", mode="shared")
            ).structured_content
            assert mine is not None
            assert [(r["glob"], r["mode"]) for r in mine["items"]] == [
                ("docs/**", "shared"),
                ("src/auth/**", "exclusive"),
            ]
            clash = error_of(await call_error(b, "issue_reserve", number=3, glob="docs/a.md"))
            assert clash["code"] == "PATHS_RESERVED"
            assert "issue_ready" in clash["hint"]
            await call_ok(b, "issue_reserve", number=3, glob="docs/a.md", mode="shared")
            not_mine = error_of(await call_error(b, "issue_unreserve", number=1, glob="docs/**"))
            assert not_mine["code"] == "NOT_HOLDER"
            # The glob is the caller's text: the failure's first words stay workq's own.
            odd = await call_error(b, "issue_unreserve", number=3, glob="a: b")
            assert text(odd).startswith("Could not release paths of issue #3: INVALID_INPUT: ")

            await call_ok(a, "issue_complete", number=1)
            listed = (await call_ok(b, "issue_reservations")).structured_content
            assert listed is not None
            assert [(r["number"], r["glob"]) for r in listed["items"]] == [(3, "docs/a.md")]
            await call_ok(b, "issue_claim", number=2)
