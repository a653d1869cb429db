"""Every benchmark in scripts/ still runs, at a toy size: a schema change once broke one
without a test noticing. The figures of these runs mean nothing and are not looked at; each
script must only finish and print its table."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from sqlalchemy import event

from workq.config import Settings
from workq.server.app import build_server

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
# The smallest arguments each script accepts; a script missing here fails the test below.
TOY: dict[str, tuple[str, ...]] = {
    "bench_agit.py": ("--files", "100", "--sizes", "1", "--per-agent", "1"),
    "bench_board.py": ("--issues", "200", "--rounds", "2"),
    "bench_context.py": ("--issues", "100", "--rounds", "2"),
    "bench_core.py": ("--sizes", "200", "--claims", "20", "--samples", "20"),
    "bench_docs_search.py": ("--docs", "30", "--rounds", "2", "--cold", "1"),
    "bench_fleet.py": ("--agents", "3", "--servers", "1,2", "--pairs", "6"),
    "bench_http.py": ("--pairs", "5", "--rounds", "1"),
    "bench_landing.py": ("--issues", "1", "--rounds", "1"),
    "bench_mcp.py": ("--calls", "10", "--spawns", "1"),
    "bench_notices.py": ("--calls", "5"),
    "bench_reserve.py": ("--claims", "20"),
    "bench_tasks.py": ("--waiters", "3", "--wakes", "2", "--idle", "0.5"),
    "bench_sync.py": ("--ops", "50", "--rounds", "1", "--issues", "50"),
    "bench_transfer.py": ("--issues", "200"),
    "bench_writers.py": ("--writers", "1,2", "--seconds", "0.5", "--held", "20", "--issues", "50"),
    "bench_wait.py": (
        "--waiters",
        "1",
        "--rounds",
        "1",
        "--idle-seconds",
        "0.5",
        "--idle-calls",
        "2",
        "--served",
        "2",
    ),
}
# Scripts that need a PostgreSQL server of their own (WORKQ_TEST_PG_URL).
POSTGRES_ONLY = {
    "bench_pg.py": ("--issues", "1000", "--seconds", "0.5", "--rounds", "1", "--workers", "1")
}


def test_every_benchmark_has_a_toy_size() -> None:
    scripts = {p.name for p in (ROOT / "scripts").glob("bench_*.py")}
    assert scripts == set(TOY) | set(POSTGRES_ONLY)


def _run(script: str, args: tuple[str, ...], tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / script), *args],
        cwd=tmp_path,
        env={**os.environ, "TMPDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert done.stdout.strip(), done.stderr[-2000:]


@pytest.mark.parametrize("script", sorted(TOY))
def test_the_benchmark_runs(script: str, tmp_path: Path) -> None:
    _run(script, TOY[script], tmp_path)


@pytest.mark.skipif(not os.environ.get("WORKQ_TEST_PG_URL"), reason="needs WORKQ_TEST_PG_URL")
@pytest.mark.parametrize("script", sorted(POSTGRES_ONLY))
def test_the_postgres_benchmark_runs(script: str, tmp_path: Path) -> None:
    _run(script, POSTGRES_ONLY[script], tmp_path)


def test_bench_http_reports_a_floor_that_read_no_cpu_instead_of_dividing_by_zero() -> None:
    """At toy size a CPU reading can be 0 (the kernel counts in 10 ms ticks)."""
    spec = importlib.util.spec_from_file_location("bench_http", ROOT / "scripts" / "bench_http.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.ratio(1.0, 0.0).startswith("n/a")
    assert module.ratio(3.0, 2.0) == "1.50x"
    # Each round's ratio, then their median; a round whose floor read 0 is left out.
    costs = {("w", "m"): [2.0, 3.0, 4.0], ("f", "m"): [1.0, 2.0, 0.0]}
    assert module.paired(costs, "w", "f", "m").startswith("1.75x (median of 2 rounds")
    assert module.paired({("w", "m"): [1.0], ("f", "m"): [0.0]}, "w", "f", "m").startswith("n/a")


def test_the_suite_says_why_its_first_minutes_are_slow() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-p",
            "no:xdist",
            str(ROOT / "tests" / "test_layers.py"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "tests marked slow" in done.stdout and "run first" in done.stdout, done.stdout


# SQL statements SQLite runs for one `issue_claim_next` and one `issue_complete` through the
# tools, transaction control included (counted 2026-11-27 with SQLite's trace callback,
# which sees the hot path's statements on the driver's cursor too, and shows a statement
# again when a trigger of it runs: the guard that an issue in progress has a holder and a
# lease). A count may only go down: write the new one here when it does. Counted first at
# 11 and 13; the claim then read its issue's repository after committing (now a column of
# its scan, as is the plan gate) and the completion asked for a worktree in a transaction
# of its own (now inside its own) and the plan gate apart (now a column of its row's read).
STATEMENTS = {"claim": 7, "complete": 10}


def _traced(db: Any, sent: list[str]) -> Callable[[], None]:
    """Record every statement SQLite runs on ``db``'s connections (each thread's kept one,
    and any opened meanwhile) until the returned function is called."""

    def seen(statement: str) -> None:
        if not threading.current_thread().name.startswith("workq-"):  # not a server's own
            sent.append(statement)  # background work (renewals, the watch, notices)

    def trace(dbapi: Any, *_: Any) -> None:
        dbapi.set_trace_callback(seen)

    engines = [e for e in (db.engine, db._read_engine) if e is not None]
    kept = [c.connection.dbapi_connection for c in db._reader_conns]
    for engine in engines:
        event.listen(engine, "connect", trace)
    for dbapi in kept:
        trace(dbapi)

    def stop() -> None:
        for engine in engines:
            event.remove(engine, "connect", trace)
        for dbapi in kept:
            dbapi.set_trace_callback(None)

    return stop


@pytest.mark.anyio
async def test_statements_per_claim_and_completion_do_not_grow(db_path: Path) -> None:
    server = build_server(Settings(db_path=db_path, plans_dir=db_path.parent / "plans"))
    sent: list[str] = []
    async with Client(server) as client:
        for title in ("one", "two", "three"):
            await client.call_tool("issue_create", {"title": title})
        database = server.state.queue().db
        first = await client.call_tool("issue_claim_next", {})  # warm: caches, prepared
        await client.call_tool("issue_complete", {"number": first.structured_content["number"]})
        stop = _traced(database, sent)
        try:
            claimed = await client.call_tool("issue_claim_next", {})
            claim = len(sent)
            number = (claimed.structured_content or {})["number"]
            await client.call_tool("issue_complete", {"number": number})
            complete = len(sent) - claim
        finally:
            stop()
    counted = {"claim": claim, "complete": complete}
    print(f"\n{counted}", *sent, sep="\n  ")
    grew = {k: v for k, v in counted.items() if v > STATEMENTS[k]}
    assert not grew, f"more SQL statements than {STATEMENTS}: {counted}\n" + "\n".join(sent)
    # The plan gate asks for the caller's one run id, not eight slots padded with NULL (an
    # IN list of eight cost a claim more than its ready scan: door._in_plan).
    gates = re.findall(r"plans\.active_run IN \(([^)]*)\)", "\n".join(sent))
    assert gates and all(g.count(",") == 0 for g in gates), gates
