"""Benchmark agent workspaces on a repository of many files (figures, no asserts).

    .venv/bin/python scripts/bench_agit.py [--files 10000] [--sizes 1,10,50]

For each size N, in one run on the same machine, against plain git doing the same work:
- spawn: ``claiming.claim(..., worktree=True)`` (claim, record, ``git worktree add``,
  record) per worktree, against a bare ``git worktree add`` of a new branch;
- conflict scan of N worktrees (each with two commits and an uncommitted edit, some files
  shared), against the same ``git diff --name-only`` + ``ls-files --others`` run one
  worktree after the other;
- merge: ``merges.merge`` per worktree (lease, merge-tree check, merge commit, main
  checkout fast-forwarded, issue completed, worktree and branch removed), against a bare
  ``git merge --no-ff`` in the main checkout followed by ``git worktree remove`` and
  ``git branch -D``.

Each step alternates plain git and workq, so the load of a shared machine falls on both.

Then the merge queue as agents meet it, with a quality gate and the tests gate asking for
evidence (``--per-agent K``):
- one merge with the gate's evidence stored for the branch tip (what
  ``agit_merge_worktree`` runs: ``merges.merge``), against a bare ``git merge --no-ff`` of
  the same commit and the same clean-up;
- four agents, each a process of its own, merging K worktrees each into the one
  repository at once: merges per second, against plain git merging as many branches one
  after the other;
- the merge right after a merger holding the lease was killed with -9 (its lease is taken
  at once, not waited out), against the median merge above.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from workq.config import Settings
from workq.domain.authority import Authority
from workq.services.coding import gates
from workq.services.handle import Queue
from workq.services.queue import issues
from workq.services.runtime import open_queue
from workq.services.workspaces import claiming, conflicts, merge_lease, merges, repositories
from workq.vcs import git


def make_repo(path: Path, files: int) -> None:
    path.mkdir()
    git.run(["init", "-q", "-b", "main"], cwd=path)
    git.run(["config", "user.email", "bench@example.invalid"], cwd=path)
    git.run(["config", "user.name", "bench"], cwd=path)
    for i in range(files):
        folder = path / f"pkg{i % 100:02d}"
        folder.mkdir(exist_ok=True)
        (folder / f"mod{i}.py").write_text(f"VALUE = {i}\n")
    git.run(["add", "-A"], cwd=path, timeout=300)
    git.run(["commit", "-q", "-m", "tree"], cwd=path, timeout=300)


def edit(where: Path, i: int) -> None:
    """Two commits and an uncommitted edit; every fifth worktree touches a shared file.
    (The plain and the workq worktree of one step make the same edits under different
    names, so the two merges of a step do not conflict.)"""
    for step in range(2):
        (where / f"pkg{i % 100:02d}" / f"mod{i}.py").write_text(f"VALUE = {i + step}\n")
        (where / f"new_{i}_{step}.py").write_text("x = 1\n")
        git.run(["add", "-A"], cwd=where)
        git.run(["commit", "-q", "-m", f"work {i}.{step}"], cwd=where)
    target = "pkg99/mod99.py" if i % 5 == 0 else f"pkg{(i + 1) % 100:02d}/mod{i + 1}.py"
    (where / target).write_text("# edited\n")


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def run(files: int, sizes: list[int]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        repo = root / "repo"
        started = time.perf_counter()
        make_repo(repo, files)
        print(f"repository of {files} files built in {time.perf_counter() - started:.1f} s")
        # Worktrees and merges are measured, not the quality gates: the merge trusts the tests.
        queue = open_queue(Settings(db_path=root / "q.db", tests_gate="trust"))
        repositories.add(queue, "bench", repo)
        rows = []
        for size in sizes:
            # Each step alternates plain git and workq, so load on the machine hits both.
            plain_dir = root / f"plain{size}"
            plain_dir.mkdir()
            spawn_git, spawn_wq = [], []
            plain, infos = [], []
            for i in range(size):
                t = time.perf_counter()
                where = plain_dir / f"w{i}"
                git.worktree_add(repo, where, f"plain/{size}-{i}", "main")
                spawn_git.append(time.perf_counter() - t)
                edit(where, i)
                plain.append(where)
                number = issues.create(queue, title=f"bench {size}-{i}").number
                repositories.assign(queue, number, "bench", by=Authority.of(()))
                t = time.perf_counter()
                info = claiming.claim(
                    queue, number, Authority.of({"bench"}), worktree=True
                ).worktree
                spawn_wq.append(time.perf_counter() - t)
                assert info is not None
                edit(Path(info.path), i)
                infos.append(info)
            scan_git, scan_wq = [], []
            for _ in range(3):
                t = time.perf_counter()
                for where in plain:
                    git.changed_files(where, "main")
                scan_git.append(time.perf_counter() - t)
                t = time.perf_counter()
                report = conflicts.scan(queue, "bench")
                scan_wq.append(time.perf_counter() - t)
                assert report.scanned_worktrees == size
            merge_git, merge_wq = [], []
            for i, (where, info) in enumerate(zip(plain, infos, strict=True)):
                git.run(["checkout", "-q", "--", "."], cwd=where)
                git.run(["checkout", "-q", "--", "."], cwd=Path(info.path))
                # plain git: merge commit in the main checkout, then remove the worktree
                # and the branch, as workq's merge does
                t = time.perf_counter()
                git.run(["merge", "-q", "--no-ff", "--no-edit", f"plain/{size}-{i}"], cwd=repo)
                git.worktree_remove(repo, where, force=True)
                git.delete_branch(repo, f"plain/{size}-{i}")
                merge_git.append(time.perf_counter() - t)
                t = time.perf_counter()
                merges.merge(
                    queue, "bench", info.worktree_id, by=Authority.overriding("admin", who="admin")
                )
                merge_wq.append(time.perf_counter() - t)
            rows.append(
                (
                    size,
                    statistics.median(spawn_git),
                    statistics.median(spawn_wq),
                    statistics.median(scan_git),
                    statistics.median(scan_wq),
                    statistics.median(merge_git),
                    statistics.median(merge_wq),
                )
            )
        queue.db.dispose()
    print()
    print(
        "| worktrees | spawn, git / workq (median) | scan of all, git one by one / workq"
        " (median of 3) | merge and clean up, git / workq (median) |"
    )
    print("|---|---|---|---|")
    for size, sg, sw, cg, cw, mg, mw in rows:
        print(
            f"| {size} | {ms(sg)} / {ms(sw)} ({sw / sg:.2f}x) | {ms(cg)} / {ms(cw)}"
            f" ({cw / cg:.2f}x) | {ms(mg)} / {ms(mw)} ({mw / mg:.2f}x) |"
        )


AGENTS = 4
GATE_TOML = f'[gates.check]\ncommand = ["{sys.executable}", "-c", "pass"]\n'


def _evidenced(queue: Queue, repo: Path, agent: str, name: str) -> tuple[str, str]:
    """A worktree claimed by ``agent`` with one commit whose gate passed (evidence stored),
    and a plain branch with the same change; their ids."""
    number = issues.create(queue, title=name, repository="bench").number
    info = claiming.claim(queue, number, Authority.of({agent}), worktree=True).worktree
    assert info is not None
    where = Path(info.path)
    (where / f"{name}.py").write_text("x = 1\n")
    git.stage_all(where)
    git.commit(where, f"work {name}")
    gates.run(queue, number, where, by=Authority.of({agent}), actor=agent)
    git.run(["branch", f"plain/{name}", git.head(where)], cwd=repo)
    # the plain twin: the same change under another name, so that both merges land
    git.run(["checkout", "-q", f"plain/{name}"], cwd=repo)
    git.run(["mv", f"{name}.py", f"plain_{name}.py"], cwd=repo)
    git.run(["commit", "-q", "-m", f"plain {name}"], cwd=repo)
    git.run(["checkout", "-q", "main"], cwd=repo)
    return info.worktree_id, f"plain/{name}"


def _git_merge(repo: Path, branch: str) -> float:
    t = time.perf_counter()
    git.run(["merge", "-q", "--no-ff", "--no-edit", branch], cwd=repo)
    git.delete_branch(repo, branch)
    return time.perf_counter() - t


def _merge_all(db: str, agent: str, ids: list[str], start: Any) -> None:
    queue = open_queue(Settings(db_path=Path(db), tests_gate="evidence"))
    start.wait()
    for worktree_id in ids:
        merges.merge(queue, "bench", worktree_id, by=Authority.of({agent}))
    queue.db.dispose()


def _hold_lease(db: str) -> None:
    queue = open_queue(Settings(db_path=Path(db)))
    with merge_lease.merge_lease(queue, "bench", lease_seconds=600):
        time.sleep(600)


def merge_queue(per_agent: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        repo, db = root / "repo", root / "q.db"
        make_repo(repo, 100)
        (repo / "workq.toml").write_text(GATE_TOML)
        git.stage_all(repo)
        git.commit(repo, "gates")
        queue = open_queue(Settings(db_path=db, tests_gate="evidence"))
        repositories.add(queue, "bench", repo)
        one_git, one_wq = [], []
        for i in range(max(per_agent, 3)):
            wid, branch = _evidenced(queue, repo, "solo", f"one{i}")
            one_git.append(_git_merge(repo, branch))
            t = time.perf_counter()
            merges.merge(queue, "bench", wid, by=Authority.of({"solo"}))
            one_wq.append(time.perf_counter() - t)
        work = {
            f"agent-{a}": [
                _evidenced(queue, repo, f"agent-{a}", f"a{a}n{k}") for k in range(per_agent)
            ]
            for a in range(AGENTS)
        }
        t = time.perf_counter()
        for pairs in work.values():
            for _, branch in pairs:
                _git_merge(repo, branch)
        serial_git = time.perf_counter() - t
        context = multiprocessing.get_context("spawn")
        start = context.Event()
        agents = [
            context.Process(target=_merge_all, args=(str(db), agent, [w for w, _ in pairs], start))
            for agent, pairs in work.items()
        ]
        for process in agents:
            process.start()
        time.sleep(2.0)  # every process imported and opened its queue
        t = time.perf_counter()
        start.set()
        for process in agents:
            process.join()
        together = time.perf_counter() - t
        assert all(process.exitcode == 0 for process in agents)
        # A merger killed -9 while it holds the lease; the next merge takes it at once.
        wid, _ = _evidenced(queue, repo, "next", "after-kill")
        holder = context.Process(target=_hold_lease, args=(str(db),))
        holder.start()
        while merge_lease.holder_of(queue, "bench")[0] is None:
            time.sleep(0.02)
        assert holder.pid is not None
        os.kill(holder.pid, signal.SIGKILL)
        holder.join()
        t = time.perf_counter()
        merges.merge(queue, "bench", wid, by=Authority.of({"next"}))
        after_kill = time.perf_counter() - t
        queue.db.dispose()
    count = AGENTS * per_agent
    mg, mw = statistics.median(one_git), statistics.median(one_wq)
    print()
    print(f"merge queue, a gate with evidence stored ({AGENTS} agents x {per_agent} merges):")
    print(
        f"| one merge, git merge --no-ff / merges.merge (median of {len(one_wq)}) | "
        f"{ms(mg)} / {ms(mw)} ({mw / mg:.2f}x) |"
    )
    print(
        f"| {count} merges, git one after another / {AGENTS} agent processes at once | "
        f"{count / serial_git:.1f} / {count / together:.1f} merges/s "
        f"({serial_git / together:.2f}x) |"
    )
    print(
        f"| the merge after a lease holder was killed -9 / a median merge | "
        f"{ms(after_kill)} / {ms(mw)} ({after_kill / mw:.2f}x) |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--sizes", default="1,10,50")
    parser.add_argument("--per-agent", type=int, default=5, help="merges per agent")
    args = parser.parse_args(argv)
    run(args.files, [int(s) for s in args.sizes.split(",")])
    merge_queue(args.per_agent)
    return 0


if __name__ == "__main__":
    sys.exit(main())
