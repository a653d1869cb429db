"""The hand-off (issue 43, item 4): a claim that ends without completing leaves its work
saved (commits on their branch, uncommitted edits committed to a ref under refs/workq/,
the worktree untouched), and the next claim is briefed. Real git repositories, SQLite and
PostgreSQL (the ``queue`` fixture)."""

from __future__ import annotations

import logging
import os
import shlex
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Connection

from tests.conftest import ADMIN, FakeClock
from tests.services.coding.gaterepo import gated_repo
from tests.services.workspaces.gitrepo import commit
from tests.workq_cli import workq
from workq.config import Settings
from workq.domain import dates
from workq.domain.authority import Authority
from workq.errors import InvalidInput
from workq.schemas import Briefing, Event, Status
from workq.services.coding import gate_runs
from workq.services.handle import Queue, record
from workq.services.queue import blocking, claims, issues, notes
from workq.services.workspaces import (
    claiming,
    handoff,
    repositories,
    worktree_cleanup,
    worktrees,
)
from workq.vcs import git

A = Authority.of({"agent-a"})
B = Authority.of({"agent-b"})
C = Authority.of({"agent-c"})
# The edits of test_edits_and_commits: one tracked file changed, one deleted, untracked
# files (one named like an option), and an ignored one that is not the claim's work.
CHANGED = "x = 2  # FAIL for now\n"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    made = gated_repo(tmp_path / "app")
    commit(made, {".gitignore": "*.log\n"}, "ignore logs")
    return made


def _issue(q: Queue, title: str = "Parse the config") -> int:
    number = issues.create(q, title=title).number
    repositories.assign(q, number, "app", by=Authority.of(()))
    return number


def _files(where: Path) -> dict[str, bytes]:
    """Every file of a checkout (not .git), by path."""
    found = {}
    for folder, dirs, names in os.walk(where):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in names:
            path = Path(folder, name)
            found[str(path.relative_to(where))] = path.read_bytes()
    return found


def _index_bytes(where: Path) -> bytes:
    index = git.run(["rev-parse", "--path-format=absolute", "--git-path", "index"], cwd=where)
    return Path(index.stdout.strip()).read_bytes()


def _events(q: Queue, number: int, kind: str) -> list[Event]:
    return [e for e in notes.history(q, number, limit=200) if e.kind == kind]


def _work(q: Queue, repo: Path) -> tuple[int, Path]:
    """An issue A holds in a worktree with two commits, gates run (lint passes, the tests
    fail), a note, and uncommitted edits of every kind."""
    repositories.add(q, "app", repo)
    number = _issue(q)
    taken = claiming.claim(q, number, A, worktree=True)
    assert taken.worktree is not None and taken.briefing is None  # a first claim: none
    path = Path(taken.worktree.path)
    commit(path, {"src/parser.py": "def parse(): ...\n"}, "Add the parser")
    commit(path, {"src/app.py": "x = 1  # FAIL\n"}, "Wire the parser in")
    gate_runs.run(q, number, path, by=A)
    notes.comment(q, number, "The lexer still chokes on tabs", author="agent-a")
    (path / "src" / "app.py").write_text(CHANGED)
    (path / "README.md").unlink()
    (path / "docs").mkdir()
    (path / "docs" / "new.md").write_text("# new\n")
    (path / "-rf").write_text("not an option\n")
    (path / "debug.log").write_text("ignored\n")
    return number, path


def _saved_change(path: Path, ref: str) -> list[str]:
    """What the saved commit changes against its parent, one ``STATUS\tpath`` a line."""
    out = git.run(["diff", "--name-status", "--no-renames", f"{ref}^", ref, "--"], cwd=path)
    return sorted(out.lines)


