"""`workq claim-next --wait` and `workq watch`, as real processes on one SQLite file."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.plan.conftest import WORKQ

LIMIT = 60
ENV = {**os.environ, "WORKQ_ACTOR": "tester"}


def workq(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [WORKQ, "--db", "queue.db", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=LIMIT,
        env=ENV,
    )


def start(cwd: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [WORKQ, "--db", "queue.db", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )


def test_claim_next_waits_for_an_issue_created_by_another_process(tmp_path: Path) -> None:
    assert workq(tmp_path, "init").returncode == 0
    waiter = start(tmp_path, "claim-next", "--wait", str(LIMIT), "--run-id", "w", "--json")
    try:
        assert workq(tmp_path, "create", "arrives later").returncode == 0
        out, err = waiter.communicate(timeout=LIMIT)
    finally:
        waiter.kill()
    assert waiter.returncode == 0, err
    claimed = json.loads(out)["issue"]
    assert claimed["number"] == 1 and claimed["claimed_by"] == "w" and claimed["fence"] == 1


def test_a_wait_that_sees_nothing_ends_at_its_bound(tmp_path: Path) -> None:
    assert workq(tmp_path, "init").returncode == 0
    done = workq(tmp_path, "claim-next", "--wait", "1")
    assert done.returncode == 2 and "No ready issues available" in done.stdout
    assert workq(tmp_path, "ready", "--wait", "1").returncode == 0
    refused = workq(tmp_path, "claim-next", "--wait", "301")
    assert refused.returncode == 2 and "--wait" in refused.stderr


def test_watch_prints_a_line_per_change(tmp_path: Path) -> None:
    assert workq(tmp_path, "create", "first").returncode == 0
    watcher = start(tmp_path, "watch", "--since", "0", "--count", "3")
    try:
        assert workq(tmp_path, "create", "second").returncode == 0
        assert workq(tmp_path, "claim", "2", "--run-id", "agent-9").returncode == 0
        out, err = watcher.communicate(timeout=LIMIT)
    finally:
        watcher.kill()
    assert watcher.returncode == 0, err
    lines = out.splitlines()
    assert [line.split("  ", 1)[1] for line in lines] == [
        "#1 created by tester",
        "#2 created by tester",
        "#2 claimed by agent-9",
    ]
