"""8 processes claim issues whose touches overlap: no two holders ever hold overlapping
exclusive reservations (SQLite, and PostgreSQL when configured)."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import pytest

from workq.config import Settings
from workq.domain.globs import overlap
from workq.services.handle import Queue
from workq.services.queue import issues, reservations

ROOT = Path(__file__).resolve().parents[3]
GLOBS = [
    "src/**",
    "src/a/**",
    "src/a/x.py",
    "src/b/*.py",
    "**/*.py",
    "docs/**",
    "docs/*.md",
    "*.md",
    "README.md",
    "tests/**",
    "tests/a/*.py",
    "web/**/*.css",
]


@pytest.mark.slow
def test_eight_claimers_never_hold_overlapping_exclusive_paths(
    queue: Queue, settings: Settings
) -> None:
    for n in range(48):
        issues.create(queue, title=f"issue {n}", touches=[GLOBS[n % 12], GLOBS[(n * 5) % 12]])
    for n in range(16):
        issues.create(queue, title=f"free {n}")
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.services.queue.reserve_racer",
                settings.url,
                f"r{i}",
                "6",
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(8)
    ]
    claims_made = 0
    for proc in procs:
        out, err = proc.communicate(timeout=280)
        assert proc.returncode == 0, err
        assert "overlap" not in out, out
        claims_made += sum(1 for line in out.splitlines() if line.startswith("claimed"))
    # Every round of every racer claimed something; the free issues alone give 16 a round.
    assert claims_made >= 8 * 6
    assert reservations.list_live(queue) == []


def test_the_glob_set_of_the_race_does_overlap() -> None:
    # The race means something only if its globs collide.
    pairs = list(itertools.combinations(GLOBS, 2))
    assert sum(overlap(a, b) for a, b in pairs) >= 10
