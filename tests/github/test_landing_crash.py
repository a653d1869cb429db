"""kill -9 of the landing worker (the real ``workq sync github --once`` in a subprocess) in
each step of a landing: during the push, after GitHub created the pull request but before
its answer arrived, while the checks are read, after GitHub merged it but before its answer
arrived. A rerun finishes the job: one pull request, merged once, the issue completed once,
its worktree and branch gone."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.github.landing_helpers import Origin, make_origin, sync_worker, worker_log
from tests.github.tools_helpers import git
from tests.github_fake.server import FakeGitHub
from tests.storage import assert_intact
from workq.schemas import Status
from workq.services.queue import issues, notes
from workq.services.workspaces import landings, worktrees

DEADLINE = 60.0


def _until(what: Callable[[], bool], process: subprocess.Popen[bytes], db: Path) -> None:
    deadline = time.monotonic() + DEADLINE
    while not what():
        if process.poll() is not None:
            raise AssertionError(f"the worker ended first: {worker_log(db)}")
        assert time.monotonic() < deadline, "the worker never reached the step"
        time.sleep(0.05)


def _asked(fake: FakeGitHub, method: str, suffix: str, *, applied: bool) -> Callable[[], bool]:
    """Whether the fake received (and, with ``applied``, carried out) that request."""
    return lambda: any(
        r.method == method and r.path.endswith(suffix) and (r.applied or not applied)
        for r in fake.requests()
    )


def _slow_push(origin: Origin) -> Path:
    """Make the origin's pre-receive hook wait (while a flag file exists) after it says it
    started: a push that takes as long as the test wants. The flag's path."""
    hook = origin.bare / "hooks" / "pre-receive"
    flag, started = origin.bare.parent / "slow", origin.bare.parent / "pushing"
    lines = hook.read_text().splitlines()
    wait = f'touch "{started}"; while [ -f "{flag}" ]; do sleep 0.1; done'
    hook.write_text("\n".join([lines[0], wait, *lines[1:]]) + "\n")
    flag.touch()
    return flag


STEPS = ["push", "after create", "checks", "after merge"]


@pytest.mark.parametrize("step", STEPS)
def test_kill_9_in_each_step_then_a_rerun_lands_once(
    tmp_path: Path, fake_github: FakeGitHub, step: str
) -> None:
    db = tmp_path / "queue.db"  # make_origin's
    origin = make_origin(tmp_path, fake_github)
    try:
        number = origin.issue("Crash me", "crash.py", "crash = 1\n")
        info = worktrees.get_for_issue(origin.q, number)
        assert info is not None
        origin.land(number)
        flag: Path | None = None
        if step == "push":
            flag = _slow_push(origin)
            reached = (tmp_path / "pushing").exists
        elif step == "after create":
            fake_github.inject_fault(
                "POST", "/repos/*/*/pulls", kind="timeout", when="after", delay=60
            )
            reached = _asked(fake_github, "POST", "/pulls", applied=True)
        elif step == "checks":
            fake_github.inject_fault(
                "GET", "/repos/*/*/commits/*/check-runs", kind="timeout", delay=60
            )
            reached = _asked(fake_github, "GET", "/check-runs", applied=False)
        else:
            fake_github.inject_fault(
                "PUT", "/repos/*/*/pulls/*/merge", kind="timeout", when="after", delay=60
            )
            reached = _asked(fake_github, "PUT", "/merge", applied=True)

        worker = sync_worker(db, fake_github, "--once")
        try:
            _until(reached, worker, db)
        finally:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(timeout=30)
        fake_github.clear_faults()
        if flag is not None:
            flag.unlink()
        if step == "after merge":  # GitHub merged it; the worker never heard
            assert [p["merged"] for p in fake_github.pulls()] == [True]
            assert issues.get(origin.q, number).status == Status.IN_PROGRESS

        for _ in range(3):  # a rerun (or the next pass) finishes the job
            rerun = sync_worker(db, fake_github, "--once")
            assert rerun.wait(timeout=120) == 0, worker_log(db)
            if landings.require(origin.q, number).state == "landed":
                break
        done = landings.require(origin.q, number)
        assert done.state == "landed", done
        (pull,) = fake_github.pulls()
        assert pull["merged"] and pull["number"] == done.pr_number
        assert done.merge_sha == git(origin.bare, "rev-parse", "main")
        assert git(origin.bare, "rev-list", "--count", "--merges", "main") == "1"  # once
        assert "crash.py" in origin.main_files()
        assert issues.get(origin.q, number).status == Status.DONE
        kinds = [e.kind for e in notes.history(origin.q, number)]
        assert kinds.count("completed") == 1 and kinds.count("worktree_merged") == 1
        assert not Path(info.path).exists()
        assert git(origin.work, "branch", "--list", info.branch) == ""
    finally:
        origin.q.db.dispose()
    assert_intact(db)
