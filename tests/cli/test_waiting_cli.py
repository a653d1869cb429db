"""`workq claim-next --wait` and `workq watch` on one SQLite file: the one that waits is a
real process, woken by commands run in this process."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.workq_cli import ACTOR, WORKQ, workq

LIMIT = 60


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``workq --db queue.db ARGS``, in this process."""
    return workq("--db", "queue.db", *args)


def start(cwd: Path, *args: str) -> subprocess.Popen[str]:
    """``workq --db queue.db ARGS`` as a real process, running on."""
    return subprocess.Popen(
        [WORKQ, "--db", "queue.db", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "WORKQ_ACTOR": ACTOR},
    )


def test_claim_next_waits_for_an_issue_created_by_another_process(tmp_path: Path) -> None:
    assert cli("init").returncode == 0
    waiter = start(tmp_path, "claim-next", "--wait", str(LIMIT), "--run-id", "w", "--json")
    try:
        assert cli("create", "arrives later").returncode == 0
        out, err = waiter.communicate(timeout=LIMIT)
    finally:
        waiter.kill()
    assert waiter.returncode == 0, err
    claimed = json.loads(out)
    assert claimed["number"] == 1 and claimed["claimed_by"] == "w" and claimed["fence"] == 1


def test_a_wait_that_sees_nothing_ends_at_its_bound() -> None:
    assert cli("init").returncode == 0
    done = cli("claim-next", "--wait", "1")
    assert done.returncode == 2 and "No ready issues available" in done.stdout
    assert cli("ready", "--wait", "1").returncode == 0
    refused = cli("claim-next", "--wait", "301")
    assert refused.returncode == 2 and "--wait" in refused.stderr


def test_watch_prints_a_line_per_change(tmp_path: Path) -> None:
    assert cli("create", "first").returncode == 0
    watcher = start(tmp_path, "watch", "--since", "0", "--count", "3")
    try:
        assert cli("create", "second").returncode == 0
        assert cli("claim", "2", "--run-id", "agent-9").returncode == 0
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
