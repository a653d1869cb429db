"""Work is never destroyed, and a merge that landed finishes (issue 40): a worktree holding
uncommitted edits survives every cleanup (a merge's, a landing's, a prune's), a branch a
person made survives a merge and a removal (workq deletes only the branches it made), and
a merge whose completion or cleanup was refused after its commit reached the default
branch says so and is finished by merging again, landing nothing twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.services.workspaces.gitrepo import commit, log, make_repo
from workq.domain.authority import Authority
from workq.errors import ConnectionLost, WorktreeDirty
from workq.schemas import Status
from workq.services.coding.gates import MergeCandidate
from workq.services.handle import Queue
from workq.services.queue import claims, issues, notes
from workq.services.workspaces import (
    claiming,
    land,
    merges,
    pr_landings,
    repositories,
    worktree_cleanup,
    worktrees,
)
from workq.vcs import git

pytestmark = pytest.mark.usefixtures("trusted_tests_gate")

ME = "agent-a"
BY = Authority.of({ME})


@pytest.fixture
def repo(queue: Queue, tmp_path: Path) -> Path:
    path = make_repo(tmp_path / "app")
    repositories.add(queue, "app", path)
    return path


def _claimed(q: Queue, title: str, branch: str | None = None) -> tuple[int, Path, str, str]:
    number = issues.create(q, title=title).number
    repositories.assign(q, number, "app", by=Authority.of(()))
    info = claiming.claim(q, number, BY, worktree=True, branch=branch).worktree
    assert info is not None
    return number, Path(info.path), info.worktree_id, info.branch


def _branches(repo: Path) -> list[str]:
    return git.run(["branch", "--format=%(refname:short)"], cwd=repo).lines


def _state(q: Queue, wid: str) -> str:
    (found,) = [w for w in worktrees.list_worktrees(q, everything=True) if w.id == wid]
    return found.state


def test_a_merge_never_removes_a_worktree_holding_uncommitted_edits(
    queue: Queue, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    number, path, wid, branch = _claimed(queue, "the parser")
    tip = commit(path, {"src/parser.py": "x = 1\n"}, "the parser")

    def agent_writes(q: Queue, candidate: MergeCandidate) -> None:
        """The agent edits its worktree while the merge runs (after its clean check)."""
        if candidate.commit is not None:
            (path / "notes.txt").write_text("still thinking\n")

    gates = land.GATES
    monkeypatch.setattr(land, "GATES", [*gates, agent_writes])
    with pytest.raises(WorktreeDirty) as refused:
        merges.merge(queue, "app", wid, by=BY)
    monkeypatch.setattr(land, "GATES", gates)
    landed = git.head(repo, "main")
    assert git.is_ancestor(repo, tip, landed)  # it landed, and says so
    assert refused.value.facts["landed"] == landed and refused.value.facts["resumable"] is True
    assert "notes.txt" in refused.value.message and "merge again" in (refused.value.hint or "")
    assert issues.get(queue, number).status == Status.DONE
    assert (path / "notes.txt").read_text() == "still thinking\n"  # the edit survives
    assert _state(queue, wid) == "merging"  # what is left: the cleanup

    # Asked again while the edit is there: refused again, nothing moves.
    with pytest.raises(WorktreeDirty):
        merges.merge(queue, "app", wid, by=BY)
    assert git.head(repo, "main") == landed and (path / "notes.txt").is_file()

    # Committed to its branch: the merge finishes, and the branch keeps that commit.
    kept = commit(path, {"notes.txt": "still thinking\n"}, "notes")
    done = merges.merge(queue, "app", wid, by=BY)
    assert done.already_merged and done.commit == landed
    assert git.head(repo, "main") == landed and log(repo).count("the parser") == 1
    assert not path.exists() and _state(queue, wid) == "merged"
    assert git.branch_tip(repo, branch) == kept  # work main lacks: not deleted


def test_a_merge_whose_completion_was_refused_is_finished_by_merging_again(
    queue: Queue, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    number, path, wid, branch = _claimed(queue, "the printer")
    commit(path, {"src/printer.py": "x = 2\n"}, "the printer")
    complete = claims.complete

    def lost(*args: object, **kwargs: object) -> object:
        raise ConnectionLost("the database went away")

    monkeypatch.setattr(claims, "complete", lost)
    with pytest.raises(ConnectionLost) as refused:
        merges.merge(queue, "app", wid, by=BY)
    monkeypatch.setattr(claims, "complete", complete)
    landed = git.head(repo, "main")
    assert refused.value.facts["landed"] == landed and refused.value.facts["resumable"] is True
    assert f"merged into main at {landed[:12]}" in refused.value.message
    assert "merge again" in (refused.value.hint or "")
    assert (
        issues.get(queue, number).status == Status.IN_PROGRESS and _state(queue, wid) == "merging"
    )

    done = merges.merge(queue, "app", wid, by=BY)
    assert done.already_merged and done.commit == landed and git.head(repo, "main") == landed
    assert issues.get(queue, number).status == Status.DONE
    kinds = [e.kind for e in notes.history(queue, number)]
    assert kinds.count("completed") == 1 and kinds.count("worktree_merged") == 1
    assert branch not in _branches(repo) and not path.exists()  # workq's branch: deleted


def test_a_branch_a_person_made_survives_the_merge_and_the_removal(
    queue: Queue, repo: Path
) -> None:
    # Alice's branch, with a commit of hers; Bob's, with none yet.
    git.run(["branch", "alice/parser", "main"], cwd=repo)
    git.run(["branch", "bob/idea", "main"], cwd=repo)
    number, path, wid, branch = _claimed(queue, "the parser", branch="alice/parser")
    assert branch == "alice/parser"
    commit(path, {"src/parser.py": "x = 3\n"}, "alice's parser")
    merged = merges.merge(queue, "app", wid, by=BY)
    assert merged.merged and git.is_ancestor(repo, merged.commit or "", "main")
    assert "alice/parser" in _branches(repo)  # landed, and still hers
    assert issues.get(queue, number).status == Status.DONE

    _, bob_path, bob_wid, _ = _claimed(queue, "an idea", branch="bob/idea")
    _, own_path, own_wid, own = _claimed(queue, "workq's own")
    worktree_cleanup.remove(queue, "app", bob_wid, by=BY)
    worktree_cleanup.remove(queue, "app", own_wid, by=BY)
    assert not bob_path.exists() and not own_path.exists()
    assert "bob/idea" in _branches(repo)  # fully merged, but a person's: kept
    assert own not in _branches(repo)  # workq made it, and it holds nothing: deleted


def test_a_removal_by_another_never_throws_away_edits(queue: Queue, repo: Path) -> None:
    """Anyone may remove the worktree of a lapsed claim, but not with its edits: only its
    holder or an override forces that."""
    number, path, wid, _ = _claimed(queue, "lapsing")
    (path / "wip.txt").write_text("mine\n")
    queue.clock.advance(queue.lease_seconds + 1)  # type: ignore[attr-defined]
    with pytest.raises(WorktreeDirty):
        worktree_cleanup.remove(queue, "app", wid, by=Authority.of({"agent-b"}), force=True)
    assert (path / "wip.txt").read_text() == "mine\n"
    worktree_cleanup.remove(queue, "app", wid, by=BY, force=True)  # its holder's word
    assert not path.exists() and issues.get(queue, number).claimed_by == ME


def test_a_landing_keeps_a_worktree_holding_uncommitted_edits(queue: Queue, repo: Path) -> None:
    """GitHub merged the pull request; the holder went on editing its worktree meanwhile:
    the issue is done, the worktree stays (recorded), and prune takes it once clean."""
    number, path, wid, branch = _claimed(queue, "landed on GitHub")
    tip = commit(path, {"src/landed.py": "x = 4\n"}, "landed")
    (path / "wip.txt").write_text("next idea\n")
    pr_landings.finish_landing(
        queue, number, "app", wid, branch, merged=tip, pushed=tip, actor="github-worker"
    )
    assert issues.get(queue, number).status == Status.DONE
    assert (path / "wip.txt").read_text() == "next idea\n"
    (merged,) = [e for e in notes.history(queue, number) if e.kind == "worktree_merged"]
    assert merged.after is not None and "wip.txt" in merged.after["worktree_kept"]
    assert [w.id for w in worktree_cleanup.prune(queue, "app").kept] == [wid]
    assert path.is_dir()
    (path / "wip.txt").unlink()
    assert [w.id for w in worktree_cleanup.prune(queue, "app").removed] == [wid]
    assert not path.exists()
