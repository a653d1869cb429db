"""Benchmark the GitHub mirror: what the outbox costs a local mutation, a first push of many
issues against the fake GitHub at its rate limit, and a pass with nothing to change.

Usage: .venv/bin/python scripts/bench_sync.py [--ops 2000] [--issues 1000] [--scale 50]

1. Outbox cost. The same mutations (create, update, claim, complete) on a SQLite file with
   no hook, with the hook and no mirror configured (every user's default), and with a mirror
   configured (each mutation upserts its outbox row). Rounds alternate; medians are used.
2. First push of --issues issues, against the in-process fake with GitHub's documented
   content-creation limit of 80 writes a minute (the fake's write budget):
   a. "paced": the worker's default of one write a second, run on a clock shrunk --scale
      times (budget 80 per 60/scale s, one write per 1/scale s), projected back to real time;
   b. "unpaced": no pacing at all, so the worker runs into the limit; its waits are skipped
      with the fake's advance_clock and the queue's clock moved by the same amount, so the
      GitHub time is simulated and the wall time is the worker's own work.
3. No-change passes: every issue queued again and pushed (reads of the local file only, no
   request), and an import that GitHub answers with 304.

Figures vary by 20-30% between runs on a shared machine; compare ratios. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Connection

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.github_fake.server import FakeGitHub

from workq.config import Settings
from workq.domain.authority import Authority
from workq.github.importer import Importer
from workq.github.sync import Session, connect
from workq.github.worker import Options
from workq.services.handle import Queue
from workq.services.queue import claims, issues
from workq.services.runtime import open_queue
from workq.services.sync import mirror_target, outbox, outbox_rows, sync_status

REPO = "acme/widgets"
GITHUB_WRITES_PER_MINUTE = 80


def _queue(path: Path) -> Queue:
    return open_queue(Settings(db_path=path, lease_seconds=3600), migrate=True)


def _mutations(q: Queue, ops: int) -> float:
    """Seconds per mutation over ``ops`` mutations: creates, updates, claims, completes."""
    quarter = ops // 4
    started = time.perf_counter()
    numbers = [issues.create(q, title=f"issue {n}").number for n in range(quarter)]
    for n in numbers:
        issues.update_issue(
            q, n, title=f"renamed {n}", by=Authority.overriding("bench", who="bench")
        )
    for n in numbers:
        claims.claim(q, n, Authority.of({"bench"}))
    for n in numbers:
        claims.complete(q, n, Authority.of(["bench"]))
    return (time.perf_counter() - started) / (quarter * 4)


def outbox_cost(workdir: Path, ops: int, rounds: int) -> dict[str, float]:
    modes: dict[str, list[float]] = {"off": [], "no mirror": [], "mirror": []}
    order = list(modes)
    for r in range(-1, rounds):  # round -1 warms up and is not counted
        order = order[1:] + order[:1]  # each mode goes first in turn
        for mode in order:
            q = _queue(workdir / f"cost-{mode}-{r}.db")
            if mode == "off":
                q.on_change.clear()
            if mode == "mirror":
                mirror_target.configure(q, REPO)
            took = _mutations(q, ops)
            if r >= 0:
                modes[mode].append(took)
            if mode == "mirror":
                assert sync_status.status(q).pending == ops // 4
            q.db.dispose()
    return {mode: statistics.median(times) for mode, times in modes.items()}


class _HttpTimer:
    """Wraps the client's HTTP send to add up the time spent waiting for the fake."""

    def __init__(self, session: Session) -> None:
        http = session.client.transport.http
        self.send = http.send
        self.seconds = 0.0
        http.send = self  # type: ignore[method-assign]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return self.send(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - started


def hook_cost(workdir: Path, calls: int = 20_000) -> dict[str, float]:
    """The outbox statement alone, in one transaction: microseconds a call."""
    found: dict[str, float] = {}
    for mode in ("no mirror", "mirror"):
        q = _queue(workdir / f"hook-{mode}.db")
        if mode == "mirror":
            mirror_target.configure(q, REPO)

        now = q.now()

        def work(conn: Connection, now: datetime = now) -> float:
            started = time.perf_counter()
            for n in range(calls):
                outbox.queue_change(conn, f"{n % 500:032x}", n % 500 + 1, "updated", now)
            return time.perf_counter() - started

        found[mode] = q.db.write(work) / calls * 1e6
        q.db.dispose()
    return found


