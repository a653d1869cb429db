"""Fencing through the real faces: a `workq serve` agent whose lease lapsed and was taken
over under its own run id (a restart) cannot complete with its old token, over MCP or the
CLI; the new holder's token works.

The agent stays a real ``workq serve`` over stdio (this file's end-to-end test); the CLI
runs in this process (``tests/workq_cli.py``), another process than the server's."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.conftest import migrated_sqlite
from tests.server.conftest import call_error, call_ok, error_of
from tests.server.test_claim_faces import cli, cli_json
from tests.services.plans.conftest import serve
from workq.db import sqlite

pytestmark = pytest.mark.anyio


def _lapse(db: Path) -> None:
    """Move the lease into the past, as if the agent had stalled past it."""
    with sqlite.connect(db) as conn:
        conn.execute("UPDATE issues SET lease_expires_at = '2000-01-01 00:00:00.000000'")


async def test_old_holder_is_fenced_out_after_a_takeover_under_its_run_id(
    tmp_path: Path, sqlite_template: Path
) -> None:
    migrated_sqlite(sqlite_template, tmp_path / "queue.db")  # a new queue, at head
    with anyio.fail_after(60):
        async with serve(tmp_path, "agent-7") as old:
            await call_ok(old, "issue_create", title="one")
            first = (await call_ok(old, "issue_claim_next")).structured_content
            assert first is not None and first["fence"] == 1
            _lapse(tmp_path / "queue.db")
            again = cli_json(tmp_path, "claim-next", "--run-id", "agent-7")
            assert again["fence"] == 2 and again["already_held"]

            refused = error_of(await call_error(old, "issue_complete", number=1, fence=1))
            assert refused["code"] == "STALE_CLAIM"
            assert refused["details"]["holder"] == "agent-7"
            assert refused["details"]["latest_fence"] == 2
            assert "issue_ready" in refused["hint"]
            await call_error(old, "issue_heartbeat", number=1, fence=1)
            await call_error(old, "issue_release", number=1, fence=1)

            by_cli = cli(tmp_path, "complete", "1", "--run-id", "agent-7", "--fence", "1")
            assert by_cli.returncode == 1
            assert "STALE_CLAIM" in by_cli.stderr and "workq ready" in by_cli.stderr

            done = cli_json(tmp_path, "complete", "1", "--run-id", "agent-7", "--fence", "2")
            assert done["number"] == 1 and not done["already_done"]