def test_a_released_claim_saves_its_edits_and_briefs_the_next(queue: Queue, repo: Path) -> None:
    number, path = _work(queue, repo)
    head = git.head(path)
    files, index = _files(path), _index_bytes(path)

    claims.release(queue, number, A, reason="out of time", discard=True)

    # Nothing in the worktree moved: its files, its index, its HEAD.
    assert _files(path) == files and _index_bytes(path) == index and git.head(path) == head
    (saved,) = _events(queue, number, "work_saved")
    after = saved.after or {}
    ref = f"refs/workq/saved/{number}/1"
    assert after["how"] == "released" and after["holder"] == "agent-a"
    assert after["commits"] == ["Wire the parser in", "Add the parser"]
    assert after["commits_ahead"] == 2 and after["edits_ref"] == ref
    assert after["worktree"] == str(path) and after["branch"] == git.current_branch(path)
    assert set(after["files_changed"]) == {
        "-rf",
        "README.md",
        "docs/new.md",
        "src/app.py",
        "src/parser.py",
    }
    # The ref holds exactly the edits, on top of HEAD: not the ignored log.
    assert git.run(["rev-parse", f"{ref}^"], cwd=path).stdout.strip() == head
    assert _saved_change(path, ref) == ["A\t-rf", "A\tdocs/new.md", "D\tREADME.md", "M\tsrc/app.py"]
    assert git.show_file(path, ref, "src/app.py") == CHANGED

    taken = claiming.claim(queue, number, B, worktree=True)
    assert taken.worktree is not None and taken.worktree.path == str(path)  # the same one
    b = taken.briefing
    assert b is not None
    assert (b.previous_holder, b.ended, b.reason) == ("agent-a", "released", "out of time")
    assert b.commits == ["Wire the parser in", "Add the parser"] and b.commits_ahead == 2
    assert {(g.gate, g.passed) for g in b.gates} == {("lint", True), ("tests", False)}
    assert [n.body for n in b.notes] == ["The lexer still chokes on tabs"]
    assert (b.worktree, b.branch, b.edits_ref) == (str(path), taken.worktree.branch, ref)
    assert b.edits_in_worktree and b.restore is None and "still holds" in b.where
    assert any("agent-a released" in line for line in b.lines(str))
    # The attempts, from the history.
    tried = handoff.attempts(notes.history(queue, number, limit=200))
    assert [(t.holder, t.ended) for t in tried] == [("agent-a", "released"), ("agent-b", None)]
    assert tried[0].saved == f"2 commit(s) on {b.branch}, edits saved as {ref}"


