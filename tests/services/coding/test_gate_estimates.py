"""How long a run of gates is expected to take before it starts (gate_estimates.py): a gate
never run counts its configured timeout, a gate run before its last run's duration; the
gates a merge would run are those without a passing run on the tip."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select, update

from tests.services.coding.gaterepo import GATES_TOML, commit, gated_repo
from workq.db.tables import gate_runs
from workq.domain.authority import Authority
from workq.services.coding import gate_estimates, gates
from workq.services.handle import Queue
from workq.services.queue import claims, issues
from workq.vcs import git

AGENT = Authority.of({"agent-a"})


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return gated_repo(tmp_path / "app")


def _issue(q: Queue) -> int:
    number = issues.create(q, title="gated work").number
    claims.claim(q, number, AGENT)
    return number


def test_a_gate_never_run_counts_its_timeout_then_its_last_duration(
    queue: Queue, repo: Path
) -> None:
    number = _issue(queue)
    specs = gate_estimates.to_run(queue, repo)
    assert [s.name for s in specs] == ["lint", "tests"]
    assert gate_estimates.expected_seconds(queue, number, specs) == 120.0  # 60 + 60
    assert gate_estimates.longer_than_a_moment(queue, number, specs)
    assert gate_estimates.longest_seconds(specs) == 120.0
    gates.run(queue, number, repo, by=AGENT)
    quick = gate_estimates.expected_seconds(queue, number, specs)
    assert quick < gate_estimates.MOMENT_SECONDS  # two small scripts
    assert not gate_estimates.longer_than_a_moment(queue, number, specs)
    # Another issue of the same repository (none) is judged by the same runs.
    other = _issue(queue)
    assert gate_estimates.expected_seconds(queue, other, specs) == quick
    # A run that took long makes the next one a task; never more than the timeout.
    with queue.db.read() as conn:
        finished = conn.execute(
            select(gate_runs.c.finished_at).where(gate_runs.c.gate == "tests")
        ).scalar_one()
    queue.db.write(
        lambda conn: conn.execute(
            update(gate_runs)
            .where(gate_runs.c.gate == "tests")
            .values(started_at=finished - timedelta(seconds=600))
        )
    )
    assert 60.0 <= gate_estimates.expected_seconds(queue, number, specs) < 61.0


def test_only_the_gates_asked_for_count(queue: Queue, repo: Path) -> None:
    number = _issue(queue)
    assert [s.name for s in gate_estimates.to_run(queue, repo, gates=["tests"])] == ["tests"]
    assert [s.name for s in gate_estimates.to_run(queue, repo, include_tests=False)] == ["lint"]
    # The lint takes only src/**: given README.md alone, it would be skipped.
    named = gate_estimates.to_run(queue, repo, files=["README.md"])
    assert [s.name for s in named] == ["tests"]
    assert gate_estimates.expected_seconds(queue, number, []) == 0.0


def test_a_merge_runs_the_gates_its_tip_has_no_passing_run_of(queue: Queue, repo: Path) -> None:
    queue.tests_gate = gates.EVIDENCE
    number = _issue(queue)
    tip = git.head(repo)
    assert [s.name for s in gate_estimates.to_run_for_merge(queue, number, repo, tip)] == [
        "lint",
        "tests",
    ]
    gates.run(queue, number, repo, by=AGENT, gates=["lint"])
    assert [s.name for s in gate_estimates.to_run_for_merge(queue, number, repo, tip)] == ["tests"]
    # A stored failure on the tip refuses the merge at once: nothing runs.
    bad = commit(repo, {"src/app.py": "x = 2  # BAD\n"})
    gates.run(queue, number, repo, by=AGENT)
    assert gate_estimates.to_run_for_merge(queue, number, repo, bad) == []
    queue.tests_gate = gates.TRUST
    assert gate_estimates.to_run_for_merge(queue, number, repo, tip) == []
    assert "timeout = 60" in GATES_TOML
