"""Repositories, worktrees, the conflict scan and the merge queue, through the services,
against real git repositories in tmp_path (SQLite, and PostgreSQL when configured)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import select, text, update

from tests.conftest import FakeClock
from tests.services.workspaces.gitrepo import commit, log, make_repo
from workq.db.tables import repositories as repositories_t
from workq.db.tables import worktrees as worktrees_t
from workq.domain.authority import Authority
from workq.errors import (
    Conflict,
    GitFailed,
    InvalidInput,
    MergeBusy,
    MergeConflict,
    NotFound,
    WorktreeDirty,
)
from workq.schemas import IssueType, ReadyFilter, Status
from workq.services.handle import Queue
from workq.services.queue import agents, claims, issues, notes, ready_queue
from workq.services.workspaces import (
    claiming,
    conflicts,
    merge_lease,
    merges,
    repositories,
    worktree_cleanup,
    worktrees,
)
from workq.vcs import git

# What is tested here is not the tests gate (tests/services/coding): merges are trusted.
pytestmark = pytest.mark.usefixtures("trusted_tests_gate")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "app")


def _issue(q: Queue, title: str, repo: str | None = "app", kind: str = "task") -> int:
    number = issues.create(q, title=title, issue_type=kind).number
    if repo:
        repositories.assign(q, number, repo, by=Authority.of(()))
    return number


def test_register_from_any_worktree_names_one_repository(queue: Queue, repo: Path, tmp_path: Path):
    git.run(["worktree", "add", "-q", "-b", "side", str(tmp_path / "side")], cwd=repo)
    added = repositories.add(queue, "app", tmp_path / "side" / "src")
    assert added.path == str(repo.resolve())
    assert added.default_branch == "main"
    assert added.worktree_dir == str(repo.resolve() / ".worktrees")
    with pytest.raises(Conflict, match="already registered"):
        repositories.add(queue, "other", repo)
    assert [r.name for r in repositories.list_all(queue)] == ["app"]


def test_not_a_repository_and_detached_head_are_refused(queue: Queue, repo: Path, tmp_path: Path):
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(InvalidInput, match="not a git repository"):
        repositories.add(queue, "plain", plain)
    git.run(["checkout", "-q", "--detach"], cwd=repo)
    with pytest.raises(InvalidInput, match="detached HEAD"):
        repositories.add(queue, "app", repo)
    with pytest.raises(InvalidInput, match="repository name"):
        repositories.add(queue, "../x", repo, default_branch="main")
    assert repositories.list_all(queue) == []


def test_claim_with_worktree_gives_path_and_branch(queue: Queue, repo: Path):
    repositories.add(queue, "app", repo)
    number = _issue(queue, "Fix the login page", kind="bug")
    taken = claiming.claim(queue, number, Authority.of({"agent-a"}), worktree=True)
    assert taken.worktree is not None
    assert taken.worktree.branch == f"bug/{number}-fix-the-login-page"
    path = Path(taken.worktree.path)
    assert path.parent == repo.resolve() / ".worktrees"
    assert git.current_branch(path) == taken.worktree.branch
    shown = worktrees.issue(queue, number)
    assert shown.worktree == taken.worktree and shown.repository == "app"
    # Claiming again (a renewal) keeps the same worktree.
    again = claiming.claim(queue, number, Authority.of({"agent-a"}), worktree=True)
    assert again.worktree == taken.worktree
    # The main checkout does not see the worktree folder.
    assert git.dirty_paths(repo) == []


def test_worktree_failure_gives_the_claim_back(queue: Queue, repo: Path):
    repositories.add(queue, "app", repo)
    number = _issue(queue, "Blocked by a file")
    # Something (not a worktree) already sits where the worktree would go.
    (repo / ".worktrees" / f"task-{number}-blocked-by-a-file").mkdir(parents=True)
    with pytest.raises(InvalidInput, match="exists"):
        claiming.claim(queue, number, Authority.of({"agent-a"}), worktree=True)
    issue = issues.get(queue, number)
    assert issue.claimed_by is None and issue.status == Status.OPEN
    assert worktrees.list_worktrees(queue, "app", everything=True) == []


def test_worktree_of_an_issue_without_repository_is_refused(queue: Queue, repo: Path):
    repositories.add(queue, "app", repo)
    number = _issue(queue, "Nowhere", repo=None)
    with pytest.raises(InvalidInput, match="belongs to no repository"):
        claiming.claim(queue, number, Authority.of({"agent-a"}), worktree=True)
    assert issues.get(queue, number).claimed_by is None
    # Refused before the claim: a failed call leaves no claim or release in the history.
    assert [e.kind for e in notes.history(queue, number)] == ["created"]


def test_claim_next_with_a_worktree_passes_over_issues_in_no_repository(queue: Queue, repo: Path):
    repositories.add(queue, "app", repo)
    nowhere = _issue(queue, "Nowhere", repo=None, kind="bug")
    placed = _issue(queue, "In app")
    got = claiming.claim_next(queue, Authority.of({"agent-a"}), None, worktree=True)
    assert got is not None and got.number == placed and got.worktree is not None
    assert claiming.claim_next(queue, Authority.of({"agent-b"}), None, worktree=True) is None
    assert [e.kind for e in notes.history(queue, nowhere)] == ["created"]
    only_bugs = ReadyFilter(include_types=[IssueType.BUG])
    assert claiming.claim_next(queue, Authority.of({"agent-b"}), only_bugs, worktree=True) is None
    taken = claiming.claim_next(queue, Authority.of({"agent-b"}), only_bugs)
    assert taken is not None and taken.number == nowhere


def test_repository_setting_makes_a_worktree_per_claim(queue: Queue, repo: Path):
    repositories.add(queue, "app", repo, auto_worktree=True)
    _issue(queue, "Other repo work", repo=None)
    number = _issue(queue, "Auto")
    got = claiming.claim_next(queue, Authority.of({"agent-a"}), ReadyFilter(repository="app"))
    assert got is not None and got.number == number and got.worktree is not None
    assert Path(got.worktree.path).is_dir()


def test_ready_and_claim_next_filter_by_repository(queue: Queue, repo: Path, tmp_path: Path):
    repositories.add(queue, "app", repo)
    repositories.add(queue, "lib", make_repo(tmp_path / "lib"))
    first = _issue(queue, "in lib", repo="lib")
    second = _issue(queue, "in app")
    assert [i.number for i in ready_queue.ready(queue, ReadyFilter(repository="app"))] == [second]
    got = claims.claim_next(queue, Authority.of({"r"}), ReadyFilter(repository="lib"))
    assert got is not None and got.number == first
    assert claims.claim_next(queue, Authority.of({"r"}), ReadyFilter(repository="lib")) is None


@pytest.mark.parametrize(
    "branch",
    ["../../escape", "/etc/passwd", "a/../../b", "..", "-rf", "x\nfoo"],
)
def test_paths_never_leave_the_worktree_folder(queue: Queue, repo: Path, branch: str):
    repositories.add(queue, "app", repo)
    number = _issue(queue, "Escape")
    folder = repo.resolve() / ".worktrees"
    around = sorted(repo.parent.iterdir()), sorted(repo.iterdir())
    try:
        info = worktrees.spawn(queue, "app", number, branch=branch, by=Authority.of(()))
    except InvalidInput:
        assert worktrees.list_worktrees(queue, "app", everything=True) == []
    else:
        assert Path(info.path).parent == folder
    assert (sorted(repo.parent.iterdir()), sorted(repo.iterdir())) == around
    assert not Path("/etc/passwd").is_dir()


def test_a_symlinked_worktree_folder_is_refused(queue: Queue, repo: Path, tmp_path: Path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    repositories.add(queue, "app", repo)
    folder = repo.resolve() / ".worktrees"
    folder.rmdir()
    folder.symlink_to(elsewhere)
    number = _issue(queue, "Via a symlink")
    with pytest.raises(InvalidInput, match="symlink"):
        worktrees.spawn(queue, "app", number, by=Authority.of(()))
    assert list(elsewhere.iterdir()) == []


def test_a_symlink_where_the_worktree_goes_is_refused(queue: Queue, repo: Path, tmp_path: Path):
    repositories.add(queue, "app", repo)
    number = _issue(queue, "Link")
    target = tmp_path / "target"
    target.mkdir()
    (repo / ".worktrees" / f"task-{number}-link").symlink_to(target)
    with pytest.raises(InvalidInput):
        worktrees.spawn(queue, "app", number, by=Authority.of(()))
    assert list(target.iterdir()) == []


def _spawned(q: Queue, title: str, holder: str = "agent-a") -> tuple[int, Path, str]:
    number = _issue(q, title)
    taken = claiming.claim(q, number, Authority.of({holder}), worktree=True)
    assert taken.worktree is not None
    return number, Path(taken.worktree.path), taken.worktree.worktree_id


def test_conflict_scan_reports_files_changed_by_two(queue: Queue, repo: Path):
    repositories.add(queue, "app", repo)
    a, path_a, id_a = _spawned(queue, "A")
    b, path_b, id_b = _spawned(queue, "B")
    _c, path_c, _ = _spawned(queue, "C")
    commit(path_a, {"src/app.py": "x = 2\n", "only_a.txt": "a"})
    (path_b / "src" / "app.py").write_text("x = 3\n")  # uncommitted
    (path_b / "new.txt").write_text("untracked")
    (path_c / "new.txt").write_text("untracked too")
    report = conflicts.scan(queue, "app")
    assert report.scanned_worktrees == 3
    found = {c.file: (sorted(c.worktrees), sorted(c.issues)) for c in report.conflicts}
    assert found["src/app.py"] == (sorted([id_a, id_b]), sorted([a, b]))
    assert set(found) == {"src/app.py", "new.txt"}


def test_merge_fast_forwards_completes_and_cleans_up(queue: Queue, repo: Path):
    repositories.add(queue, "app", repo)
    number, path, wid = _spawned(queue, "Feature one")
    tip = commit(path, {"feature.txt": "1\n"}, "feature one")
    done = merges.merge(queue, "app", wid, by=Authority.overriding("admin", who="admin"))
    assert done.merged and done.worktree_cleaned and done.commit == tip
    assert git.head(repo) == tip and git.dirty_paths(repo) == []
    assert (repo / "feature.txt").read_text() == "1\n"  # the main checkout moved with it
    assert not path.exists()
    assert not git.branch_exists(repo, f"task/{number}-feature-one")
    assert issues.get(queue, number).status == Status.DONE
    again = merges.merge(queue, "app", wid, by=Authority.overriding("admin", who="admin"))
    assert again.already_merged and git.head(repo) == tip


def test_diverged_branches_get_a_merge_commit_or_a_squash(queue: Queue, repo: Path, tmp_path: Path):
    repositories.add(queue, "app", repo)
    _n1, p1, w1 = _spawned(queue, "one")
    _n2, p2, w2 = _spawned(queue, "two")
    commit(p1, {"one.txt": "1"}, "one")
    commit(p2, {"two.txt": "2"}, "two")
    merges.merge(queue, "app", w1, by=Authority.overriding("admin", who="admin"))
    merges.merge(queue, "app", w2, by=Authority.overriding("admin", who="admin"))
    assert log(repo)[0] == "Merge task/2-two (#2: two)"
    parents = git.run(["rev-list", "--parents", "-n", "1", "main"], cwd=repo).stdout.split()
    assert len(parents) == 3  # a merge commit
    assert (repo / "one.txt").exists() and (repo / "two.txt").exists()

    squash_repo = make_repo(tmp_path / "sq")
    repositories.add(queue, "sq", squash_repo, merge_mode="squash")
    numbers = []
    for title in ("three", "four"):
        n = _issue(queue, title, repo="sq")
        info = claiming.claim(queue, n, Authority.of({"agent-a"}), worktree=True).worktree
        assert info is not None
        commit(Path(info.path), {f"{title}.txt": title}, title)
        numbers.append((n, info.worktree_id))
    for _n, wid in numbers:
        merges.merge(queue, "sq", wid, by=Authority.overriding("admin", who="admin"))
    history = git.run(["rev-list", "--parents", "main"], cwd=squash_repo).lines
    assert all(len(line.split()) <= 2 for line in history)  # linear
    assert log(squash_repo)[0].startswith("#4: four")
    branches = git.run(["branch", "--format=%(refname:short)"], cwd=squash_repo).lines
    assert branches == ["main"]  # squashed branches are deleted too


def test_a_conflicting_merge_is_refused_and_nothing_changes(queue: Queue, repo: Path):
    repositories.add(queue, "app", repo)
    n1, p1, w1 = _spawned(queue, "first edit")
    n2, p2, w2 = _spawned(queue, "second edit")
    commit(p1, {"src/app.py": "x = 'one'\n"})
    commit(p2, {"src/app.py": "x = 'two'\n"})
    merges.merge(queue, "app", w1, by=Authority.overriding("admin", who="admin"))
    before = git.head(repo)
    tip = git.head(p2)
    with pytest.raises(MergeConflict) as caught:
        merges.merge(queue, "app", w2, by=Authority.overriding("admin", who="admin"))
    assert caught.value.message == "merge would result in conflicts in src/app.py"
    assert caught.value.facts["conflicting_files"] == ["src/app.py"]
    assert git.head(repo) == before and git.dirty_paths(repo) == []
    assert git.head(p2) == tip and git.dirty_paths(p2) == []
    assert issues.get(queue, n2).status == Status.IN_PROGRESS
    assert merge_lease.holder_of(queue, "app")[0] is None  # the lease was given back
    assert n1 != n2


def test_dirty_worktree_is_not_merged(queue: Queue, repo: Path):
    repositories.add(queue, "app", repo)
    _n, path, wid = _spawned(queue, "dirty")
    commit(path, {"x.txt": "x"})
    (path / "y.txt").write_text("not committed")
    with pytest.raises(WorktreeDirty):
        merges.merge(queue, "app", wid, by=Authority.overriding("admin", who="admin"))
    assert not (repo / "x.txt").exists()


def test_dirty_main_checkout_is_refused(queue: Queue, repo: Path):
    repositories.add(queue, "app", repo)
    _n, path, wid = _spawned(queue, "work")
    before = git.head(repo)
    commit(path, {"x.txt": "x"})
    (repo / "README.md").write_text("local edit\n")
    with pytest.raises(WorktreeDirty, match="checkout of main"):
        merges.merge(queue, "app", wid, by=Authority.overriding("admin", who="admin"))
    assert git.head(repo) == before
    with queue.db.read() as conn:  # the refusal left the worktree as it was
        state = conn.execute(
            select(worktrees_t.c.state, worktrees_t.c.merge_commit).where(worktrees_t.c.id == wid)
        ).one()
    assert tuple(state) == ("active", None)
    (repo / "README.md").write_text("hello\n")
    assert merges.merge(queue, "app", wid, by=Authority.overriding("admin", who="admin")).merged


def test_default_branch_not_checked_out_moves_by_compare_and_swap(queue: Queue, repo: Path):
    git.run(["checkout", "-q", "-b", "elsewhere"], cwd=repo)
    repositories.add(queue, "app", repo, default_branch="main")
    _n, path, wid = _spawned(queue, "cas")
    tip = commit(path, {"x.txt": "x"})
    merges.merge(queue, "app", wid, by=Authority.overriding("admin", who="admin"))
    assert git.branch_tip(repo, "main") == tip
    assert git.current_branch(repo) == "elsewhere"


def test_merges_wait_for_the_lease_and_a_dead_holders_lease_expires(
    queue: Queue, repo: Path, clock: FakeClock
):
    repositories.add(queue, "app", repo)
    _n, path, wid = _spawned(queue, "leased")
    commit(path, {"x.txt": "x"})
    assert merge_lease.take(queue, "app", "dead-merger", 60)
    with pytest.raises(MergeBusy):
        merges.merge(
            queue, "app", wid, by=Authority.overriding("admin", who="admin"), wait_seconds=0.2
        )
    clock.advance(61)
    assert merges.merge(queue, "app", wid, by=Authority.overriding("admin", who="admin")).merged


def test_the_merge_lease_is_renewed_while_the_merge_runs(queue: Queue, repo: Path):
    """Gates and git steps may outlast the lease: its holder renews it, so another merger
    cannot take it meanwhile (nor after it ends, before it is released)."""
    repositories.add(queue, "app", repo)
    queue.clock = lambda: datetime.now(UTC)
    with merge_lease.merge_lease(queue, "app", lease_seconds=1):
        holder, _ = merge_lease.holder_of(queue, "app")
        time.sleep(2.5)
        assert not merge_lease.take(queue, "app", "another-merger", 1)
        assert merge_lease.holder_of(queue, "app")[0] == holder
    assert merge_lease.holder_of(queue, "app")[0] is None
    assert merge_lease.take(queue, "app", "another-merger", 1)


def test_a_lease_held_by_a_gone_process_of_this_host_is_taken_at_once(queue: Queue, repo: Path):
    """A merger killed mid-merge leaves its lease to run out; a process of this host that
    is gone holds nothing, so the next merge takes the lease at once and says so."""
    repositories.add(queue, "app", repo)
    _n, path, wid = _spawned(queue, "stranded")
    commit(path, {"x.txt": "x"})
    dead = subprocess.Popen(["true"])  # a pid of this host, no longer running
    dead.wait()
    gone = f"{socket.gethostname()[:60]}:{dead.pid}:0badc0de"
    alive = f"{socket.gethostname()[:60]}:{os.getpid()}:0badc0de"
    elsewhere = f"another-host:{dead.pid}:0badc0de"
    for holder in (alive, elsewhere):  # alive, or unknowable: the lease is waited out
        assert merge_lease.take(queue, "app", holder, 600)
        with pytest.raises(MergeBusy):
            merges.merge(
                queue, "app", wid, by=Authority.overriding("admin", who="admin"), wait_seconds=0.1
            )
        merge_lease.give_back(queue, "app", holder)
    assert merge_lease.take(queue, "app", gone, 600)
    assert merges.merge(
        queue, "app", wid, by=Authority.overriding("admin", who="admin"), wait_seconds=0
    ).merged
    assert merge_lease.holder_of(queue, "app")[0] is None  # released after the merge
    with queue.db.read() as conn:
        taken = conn.execute(
            text("SELECT actor, before, after FROM events WHERE kind = 'merge_lease_taken_over'")
        ).all()
    assert len(taken) == 1
    assert json.loads(taken[0].before) == {"repository": "app", "holder": gone}
    assert json.loads(taken[0].after)["holder"] == taken[0].actor != gone


def test_crash_after_the_ref_moved_then_rerun_finishes_once(queue: Queue, repo: Path):
    """The state a kill -9 leaves between moving the default branch and the cleanup: the
    rerun sees the branch merged and only cleans up."""
    repositories.add(queue, "app", repo, merge_mode="squash")
    _n0, p0, w0 = _spawned(queue, "zero")
    commit(p0, {"zero.txt": "0"})
    merges.merge(queue, "app", w0, by=Authority.overriding("admin", who="admin"))
    number, path, wid = _spawned(queue, "crashy")
    commit(path, {"c.txt": "c"})  # diverged from main: a squash commit is needed
    head = git.head(repo)
    tree = git.merge_tree(repo, head, git.head(path)).tree
    assert tree is not None
    landed = git.commit_tree(repo, tree, [head], "squashed by the crashed run")
    queue.db.write(
        lambda conn: conn.execute(
            update(worktrees_t)
            .where(worktrees_t.c.id == wid)
            .values(state="merging", merge_commit=landed)
        )
    )
    git.merge_ff_only(repo, landed)
    done = merges.merge(queue, "app", wid, by=Authority.overriding("admin", who="admin"))
    assert done.already_merged and git.head(repo) == landed
    assert log(repo).count("squashed by the crashed run") == 1
    assert not path.exists() and issues.get(queue, number).status == Status.DONE


def test_crash_before_the_ref_moved_then_rerun_merges(queue: Queue, repo: Path):
    repositories.add(queue, "app", repo)
    _n, path, wid = _spawned(queue, "early crash")
    tip = commit(path, {"e.txt": "e"})
    main = git.head(repo)
    queue.db.write(
        lambda conn: conn.execute(
            update(worktrees_t)
            .where(worktrees_t.c.id == wid)
            .values(state="merging", merge_commit="0" * 40)
        )
    )
    # The recorded merge commit is one git has never seen: git says so, nothing moves.
    with pytest.raises(GitFailed, match=f"^git merge-base failed: .*{'0' * 40}") as caught:
        merges.merge(queue, "app", wid, by=Authority.overriding("admin", who="admin"))
    assert (caught.value.code, caught.value.facts) == ("GIT_FAILED", {"command": "merge-base"})
    assert git.head(repo) == main
    queue.db.write(
        lambda conn: conn.execute(
            update(worktrees_t).where(worktrees_t.c.id == wid).values(merge_commit=tip)
        )
    )
    assert (
        merges.merge(queue, "app", wid, by=Authority.overriding("admin", who="admin")).commit == tip
    )


def test_prune_keeps_dirty_and_live_worktrees(queue: Queue, repo: Path):
    repositories.add(queue, "app", repo)
    done_n, done_path, _ = _spawned(queue, "done clean")
    dirty_n, dirty_path, _ = _spawned(queue, "done dirty")
    _live_n, live_path, _ = _spawned(queue, "still worked on")
    released_n, released_path, _ = _spawned(queue, "released")
    commit(done_path, {"d.txt": "d"})
    (dirty_path / "wip.txt").write_text("uncommitted")
    claims.complete(queue, done_n, Authority.overriding("admin", who="admin"))
    claims.complete(queue, dirty_n, Authority.overriding("admin", who="admin"))
    claims.release(queue, released_n, Authority.overriding("admin", who="admin"))
    report = worktree_cleanup.prune(queue, "app")
    assert {Path(w.path) for w in report.removed} == {done_path, released_path}
    assert {Path(w.path) for w in report.kept} == {dirty_path, live_path}
    assert all(w.disk_bytes and w.disk_bytes > 0 for w in report.removed + report.kept)
    assert dirty_path.exists() and live_path.exists() and not done_path.exists()
    # The done branch had a commit main lacks: it is kept, not lost.
    assert git.branch_exists(repo, f"task/{done_n}-done-clean")
    forced = worktree_cleanup.prune(queue, "app", force=True)
    assert {Path(w.path) for w in forced.removed} == {dirty_path}
    assert live_path.exists()


def test_remove_refuses_dirty_unless_forced(queue: Queue, repo: Path):
    repositories.add(queue, "app", repo)
    _n, path, wid = _spawned(queue, "remove me")
    (path / "wip.txt").write_text("uncommitted")
    with pytest.raises(WorktreeDirty):
        worktree_cleanup.remove(queue, "app", wid, by=Authority.overriding("admin", who="admin"))
    assert path.exists()
    assert (
        worktree_cleanup.remove(
            queue, "app", wid, force=True, by=Authority.overriding("admin", who="admin")
        ).state
        == "removed"
    )
    assert not path.exists()
    with pytest.raises(NotFound):
        worktree_cleanup.remove(queue, "app", "nope", by=Authority.overriding("admin", who="admin"))


def test_agents_register_heartbeat_and_list(queue: Queue, repo: Path, clock: FakeClock):
    repositories.add(queue, "app", repo)
    me = agents.register(queue, "claude-1", "claude")
    number, path, _ = _spawned(queue, "held", holder=me.agent_id)
    clock.advance(30)
    assert agents.heartbeat(queue, me.agent_id) == 1
    (listed,) = worktrees.with_paths(queue, agents.list_agents(queue))
    assert listed.last_seen == clock.now
    assert listed.claims == [number] and listed.worktrees == [str(path)]
    with pytest.raises(NotFound):
        agents.heartbeat(queue, "agent-unknown")


def test_schema_rows_round_trip(queue: Queue, repo: Path):
    repositories.add(queue, "app", repo)
    with queue.db.read() as conn:
        row = conn.execute(select(repositories_t)).one()
    assert row.merge_mode == "merge" and row.merge_holder is None
    assert os.path.isdir(row.worktree_dir)


def test_prune_and_remove_leave_a_merge_to_finish(queue: Queue, repo: Path, clock: FakeClock):
    repositories.add(queue, "app", repo)
    number, path, wid = _spawned(queue, "half merged")
    claims.complete(queue, number, Authority.overriding("admin", who="admin"))
    queue.db.write(
        lambda conn: conn.execute(
            update(worktrees_t).where(worktrees_t.c.id == wid).values(state="merging")
        )
    )
    with pytest.raises(Conflict, match="being merged"):
        worktree_cleanup.remove(
            queue, "app", wid, force=True, by=Authority.overriding("admin", who="admin")
        )
    assert worktree_cleanup.prune(queue, "app", force=True).removed == []
    assert path.exists()


def test_prune_takes_an_interrupted_spawn_only_once_it_is_old(
    queue: Queue, repo: Path, clock: FakeClock
):
    repositories.add(queue, "app", repo)
    _number, path, wid = _spawned(queue, "interrupted")
    queue.db.write(
        lambda conn: conn.execute(
            update(worktrees_t)
            .where(worktrees_t.c.id == wid)
            .values(state="creating", updated_at=clock.now)
        )
    )
    assert worktree_cleanup.prune(queue, "app").removed == []  # perhaps being made right now
    clock.advance(worktrees.CREATING_GRACE_SECONDS + 1)
    assert [w.id for w in worktree_cleanup.prune(queue, "app").removed] == [wid]
    assert not path.exists()
