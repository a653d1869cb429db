"""The workspace commands through the CLI on real git repositories: repo, worktree, agents,
conflicts, merge; and kill -9 in the middle of a merge (a real process), then a rerun."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.services.workspaces.gitrepo import commit, make_repo
from tests.storage import assert_intact
from tests.workq_cli import Env, workq
from workq.config import Settings
from workq.domain.authority import Authority
from workq.services.queue import agents, claims, dependencies, issues
from workq.services.runtime import open_queue
from workq.services.workspaces import claiming, repositories
from workq.vcs import git

# Merges here are the subject, not the tests gate that guards them (tests/services/coding).
pytestmark = pytest.mark.usefixtures("trusted_tests_gate")


def cli(db: Path, *args: str, env: Env | None = None) -> subprocess.CompletedProcess[str]:
    """``workq --db DB ARGS``, in this process."""
    return workq("--db", db, *args, env=env)


def test_repo_worktree_agents_conflicts_and_merge_commands(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    repo = make_repo(tmp_path / "app")
    assert cli(db, "repo", "add", "app", str(repo)).returncode == 0
    listed = json.loads(cli(db, "repo", "list", "--json").stdout)
    assert [r["name"] for r in listed] == ["app"]
    for title in ("first change", "second change"):
        assert cli(db, "create", title, "-t", "feature").returncode == 0
    for n in ("1", "2"):
        assert cli(db, "repo", "assign", n, "app").returncode == 0
        assert cli(db, "claim", n).returncode == 0
        spawned = cli(db, "worktree", "spawn", n, "--json")
        assert spawned.returncode == 0, spawned.stderr
    one = json.loads(cli(db, "worktree", "list", "--json").stdout)
    assert [w["branch"] for w in one] == ["feature/1-first-change", "feature/2-second-change"]
    shown = cli(db, "show", "1").stdout
    assert "worktree" in shown and "feature/1-first-change" in shown
    commit(Path(one[0]["path"]), {"src/app.py": "x = 10\n"})
    commit(Path(one[1]["path"]), {"src/app.py": "x = 20\n"})
    scan = cli(db, "conflicts", "app")
    assert "src/app.py: #1, #2" in scan.stdout
    status = cli(db, "repo", "status", "app")
    assert "conflict: src/app.py" in status.stdout
    merged = cli(db, "merge", "1")
    assert merged.returncode == 0 and "Merged feature/1-first-change into main" in merged.stdout
    again = cli(db, "merge", "1")
    assert again.returncode == 0 and "already merged" in again.stdout
    refused = cli(db, "merge", "2")
    assert refused.returncode == 1
    assert "MERGE_CONFLICT: merge would result in conflicts" in refused.stderr
    assert "src/app.py" in refused.stderr
    queue = open_queue(Settings(db_path=db))
    try:
        me = agents.register(queue, "codex-1", "codex")
    finally:
        queue.db.dispose()
    roster = json.loads(cli(db, "agents", "--json").stdout)
    # the registered agent, then the run id that holds claims without registering
    assert [(a["agent_id"], a["type"]) for a in roster] == [
        (me.agent_id, "codex"),
        ("tester", "run id"),
    ]
    assert "codex-1" in cli(db, "agents").stdout


def test_prune_keeps_dirty_worktrees_and_reports_disk_use(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    repo = make_repo(tmp_path / "app")
    queue = open_queue(Settings(db_path=db))
    try:
        repositories.add(queue, "app", repo)
        paths = []
        for title in ("clean", "dirty"):
            n = issues.create(queue, title=title).number
            repositories.assign(queue, n, "app", by=Authority.of(()))
            info = claiming.claim(queue, n, Authority.of({"r"}), worktree=True).worktree
            assert info is not None
            paths.append(Path(info.path))
            claims.complete(queue, n, Authority.overriding("admin", who="admin"))
    finally:
        queue.db.dispose()
    (paths[1] / "wip.txt").write_text("not committed")
    pruned = cli(db, "worktree", "prune")
    assert pruned.returncode == 0
    assert f"removed {paths[0]}" in pruned.stdout and f"kept    {paths[1]}" in pruned.stdout
    assert "1 removed" in pruned.stdout and " B" in pruned.stdout
    assert not paths[0].exists() and paths[1].exists()
    forced = cli(db, "worktree", "prune", "--force")
    assert f"removed {paths[1]}" in forced.stdout and not paths[1].exists()


ROUNDS = 8


def orphans_gone(group: int, limit: float = 60.0) -> None:
    """Wait until no process is left in process group ``group``."""
    deadline = time.monotonic() + limit
    while True:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return
        assert time.monotonic() < deadline, f"processes of group {group} still running"
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["merge", "squash"])
def test_kill_9_in_the_middle_of_a_merge_then_rerun(tmp_path: Path, mode: str) -> None:
    """A git that takes a moment per call widens every window between the merge's steps;
    the merger is killed at a random moment, then the merge is run again: every change
    lands exactly once, the worktree and branch are gone, the main checkout is clean."""
    db = tmp_path / "q.db"
    repo = make_repo(tmp_path / "app")
    shim = tmp_path / "bin"
    shim.mkdir()
    real = git.executable()
    (shim / "git").write_text(f'#!/bin/sh\nsleep 0.1\nexec "{real}" "$@"\n')
    (shim / "git").chmod(0o755)
    slow = {"PATH": f"{shim}{os.pathsep}{os.environ['PATH']}", "WORKQ_MERGE_LEASE_SECONDS": "1"}
    rng = random.Random(f"merge-crash-{mode}")
    queue = open_queue(Settings(db_path=db))
    try:
        repositories.add(queue, "app", repo, merge_mode=mode)
        for round_ in range(ROUNDS):
            n = issues.create(queue, title=f"piece {round_}").number
            repositories.assign(queue, n, "app", by=Authority.of(()))
            info = claiming.claim(queue, n, Authority.of({"r"}), worktree=True).worktree
            assert info is not None
            commit(Path(info.path), {f"piece/{n}.txt": f"{n}\n"}, f"work on #{n}")
            if round_ % 2:  # main moves on meanwhile: a real merge, not a fast-forward
                commit(repo, {f"trunk/{n}.txt": "m"}, f"main {n}")
            merger = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "workq.cli.main",
                    "--db",
                    str(db),
                    "merge",
                    str(n),
                    "--run-id",
                    "r",
                ],
                env={**os.environ, **slow},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            time.sleep(rng.uniform(0.5, 4.0))
            merger.kill()
            merger.wait(timeout=30)
            # A git the merger had started outlives it and may still be writing the main
            # checkout: the rerun comes once it has finished, as a later agent's would.
            orphans_gone(merger.pid)
            rerun = cli(
                db, "merge", str(n), "--run-id", "r", env={"WORKQ_MERGE_LEASE_SECONDS": "1"}
            )
            assert rerun.returncode == 0, rerun.stderr
            files = git.run(["ls-tree", "-r", "--name-only", "main"], cwd=repo).lines
            assert f"piece/{n}.txt" in files
            assert not Path(info.path).exists()
            assert not git.branch_exists(repo, info.branch)
            assert issues.get(queue, n).status.value == "done"
            assert git.dirty_paths(repo) == []
    finally:
        queue.db.dispose()
    bodies = git.run(["log", "--format=%B", "main"], cwd=repo).stdout
    for n in range(1, ROUNDS + 1):
        # A fast-forward lands the commit itself; a squash lands one commit "#N: title".
        landed = bodies.count(f"work on #{n}\n") + (mode == "squash") * bodies.count(f"#{n}: ")
        assert landed == 1, (n, bodies)
    assert [w.path for w in git.worktrees(repo)] == [repo.resolve()]
    assert_intact(db)


@pytest.mark.usefixtures("trusted_tests_gate")
def test_a_merge_of_an_issue_waiting_on_an_open_blocker_is_refused_before_it_lands(
    tmp_path: Path,
) -> None:
    """`workq merge N` used to land #N's branch and complete it by force while #N waited on
    an open issue; issue_complete refuses the same. Now the merge refuses first and nothing
    moves: main, the worktree, the branch, the claim."""
    db = tmp_path / "q.db"
    repo = make_repo(tmp_path / "app")
    queue = open_queue(Settings(db_path=db))
    try:
        repositories.add(queue, "app", repo)
        blocker = issues.create(queue, title="first").number
        n = issues.create(queue, title="second").number
        repositories.assign(queue, n, "app", by=Authority.of(()))
        info = claiming.claim(queue, n, Authority.of({"r"}), worktree=True).worktree
        assert info is not None
        commit(Path(info.path), {"second.txt": "2\n"}, f"work on #{n}")
        dependencies.depend(queue, blocker=blocker, blocked=n)
    finally:
        queue.db.dispose()
    main_before = git.branch_tip(repo, "main")
    refused = cli(db, "merge", str(n), "--run-id", "r")
    assert refused.returncode == 1
    assert f"OPEN_BLOCKERS: Issue #{n} waits on #{blocker}, which is not done" in refused.stderr
    assert git.branch_tip(repo, "main") == main_before
    assert Path(info.path).is_dir() and git.branch_exists(repo, info.branch)
    queue = open_queue(Settings(db_path=db))
    try:
        assert issues.get(queue, n).status.value == "in_progress"
        claims.complete(queue, blocker, Authority.overriding("admin", who="admin"))
    finally:
        queue.db.dispose()
    assert cli(db, "merge", str(n), "--run-id", "r").returncode == 0
    assert "second.txt" in git.run(["ls-tree", "-r", "--name-only", "main"], cwd=repo).lines