def _session(q: Queue, fake: FakeGitHub, options: Options) -> Session:
    env = {"GITHUB_TOKEN": fake.token, "GITHUB_API_URL": fake.url}
    return connect(q, REPO, env=env, options=options, timeout=10)


def _fill(q: Queue, count: int) -> None:
    for n in range(count):
        issues.create(q, title=f"issue {n}", priority=("high", "medium", "low")[n % 3])


def first_push_paced(workdir: Path, count: int, scale: float) -> dict[str, float]:
    with FakeGitHub() as fake:
        fake.set_write_budget(GITHUB_WRITES_PER_MINUTE, window=60 / scale)
        q = _queue(workdir / "paced.db")
        _fill(q, count)
        session = _session(q, fake, Options(write_interval=1 / scale))
        http = _HttpTimer(session)
        slept = 0.0
        sleep = session.worker.pace.sleep

        def timed_sleep(seconds: float) -> None:
            nonlocal slept
            slept += seconds
            sleep(seconds)

        session.worker.pace.sleep = timed_sleep
        started = time.perf_counter()
        report = session.worker.push_pass()
        wall = time.perf_counter() - started
        refused = sum(1 for w in fake.writes() if w.status == 403)
        session.close()
        q.db.dispose()
    # At GitHub's pace the work and the HTTP time of a write fit in its one-second spacing.
    own_work = max(0.0, wall - slept - http.seconds)
    return {
        "http_s": http.seconds,
        "created": report.created,
        "writes": report.writes,
        "refused": refused,
        "wall_s": wall,
        "own_work_s": own_work,
        "projected_real_s": report.writes * max(1.0, (own_work + http.seconds) / report.writes),
    }


def first_push_unpaced(workdir: Path, count: int) -> dict[str, float]:
    """No pacing: the worker meets the limit and slows down by itself. Every wait (its own
    pacing, rows waiting for retry-after) is skipped by moving both clocks instead."""
    with FakeGitHub() as fake:
        fake.set_write_budget(GITHUB_WRITES_PER_MINUTE, window=60)
        q = _queue(workdir / "unpaced.db")
        _fill(q, count)
        skipped = 0.0
        shift = timedelta(0)
        base = q.clock

        def now() -> datetime:
            return base() + shift

        def wait(seconds: float) -> None:
            nonlocal skipped, shift
            fake.advance_clock(seconds)
            shift += timedelta(seconds=seconds)
            skipped += seconds

        q.clock = now
        session = _session(q, fake, Options(write_interval=0))
        http = _HttpTimer(session)
        session.worker.pace.sleep = wait
        session.worker.pace.clock = lambda: time.monotonic() + skipped
        started = time.perf_counter()
        created = writes = passes = 0
        while True:
            report = session.worker.push_pass()
            created += report.created
            writes += report.writes
            passes += 1
            due_at = outbox_rows.next_due_at(q)
            if due_at is None:
                break
            if report.held_until is not None:  # the worker holds every request until then
                due_at = max(due_at, report.held_until)
            wait(max(0.0, (due_at - q.now()).total_seconds()) + 0.01)
        wall = time.perf_counter() - started
        refused = sum(1 for w in fake.writes() if w.status == 403)
        issues_on_github = len(fake.issues())
        session.close()
        q.db.dispose()
    return {
        "created": created,
        "on_github": issues_on_github,
        "writes": writes,
        "refused": refused,
        "passes": passes,
        "wall_s": wall,
        "http_s": http.seconds,
        "simulated_github_s": wall + skipped,
    }


