"""Benchmark contract E's ``get_work_context`` at 10k issues.

Usage: .venv/bin/python scripts/bench_context.py [--issues 10000] [--rounds 200]

Builds a SQLite queue through the services (issues made in batches by ``insert_issue``,
the one creation path): most open, with labels; some claimed by other runs, some blocked
by hand, some waiting on another issue, some done; and one claim held by the caller. Then
times, alternating in the same run:

- baseline: one ``issue_ready`` as the tool runs it (``claims.ready``, limit 1);
- ``issue_get`` of the caller's issue (``issues.get``), a second reference;
- ``get_work_context`` (``work_context.gather``), without and with ``include_closed_recent``.

The same pair is then timed as MCP tool calls through an in-process client of a server
with the ``workflow-server`` profile (``issue_ready`` against ``get_work_context``; the server's
checkout is this process's working directory, so the call includes its branch lookup).

Reported: p50 and p99 of each, and each p50 as a ratio of its baseline's p50. The branch
lookup (one ``git symbolic-ref``) is also timed apart: a subprocess, not the queue.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from mcp import Client

from workq.config import Settings
from workq.domain.authority import Authority
from workq.schemas import IssueType, Priority
from workq.server.app import build_server
from workq.services.coding import work_context
from workq.services.handle import Queue
from workq.services.queue import blocking, claims, dependencies, issues, ready_queue
from workq.services.runtime import open_queue

ME = "run-me"
BATCH = 1_000


def build(q: Queue, count: int) -> int:
    """The queue; returns the number of the caller's claimed issue."""
    rng = random.Random(4)
    body = "Do the work.\n\n## Acceptance Criteria\n- [ ] it works\n- [ ] it is tested\n"
    made = 0
    while made < count:
        size = min(BATCH, count - made)

        def batch(conn: object, size: int = size) -> None:
            now = q.now()
            for _ in range(size):
                issues.insert_issue(
                    q,
                    conn,  # type: ignore[arg-type]
                    title=f"Issue {rng.randrange(10**6)}",
                    description=body,
                    priority=list(Priority)[rng.randrange(4)],
                    issue_type=IssueType.TASK,
                    agent="claude",
                    labels=[f"area-{rng.randrange(20)}"],
                    actor="bench",
                    now=now,
                )

        q.db.write(batch)
        made += size
    numbers = list(range(1, count + 1))
    rng.shuffle(numbers)
    picks = iter(numbers)
    for _ in range(count // 20):  # 5% claimed by others
        claims.claim(q, next(picks), Authority.of({f"run-{rng.randrange(8)}"}))
    for _ in range(count // 50):  # 2% blocked by hand
        blocking.block(
            q,
            next(picks),
            "waiting for a person",
            by=Authority.overriding("admin", who="admin"),
            actor="bench",
        )
    for _ in range(count // 50):  # 2% waiting on another issue
        dependencies.depend(q, blocker=next(picks), blocked=next(picks), actor="bench")
    for _ in range(count // 10):  # 10% done
        n = next(picks)
        claims.claim(q, n, Authority.of({"run-done"}))
        claims.complete(q, n, Authority.of({"run-done"}))
    mine = next(picks)
    claims.claim(q, mine, Authority.of({ME}))
    return mine


def figures(times: list[float]) -> tuple[float, float]:
    ordered = sorted(times)
    return statistics.median(ordered), ordered[max(int(len(ordered) * 0.99) - 1, 0)]


async def over_mcp(db: Path, rounds: int) -> dict[str, list[float]]:
    server = build_server(Settings(db_path=db, toolsets="default,workflow-server", run_id=ME))
    calls = {"issue_ready (MCP baseline)": "issue_ready", "get_work_context (MCP)": ""}
    times: dict[str, list[float]] = {name: [] for name in calls}
    async with Client(server, mode="legacy") as client:
        for _ in range(10):
            await client.call_tool("issue_ready", {})
            await client.call_tool("get_work_context", {})
        for _ in range(rounds):
            for name, tool in calls.items():
                start = time.perf_counter()
                result = await client.call_tool(tool or "get_work_context", {})
                times[name].append(time.perf_counter() - start)
                assert not result.is_error
    return times


def report(times: dict[str, list[float]], baseline: str) -> None:
    base = figures(times[baseline])[0]
    for name, values in times.items():
        p50, p99 = figures(values)
        print(f"{name:<42} {p50 * 1e3:8.2f} {p99 * 1e3:8.2f} {p50 / base:10.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--issues", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        q = open_queue(Settings(db_path=Path(tmp) / "bench.db"), migrate=True)
        started = time.perf_counter()
        mine = build(q, args.issues)
        print(f"built {args.issues} issues in {time.perf_counter() - started:.1f} s")
        cases: dict[str, Callable[[], object]] = {
            "issue_ready (baseline)": lambda: ready_queue.ready(q, limit=1, holder=ME),
            "issue_get": lambda: issues.get(q, mine),
            "get_work_context": lambda: work_context.gather(q, by=Authority.of({ME})),
            "get_work_context(include_closed_recent)": lambda: work_context.gather(
                q, by=Authority.of({ME}), include_closed_recent=True
            ),
        }
        found = work_context.gather(q, by=Authority.of({ME}), include_closed_recent=True)
        assert found.active_issue is not None and found.active_issue.number == mine
        assert found.next_up_issues and found.blockers and found.closed_recent
        times: dict[str, list[float]] = {name: [] for name in cases}
        for case in cases.values():  # warm up
            for _ in range(10):
                case()
        for _ in range(args.rounds):
            for name, case in cases.items():
                start = time.perf_counter()
                case()
                times[name].append(time.perf_counter() - start)
        q.db.dispose()
        mcp = asyncio.run(over_mcp(Path(tmp) / "bench.db", args.rounds))
        branch: list[float] = []
        for _ in range(50):
            start = time.perf_counter()
            work_context.checkout_branch(Path.cwd())
            branch.append(time.perf_counter() - start)
    print(f"{'case':<42} {'p50 ms':>8} {'p99 ms':>8} {'x baseline':>10}")
    report(times, "issue_ready (baseline)")
    report(mcp, "issue_ready (MCP baseline)")
    p50, p99 = figures(branch)
    print(f"{'branch lookup (git symbolic-ref)':<42} {p50 * 1e3:8.2f} {p99 * 1e3:8.2f}")


if __name__ == "__main__":
    main()