def _cli(settings: Settings, *args: str) -> str:
    url = settings.url
    where = (
        ["--db", url.removeprefix("sqlite:///")]
        if url.startswith("sqlite")
        else ["--database-url", url]
    )
    done = workq(*where, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_after_prune_a_new_worktree_starts_from_the_saved_branch(
    queue: Queue, settings: Settings, repo: Path
) -> None:
    number, path = _work(queue, repo)
    branch = git.current_branch(path)
    claims.release(queue, number, A, discard=True)
    saved_files = _files(path)
    assert "removed" in _cli(settings, "worktree", "prune", "--force")
    assert not path.exists()

    taken = claiming.claim(queue, number, B, worktree=True)
    assert taken.worktree is not None
    new = Path(taken.worktree.path)
    assert taken.worktree.branch == branch  # the saved branch, with its commits
    b = taken.briefing
    assert b is not None and b.commits == ["Wire the parser in", "Add the parser"]
    assert not b.edits_in_worktree and b.restore is not None
    assert "new worktree" in b.where.lower() and "saved branch" in b.where
    assert b.restore in b.where
    # The command brings the edits back.
    subprocess.run(shlex.split(b.restore), cwd=new, check=True, capture_output=True)
    back = _files(new)
    for name in ("src/app.py", "docs/new.md", "-rf"):
        assert back[name] == saved_files[name]
    assert "README.md" not in back and "debug.log" not in back


def test_edits_alone_come_back_on_a_fresh_branch(
    queue: Queue, settings: Settings, repo: Path
) -> None:
    """No commit ahead: prune deletes the branch workq made; the edits' ref stays."""
    repositories.add(queue, "app", repo)
    number = _issue(queue)
    taken = claiming.claim(queue, number, A, worktree=True)
    assert taken.worktree is not None
    path = Path(taken.worktree.path)
    (path / "src" / "app.py").write_text(CHANGED)
    blocking.block(queue, number, "needs a person", by=A)
    (saved,) = _events(queue, number, "work_saved")
    assert (saved.after or {})["how"] == "blocked" and (saved.after or {})["commits_ahead"] == 0
    _cli(settings, "worktree", "prune", "--force")
    issues_unblocked = blocking.unblock(queue, number)
    assert not issues_unblocked.is_blocked

    again = claiming.claim(queue, number, B, worktree=True)
    b = again.briefing
    assert again.worktree is not None and b is not None
    assert (b.ended, b.reason, b.commits_ahead) == ("blocked", "needs a person", 0)
    assert b.restore == f"git cherry-pick --no-commit refs/workq/saved/{number}/1"
    new = Path(again.worktree.path)
    assert (new / "src" / "app.py").read_text() == "x = 1\n"
    subprocess.run(shlex.split(b.restore), cwd=new, check=True, capture_output=True)
    assert (new / "src" / "app.py").read_text() == CHANGED


def test_a_lapsed_claim_taken_over_saves_and_briefs(
    queue: Queue, repo: Path, clock: FakeClock
) -> None:
    repositories.add(queue, "app", repo)
    number = _issue(queue)
    taken = claiming.claim(queue, number, A, worktree=True)
    assert taken.worktree is not None
    path = Path(taken.worktree.path)
    commit(path, {"src/parser.py": "def parse(): ...\n"}, "Add the parser")
    (path / "notes.txt").write_text("half way\n")
    clock.advance(queue.lease_seconds + 1)

    # claim_next: on PostgreSQL, the one-statement claim.
    got = claiming.claim_next(queue, B, None, worktree=True)
    assert got is not None and got.number == number and got.previous_holder == "agent-a"
    (saved,) = _events(queue, number, "work_saved")
    assert (saved.after or {})["how"] == "taken_over" and saved.actor == "agent-a"
    b = got.briefing
    assert b is not None and got.worktree is not None and got.worktree.path == str(path)
    assert (b.previous_holder, b.ended, b.commits) == ("agent-a", "taken_over", ["Add the parser"])
    assert b.edits_ref == f"refs/workq/saved/{number}/1" and b.edits_in_worktree
    assert (path / "notes.txt").read_text() == "half way\n"


def test_a_lapse_saved_first_is_not_saved_twice(queue: Queue, repo: Path, clock: FakeClock) -> None:
    """The stall watcher saves a lapsed lease's work; the takeover finds it saved."""
    repositories.add(queue, "app", repo)
    number = _issue(queue)
    taken = claiming.claim(queue, number, A, worktree=True)
    assert taken.worktree is not None
    (Path(taken.worktree.path) / "src" / "app.py").write_text(CHANGED)
    clock.advance(queue.lease_seconds + 1)
    first = handoff.save(queue, number, how="lapsed", holder="agent-a")
    assert first is not None and first.edits_ref is not None
    claims.claim(queue, number, B)
    (saved,) = _events(queue, number, "work_saved")  # one event, one ref
    assert (saved.after or {})["how"] == "lapsed"
    assert git.refs_under(repo, f"refs/workq/saved/{number}") == [first.edits_ref]
    b = claiming.claim(queue, number, B).briefing
    assert b is None  # a renewal by its holder: no briefing


def test_nothing_to_save_records_nothing_and_briefs_nothing(queue: Queue, repo: Path) -> None:
    repositories.add(queue, "app", repo)
    number = _issue(queue)
    claiming.claim(queue, number, A, worktree=True)
    claims.release(queue, number, A)
    assert _events(queue, number, "work_saved") == []
    assert handoff.save(queue, number, how="released", holder="agent-a") is None
    with pytest.raises(InvalidInput, match="how must be one of"):
        handoff.save(queue, number, how="vanished", holder="agent-a")
    taken = claiming.claim(queue, number, B, worktree=True)
    assert taken.fence == 2 and taken.briefing is None
    assert "briefing" not in taken.model_dump()
    assert git.refs_under(repo, "refs/workq") == []


def test_a_first_claim_has_no_briefing(queue: Queue) -> None:
    number = issues.create(queue, title="Plain").number
    taken = claiming.claim(queue, number, A)
    assert taken.fence == 1 and taken.briefing is None
    other = issues.create(queue, title="Next").number
    got = claiming.claim_next(queue, B, None)
    assert got is not None and got.number == other and got.briefing is None


def test_a_release_without_a_repository_briefs_with_its_note(queue: Queue) -> None:
    number = issues.create(queue, title="No repository").number
    claims.claim(queue, number, A)
    notes.comment(queue, number, "Tried the obvious fix: no luck", author="agent-a")
    claims.release(queue, number, A)
    b = claiming.claim_next(queue, B, None)
    assert b is not None and b.briefing is not None
    assert b.briefing.notes[0].body == "Tried the obvious fix: no luck"
    assert b.briefing.worktree is None and b.briefing.edits_ref is None


def test_a_branch_named_like_an_option_is_saved_as_any(queue: Queue, repo: Path) -> None:
    repositories.add(queue, "app", repo)
    number = _issue(queue)
    branch = "fix/--output=leak.txt"  # as an option, git would write leak.txt
    taken = claiming.claim(queue, number, A, worktree=True, branch=branch)
    assert taken.worktree is not None and taken.worktree.branch == branch
    path = Path(taken.worktree.path)
    commit(path, {"--help": "a file\n"}, "--version")
    (path / "--output=x").write_text("edit\n")
    claims.release(queue, number, A, discard=True)
    (saved,) = _events(queue, number, "work_saved")
    after = saved.after or {}
    assert after["branch"] == branch and after["commits"] == ["--version"]
    assert _saved_change(path, after["edits_ref"]) == ["A\t--output=x"]
    b = claiming.claim(queue, number, B).briefing
    assert b is not None and b.branch == branch and b.commits == ["--version"]
    assert [p for p in repo.parent.rglob("*") if p.name == "leak.txt"] == []


def test_a_worktree_whose_git_is_broken_still_releases(
    queue: Queue, repo: Path, caplog: pytest.LogCaptureFixture
) -> None:
    repositories.add(queue, "app", repo)
    number = _issue(queue)
    taken = claiming.claim(queue, number, A, worktree=True)
    assert taken.worktree is not None
    path = Path(taken.worktree.path)
    (path / "src" / "app.py").write_text(CHANGED)
    (path / ".git").write_text("gitdir: /nonexistent/worktree\n")
    with caplog.at_level(logging.WARNING, logger="workq.services"):
        released = claims.release(queue, number, A, reason="lost", discard=True)
    assert released.status == Status.OPEN and released.claimed_by is None
    assert "a hook failed" in caplog.text
    assert _events(queue, number, "work_saved") == []
    assert (path / "src" / "app.py").read_text() == CHANGED
    # The next claim is not refused for it either.
    again = claiming.claim(queue, number, B)
    assert again.claimed_by == "agent-b" and again.briefing is not None
    assert (again.briefing.ended, again.briefing.reason) == ("released", "lost")
    assert again.briefing.worktree == str(path) and again.briefing.edits_ref is None


def test_attempts_name_each_claim_and_how_it_ended(queue: Queue, clock: FakeClock) -> None:
    number = issues.create(queue, title="Attempts").number
    claims.claim(queue, number, A)
    clock.advance(queue.lease_seconds + 1)
    claims.claim(queue, number, B)
    claims.release(queue, number, B)
    claims.claim(queue, number, C)
    claims.complete(queue, number, C)
    tried = handoff.attempts(notes.history(queue, number, limit=200))
    assert [(t.holder, t.ended) for t in tried] == [
        ("agent-a", "taken_over"),
        ("agent-b", "released"),
        ("agent-c", "completed"),
    ]


def test_briefing_lines_say_who_how_what_and_where() -> None:
    b = Briefing.model_validate(
        {
            "previous_holder": "agent-a",
            "ended": "stall_released",
            "ended_at": "2026-01-01T12:00:00Z",
            "commits": ["One"],
            "commits_ahead": 3,
            "where": "In the worktree /w on branch b",
        }
    )
    said = b.lines(dates.stamp)
    assert said[0] == "Previous claim by agent-a stall released at 2026-01-01 12:00:00Z"
    assert said[1] == "3 commit(s) ahead: One; and 2 more"
    assert said[-1] == "In the worktree /w on branch b"


def test_the_worktree_of_a_removed_attempt_is_found_again(queue: Queue, repo: Path) -> None:
    """worktrees.spawn picks the removed worktree's branch when it still has work."""
    repositories.add(queue, "app", repo)
    number = _issue(queue, "A title")
    taken = claiming.claim(queue, number, A, worktree=True, branch="feature/own-name")
    assert taken.worktree is not None
    commit(Path(taken.worktree.path), {"f.txt": "f\n"}, "Work")
    claims.release(queue, number, A, discard=True)
    issues.update_issue(queue, number, title="Another title", by=Authority.of(()))
    worktree_cleanup.prune(queue, "app")
    assert worktrees.get_for_issue(queue, number) is None
    again = claiming.claim(queue, number, B, worktree=True)
    assert again.worktree is not None and again.worktree.branch == "feature/own-name"


def _record(q: Queue, number: int, kind: str, holder: str) -> None:
    """An event the stall watcher records (``lease_lapsed``, ``stall_released``)."""
    issue = issues.get(q, number)

    def write(conn: Connection) -> None:
        record(
            q,
            conn,
            kind=kind,
            issue_id=issue.id,
            number=number,
            actor="workq",
            now=q.now(),
            before={"claimed_by": holder},
        )

    q.db.write(write)


def test_a_stalled_claim_released_loses_nothing_and_says_so(queue: Queue, repo: Path) -> None:
    """The stall watcher's way: save, record stall_released, release with an override."""
    number, path = _work(queue, repo)
    files, head = _files(path), git.head(path)
    saved = handoff.save(queue, number, how="stall_released", holder="agent-a", actor="workq")
    assert saved is not None and saved.edits_ref is not None and saved.commits_ahead == 2
    _record(queue, number, "stall_released", "agent-a")
    claims.release(queue, number, ADMIN, reason="stalled", discard=True)
    assert len(_events(queue, number, "work_saved")) == 1  # the release found it saved
    assert _files(path) == files and git.head(path) == head
    b = claiming.claim(queue, number, B).briefing
    assert b is not None and (b.previous_holder, b.ended) == ("agent-a", "stall_released")
    tried = handoff.attempts(notes.history(queue, number, limit=200))
    assert [(t.holder, t.ended) for t in tried] == [
        ("agent-a", "stall_released"),
        ("agent-b", None),
    ]


def test_a_recorded_lapse_is_how_the_claim_ended(queue: Queue, clock: FakeClock) -> None:
    number = issues.create(queue, title="Lapses").number
    claims.claim(queue, number, A)
    notes.comment(queue, number, "started", author="agent-a")
    clock.advance(queue.lease_seconds + 1)
    _record(queue, number, "lease_lapsed", "agent-a")
    clock.advance(5)
    b = claiming.claim(queue, number, B).briefing
    assert b is not None and (b.previous_holder, b.ended) == ("agent-a", "lapsed")
    assert b.ended_at == clock.now - timedelta(seconds=5)
