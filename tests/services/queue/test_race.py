"""Many OS processes on one database: every issue is claimed exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import text

from tests.storage import assert_intact_at
from workq.config import Settings
from workq.domain.authority import Authority
from workq.services.handle import Queue
from workq.services.queue import claims, issues
from workq.services.runtime import open_queue

ROOT = Path(__file__).resolve().parents[3]


def _fill(queue: Queue, count: int) -> None:
    for n in range(count):
        issues.create(
            queue, title=f"issue {n}", priority=("urgent", "high", "medium", "low")[n % 4]
        )


def _claimed_numbers(out: str) -> list[int]:
    return [int(line.split()[1]) for line in out.splitlines() if line.startswith("claimed")]


def _racers(url: str, count: int, *extra: str) -> list[subprocess.Popen[str]]:
    return [
        subprocess.Popen(
            [sys.executable, "-m", "tests.services.queue.racer", url, f"racer-{i}", *extra],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(count)
    ]


@pytest.mark.slow
def test_eight_processes_claim_every_issue_exactly_once(queue: Queue, settings: Settings) -> None:
    _fill(queue, 400)
    procs = _racers(settings.url, 8, "--complete")
    claimed: Counter[int] = Counter()
    for proc in procs:
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err
        assert "locked" not in err and "BUSY" not in err
        claimed.update(
            int(line.split()[1]) for line in out.splitlines() if line.startswith("claimed")
        )
    assert sorted(claimed) == list(range(1, 401))
    assert set(claimed.values()) == {1}
    assert claims.claim_next(queue, Authority.of({"late"})) is None


@pytest.mark.slow
def test_kill_nine_mid_storm_leaves_a_consistent_database(queue: Queue, settings: Settings) -> None:
    _fill(queue, 3000)
    procs = _racers(settings.url, 4, "--complete", "--lease", "5")
    deadline = time.monotonic() + 60
    victim = procs[0]
    assert victim.stdout is not None
    while time.monotonic() < deadline:  # wait until the victim is mid-storm
        line = victim.stdout.readline()
        if line.startswith("completed") and int(line.split()[1]) > 0:
            break
    os.kill(victim.pid, signal.SIGKILL)
    victim.communicate(timeout=30)
    claimed: Counter[int] = Counter()
    for proc in procs[1:]:
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err
        claimed.update(_claimed_numbers(out))
    fresh = open_queue(settings, migrate=False)
    try:
        with fresh.db.read() as conn:
            half = conn.execute(
                text(
                    "SELECT count(*) FROM issues WHERE (status = 'in_progress') != "
                    "(claimed_by IS NOT NULL)"
                )
            ).scalar()
            assert half == 0
            held = conn.execute(
                text("SELECT number, claimed_by FROM issues WHERE status = 'in_progress'")
            ).all()
        # At most the victim's one claim is left, held by the dead process; the
        # lease hands it to the next claimer once it expires.
        assert all(holder == "racer-0" for _, holder in held) and len(held) <= 1
        assert max(claimed.values(), default=1) == 1
        if held:
            later = datetime.now(UTC) + timedelta(seconds=10)
            fresh.clock = lambda: later
            rescued = claims.claim_next(fresh, Authority.of({"rescuer"}))
            assert rescued is not None and rescued.number == held[0][0]
            assert rescued.previous_holder == "racer-0"
    finally:
        fresh.db.dispose()
    assert_intact_at(settings.url)
