"""Eight OS processes on one PostgreSQL database: claims are exactly-once (takeovers of
expired leases included), and under a storm of every mutation the counter, the blocked
counts and the history stay exact."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from datetime import timedelta

import pytest
from sqlalchemy import text

from tests.postgres.servers import ROOT
from workq.domain.authority import Authority
from workq.services.handle import Queue
from workq.services.maintenance import maintenance
from workq.services.queue import claims, issues

PROCESSES = 8


def _race(url: str, mode: str, *extra: str) -> list[str]:
    """Start the workers, let them all go at once, return each one's output."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.postgres.worker", url, f"racer-{i}", mode, *extra]
            + ([str(i)] if mode != "claim" else []),
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(PROCESSES)
    ]
    for proc in procs:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready", proc.stderr
    outputs = []
    for proc in procs:
        out, err = proc.communicate("go\n", timeout=240)
        assert proc.returncode == 0, out + err
        outputs.append(out)
    return outputs


@pytest.mark.slow
def test_eight_processes_claim_every_issue_once_with_takeovers(
    pg_queue: Queue, pg_url: str
) -> None:
    for n in range(400):
        issues.create(pg_queue, title=f"issue {n}", priority=("urgent", "low")[n % 2])
    # Half of them were claimed an hour ago by an agent that died: their leases are over.
    now = pg_queue.clock
    pg_queue.clock = lambda: now() - timedelta(hours=1)
    pg_queue.lease_seconds = 60
    for _ in range(200):
        assert claims.claim_next(pg_queue, Authority.of({"dead-agent"})) is not None
    pg_queue.clock = now

    outputs = _race(pg_url, "claim")
    claimed: Counter[int] = Counter()
    takeovers = 0
    for out in outputs:
        for line in out.splitlines():
            _, number, _, previous = line.split()
            claimed[int(number)] += 1
            takeovers += previous == "dead-agent"
    assert sorted(claimed) == list(range(1, 401))
    assert set(claimed.values()) == {1}
    assert takeovers == 200

    with pg_queue.db.read() as conn:
        kinds = Counter(
            kind
            for (kind,) in conn.execute(text("SELECT kind FROM events WHERE actor LIKE 'racer-%'"))
        )
        holders: dict[int, str] = dict(
            conn.execute(text("SELECT number, claimed_by FROM issues")).all()
        )
    assert kinds == {"claimed": 200, "claim_takeover": 200}
    for i, out in enumerate(outputs):
        for line in out.splitlines():
            assert holders[int(line.split()[1])] == f"racer-{i}"


@pytest.mark.slow
def test_a_storm_of_every_mutation_keeps_counts_counter_and_history_exact(
    pg_queue: Queue, pg_url: str
) -> None:
    for n in range(40):
        issues.create(pg_queue, title=f"seed {n}")
    _race(pg_url, "mixed")

    report = maintenance.doctor(pg_queue)
    assert report.ok, report.findings  # blocked counts equal the graph; claims consistent
    with pg_queue.db.read() as conn:
        numbers = [n for (n,) in conn.execute(text("SELECT number FROM issues"))]
        counter = conn.execute(text("SELECT value FROM counters")).scalar_one()
        created = [
            n for (n,) in conn.execute(text("SELECT number FROM events WHERE kind = 'created'"))
        ]
        deleted = [
            n for (n,) in conn.execute(text("SELECT number FROM events WHERE kind = 'deleted'"))
        ]
        done_without_event = conn.execute(
            text(
                "SELECT count(*) FROM issues i WHERE status = 'done' AND NOT EXISTS "
                "(SELECT 1 FROM events e WHERE e.issue_id = i.id AND e.kind = 'completed')"
            )
        ).scalar_one()
    assert sorted(created) == list(range(1, counter + 1))  # no gap, no number used twice
    assert sorted(numbers + deleted) == sorted(created)
    assert done_without_event == 0


@pytest.mark.slow
def test_edges_raced_against_completions_keep_blocked_counts_exact(
    pg_queue: Queue, pg_url: str
) -> None:
    for n in range(8):
        issues.create(pg_queue, title=f"hot {n}")
    _race(pg_url, "graph")
    report = maintenance.doctor(pg_queue)
    assert report.ok, report.findings