def no_change(workdir: Path, count: int) -> dict[str, float]:
    with FakeGitHub() as fake:
        q = _queue(workdir / "nochange.db")
        _fill(q, count)
        session = _session(q, fake, Options(write_interval=0))
        session.worker.push_pass()
        Importer(session.worker).run()  # reads the list once; records the probe's ETag
        fake.clear_requests()

        started = time.perf_counter()
        empty = session.worker.push_pass()
        empty_s = time.perf_counter() - started

        queued = outbox.queue_all(q)
        started = time.perf_counter()
        rescan = session.worker.push_pass()
        rescan_s = time.perf_counter() - started
        rescan_requests = len(fake.requests())

        started = time.perf_counter()
        imported = Importer(session.worker).run()
        import_s = time.perf_counter() - started
        import_requests = len(fake.requests()) - rescan_requests
        session.close()
        q.db.dispose()
    assert empty.rows == 0 and rescan.writes == 0 and imported.not_modified
    return {
        "empty_outbox_ms": empty_s * 1000,
        "rescan_rows": queued,
        "rescan_s": rescan_s,
        "rescan_requests": rescan_requests,
        "import_ms": import_s * 1000,
        "import_requests": import_requests,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=2000, help="mutations per cost round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--issues", type=int, default=1000)
    parser.add_argument("--scale", type=float, default=50.0, help="clock shrink for 'paced'")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-sync-") as tmp:
        workdir = Path(tmp)
        cost = outbox_cost(workdir, args.ops, args.rounds)
        off = cost["off"]
        print(f"Outbox cost ({args.ops} mutations x {args.rounds} rounds, median per mutation):")
        for mode, seconds in cost.items():
            print(f"  {mode:<10} {seconds * 1e6:8.1f} us   {seconds / off:5.2f}x of off")

        hook = hook_cost(workdir)
        print(
            f"  the outbox statement alone: {hook['no mirror']:.1f} us with no mirror, "
            f"{hook['mirror']:.1f} us with one (upserting a row)"
        )

        paced = first_push_paced(workdir, args.issues, args.scale)
        print(
            f"First push of {args.issues} issues, paced at 1 write/s, budget "
            f"{GITHUB_WRITES_PER_MINUTE}/min (clock shrunk {args.scale:g}x):"
        )
        print(
            f"  {paced['created']:.0f} created, {paced['writes']:.0f} writes, "
            f"{paced['refused']:.0f} refused (403); wall {paced['wall_s']:.1f} s: "
            f"{paced['http_s']:.1f} s waiting for the fake, "
            f"{paced['own_work_s']:.1f} s the worker's own work "
            f"({paced['own_work_s'] / max(1, paced['created']) * 1000:.1f} ms an issue)"
        )
        print(
            f"  -> {paced['projected_real_s'] / 60:.1f} min at GitHub's real pace "
            "(one write a second; each write's work and HTTP time fit inside that second)"
        )

        unpaced = first_push_unpaced(workdir, args.issues)
        print(
            f"First push of {args.issues} issues, unpaced, into the {GITHUB_WRITES_PER_MINUTE}/min "
            "budget (waits skipped with advance_clock):"
        )
        print(
            f"  {unpaced['created']:.0f} created ({unpaced['on_github']:.0f} on GitHub), "
            f"{unpaced['writes']:.0f} writes, {unpaced['refused']:.0f} refused (403), "
            f"{unpaced['passes']:.0f} passes; wall {unpaced['wall_s']:.1f} s "
            f"({unpaced['http_s']:.1f} s waiting for the fake), "
            f"simulated GitHub time {unpaced['simulated_github_s'] / 60:.1f} min"
        )

        quiet = no_change(workdir, args.issues)
        print(f"No-change passes over {args.issues} mirrored issues:")
        print(f"  nothing queued:         {quiet['empty_outbox_ms']:.1f} ms, 0 requests")
        print(
            f"  all {quiet['rescan_rows']:.0f} rows queued again: {quiet['rescan_s']:.2f} s, "
            f"{quiet['rescan_requests']:.0f} requests, 0 writes"
        )
        print(
            f"  import:                 {quiet['import_ms']:.1f} ms, "
            f"{quiet['import_requests']:.0f} request (304 to the ETag probe)"
        )


if __name__ == "__main__":
    main()
