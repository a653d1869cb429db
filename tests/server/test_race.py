"""Eight ``workq serve`` processes on one database, each driven by its own client running
the autopilot loop until the queue is empty: every issue is completed exactly once."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.server.conftest import call_ok, stdio_server, text
from workq.config import Settings
from workq.db import sqlite
from workq.services.queue import issues
from workq.services.runtime import open_queue

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

SERVERS = 8
ISSUES = 160
NOTHING = "No ready issues available"


async def autopilot(client: Client, run_id: str, one_step: bool) -> list[int]:
    """Seed 002's loop (ready, claim, complete), or claim_next then complete."""
    finished: list[int] = []
    while True:
        if one_step:
            taken = await call_ok(client, "issue_claim_next", run_id=run_id)
            assert taken.structured_content is not None
            if not taken.structured_content["claimed"]:
                return finished
            number = taken.structured_content["number"]
        else:
            ready = await call_ok(client, "issue_ready", agent="claude")
            if text(ready) == NOTHING:
                return finished
            assert ready.structured_content is not None
            number = ready.structured_content["issue"]["number"]
            claim = await client.call_tool("issue_claim", {"number": number, "run_id": run_id})
            if claim.is_error:
                assert text(claim).startswith(f"Could not claim issue #{number} (already claimed")
                continue
            assert text(claim) == f"Claimed issue #{number}"
        done = await call_ok(client, "issue_complete", number=number)
        assert text(done).startswith(f"Completed issue #{number}")
        finished.append(number)


async def test_eight_servers_complete_every_issue_exactly_once(db: Path) -> None:
    queue = open_queue(Settings(db_path=db))
    try:
        for n in range(ISSUES):
            issues.create(
                queue, title=f"task {n}", priority=("urgent", "high", "medium", "low")[n % 4]
            )
    finally:
        queue.db.dispose()

    results: dict[str, list[int]] = {}

    async def agent(i: int) -> None:
        async with stdio_server(db, errlog=db.with_name(f"agent-{i}.log")) as client:
            results[f"agent-{i}"] = await autopilot(client, f"agent-{i}", one_step=i % 2 == 1)

    with anyio.fail_after(240):
        async with anyio.create_task_group() as group:
            for i in range(SERVERS):
                group.start_soon(agent, i)

    everything = [n for finished in results.values() for n in finished]
    assert sorted(everything) == list(range(1, ISSUES + 1))
    assert sum(1 for finished in results.values() if finished) >= 2, "no race happened"
    with sqlite.connect(f"file:{db}?mode=ro", uri=True) as conn:
        statuses = Counter(s for (s,) in conn.execute("SELECT status FROM issues"))
        completions = Counter(
            n for (n,) in conn.execute("SELECT number FROM events WHERE kind = 'completed'")
        )
        takeovers = conn.execute(
            "SELECT count(*) FROM events WHERE kind = 'claim_takeover'"
        ).fetchone()[0]
    assert statuses == {"done": ISSUES}
    assert set(completions.values()) == {1} and len(completions) == ISSUES
    assert takeovers == 0
