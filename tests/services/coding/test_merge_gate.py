"""The merge queue refuses a branch whose quality gates fail (services/workspaces/merges.py GATES),
on real repositories and worktrees: the evidence is for the branch tip."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.services.coding.gaterepo import commit, gated_repo
from workq.domain.authority import Authority
from workq.errors import QualityGateFailed, TestsFailing
from workq.schemas import Status
from workq.services.coding import gates
from workq.services.handle import Queue
from workq.services.queue import issues
from workq.services.workspaces import claiming, merges, repositories
from workq.vcs import git


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return gated_repo(tmp_path / "app")


def _spawned(q: Queue, title: str) -> tuple[int, Path, str]:
    number = issues.create(q, title=title).number
    repositories.assign(q, number, "app", by=Authority.of({"agent-a"}))
    taken = claiming.claim(q, number, Authority.of({"agent-a"}), worktree=True)
    assert taken.worktree is not None
    return number, Path(taken.worktree.path), taken.worktree.worktree_id


def test_a_branch_whose_gates_fail_is_not_merged(queue: Queue, repo: Path):
    queue.tests_gate = gates.EVIDENCE
    repositories.add(queue, "app", repo)
    number, path, wid = _spawned(queue, "Lint me")
    before = git.head(repo)
    bad = commit(path, {"src/app.py": "x = 2  # BAD\n"})
    with pytest.raises(QualityGateFailed, match="lint") as refused:
        merges.merge(queue, "app", wid, by=Authority.overriding("admin", who="admin"))
    assert refused.value.facts["commit"] == bad
    assert git.head(repo) == before and path.is_dir()
    assert issues.get(queue, number).status == Status.IN_PROGRESS

    failing = commit(path, {"src/app.py": "x = 2  # FAIL\n"})
    with pytest.raises(TestsFailing):
        merges.merge(queue, "app", wid, by=Authority.overriding("admin", who="admin"))
    assert git.head(repo) == before

    commit(repo, {"other.txt": "main moved\n"})  # the merge makes a merge commit
    good = commit(path, {"src/app.py": "x = 2\n"})
    done = merges.merge(queue, "app", wid, by=Authority.overriding("admin", who="admin"))
    assert done.merged and done.commit not in (good, failing)
    assert issues.get(queue, number).status == Status.DONE
    runs = gates.evidence(queue, number)
    assert {(r.commit, r.gate) for r in runs if r.passed and r.commit == good} == {
        (good, "lint"),
        (good, "tests"),
    }
    assert not any(r.commit == done.commit for r in runs)  # evidence is for the tip


def test_trust_mode_merges_without_gates(queue: Queue, repo: Path):
    queue.tests_gate = gates.TRUST
    repositories.add(queue, "app", repo)
    number, path, wid = _spawned(queue, "Trusted")
    commit(path, {"src/app.py": "x = 2  # BAD\n"})
    assert merges.merge(queue, "app", wid, by=Authority.overriding("admin", who="admin")).merged
    assert gates.evidence(queue, number) == []
