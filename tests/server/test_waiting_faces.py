"""Waiting through the real faces: issue_claim_next(wait_seconds) over stdio blocks while
the queue is empty without holding up the client's other calls, wakes when the CLI creates
an issue (another process: the server is a real ``workq serve``, the CLI runs in the
test's process), and exactly one waiter claims each issue; the CLI's claim-next --wait does
the same.

This stays a real server over stdio: its subject is a server process that answers other
calls on the same stdio stream while some wait, and wakes on a write from another process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.conftest import migrated_sqlite
from tests.server.conftest import call_ok, text
from tests.services.plans.conftest import serve
from tests.workq_cli import ok

pytestmark = pytest.mark.anyio
LIMIT = 120
WAITERS = 3


def create(cwd: Path, title: str) -> None:
    ok("--db", "queue.db", "create", title, cwd=cwd)


async def test_waiting_calls_wake_and_each_issue_goes_to_one(
    tmp_path: Path, sqlite_template: Path
) -> None:
    migrated_sqlite(sqlite_template, tmp_path / "queue.db")  # a new queue, at head
    create(tmp_path, "seed")  # the database exists before the server starts
    with anyio.fail_after(LIMIT):
        async with serve(tmp_path, "run-w") as client:
            await call_ok(client, "issue_claim_next")  # takes the seed: the queue is empty
            send, receive = anyio.create_memory_object_stream[dict[str, Any]](WAITERS)

            async def wait_for_work(i: int) -> None:
                result = await call_ok(
                    client, "issue_claim_next", run_id=f"waiter-{i}", wait_seconds=LIMIT
                )
                assert result.structured_content is not None
                await send.send(result.structured_content)

            async with send, receive, anyio.create_task_group() as group:
                for i in range(WAITERS):
                    group.start_soon(wait_for_work, i)
                # The client's other calls are answered while those wait.
                empty = await call_ok(client, "issue_ready")
                assert text(empty) == "No ready issues available"
                await call_ok(client, "issue_list")
                bounded = await call_ok(client, "issue_ready", wait_seconds=1)
                assert text(bounded) == "No ready issues available"

                await anyio.to_thread.run_sync(create, tmp_path, "wanted")
                first = await receive.receive()
                assert first["number"] == 2
                for title in ("more", "and more"):
                    await anyio.to_thread.run_sync(create, tmp_path, title)
                got = [first, await receive.receive(), await receive.receive()]
            holders = {g["claimed_by"] for g in got}
            assert sorted(g["number"] for g in got) == [2, 3, 4]
            assert holders == {f"waiter-{i}" for i in range(WAITERS)}
