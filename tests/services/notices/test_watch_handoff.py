"""The watch's releases and lapses save the work of a real worktree: a stalled claim that
the stall policy releases, and a lapsed lease, lose no commit and no uncommitted edit, and
the next claim is briefed (SQLite and PostgreSQL)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import FakeClock
from tests.services.workspaces.gitrepo import commit, make_repo
from workq.domain.authority import Authority
from workq.services.handle import Queue
from workq.services.notices import watch
from workq.services.queue import claims, notes, policies
from workq.services.queue import issues as issue_service
from workq.services.workspaces import claiming, repositories
from workq.vcs import git

A = Authority.of({"agent-a"})
B = Authority.of({"agent-b"})


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "app", {"src/app.py": "x = 1\n", "README.md": "hi\n"})


def _working(q: Queue, repo: Path) -> tuple[int, Path]:
    """Issue #1 held by agent-a in a worktree with one commit and uncommitted edits."""
    repositories.add(q, "app", repo)
    number = issue_service.create(q, title="Parse the config").number
    repositories.assign(q, number, "app", by=Authority.of(()))
    taken = claiming.claim(q, number, A, worktree=True)
    assert taken.worktree is not None
    path = Path(taken.worktree.path)
    commit(path, {"src/parser.py": "def parse(): ...\n"}, "Add the parser")
    (path / "src" / "app.py").write_text("x = 2  # half done\n")
    (path / "notes.txt").write_text("untracked thoughts\n")
    return number, path


def _edits_of(path: Path, ref: str) -> dict[str, str]:
    out = git.run(["diff", "--name-status", "--no-renames", f"{ref}^", ref, "--"], cwd=path)
    return {line.split("\t")[1]: line.split("\t")[0] for line in out.lines}


def test_a_stalled_claim_released_by_the_watch_loses_nothing(
    queue: Queue, repo: Path, clock: FakeClock
) -> None:
    policies.settle(queue, "stall_after", "10m")
    policies.settle(queue, "stall_policy", "release")
    policies.settle(queue, "stall_release_after", "5m")
    number, path = _working(queue, repo)
    head = git.head(path)
    found = watch.sweep(queue)
    assert found.committed == [number]  # the commit is progress, seen by the watch
    for _ in range(32):  # 16 minutes, the server renewing the lease all along
        clock.advance(30)
        claims.renew_leases(queue, {"agent-a"})
    found = watch.sweep(queue)
    assert found.released == [number]

    # Nothing lost: the worktree as it was, the commit on its branch, the edits in a ref.
    assert git.head(path) == head
    assert (path / "src" / "app.py").read_text() == "x = 2  # half done\n"
    assert (path / "notes.txt").is_file()
    saved = [e for e in notes.history(queue, number, limit=100) if e.kind == "work_saved"]
    assert len(saved) == 1
    after = saved[0].after or {}
    assert after["how"] == "stall_released" and after["commits_ahead"] == 1
    assert _edits_of(path, after["edits_ref"]) == {"src/app.py": "M", "notes.txt": "A"}

    brief = claiming.claim(queue, number, B).briefing
    assert brief is not None
    assert (brief.previous_holder, brief.ended) == ("agent-a", "stall_released")
    assert "Add the parser" in brief.commits


def test_a_lapsed_lease_found_by_the_watch_saves_before_anyone_takes_over(
    queue: Queue, repo: Path, clock: FakeClock
) -> None:
    number, _ = _working(queue, repo)
    clock.advance(61)
    assert watch.sweep(queue).lapsed == [number]
    saved = [e for e in notes.history(queue, number, limit=100) if e.kind == "work_saved"]
    assert [(e.after or {}).get("how") for e in saved] == ["lapsed"]
    brief = claiming.claim(queue, number, B).briefing  # takes the lapsed lease over
    assert brief is not None and (brief.previous_holder, brief.ended) == ("agent-a", "lapsed")
    again = [e for e in notes.history(queue, number, limit=100) if e.kind == "work_saved"]
    assert len(again) == 1  # the takeover found the same work saved
