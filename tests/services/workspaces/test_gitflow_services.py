"""Seed 004's git steps through the services, on real git repositories in tmp_path: the
server's checkout switched to an issue's branch, and the worktree variant."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.services.coding.gaterepo import GATES_TOML, PY, gated_repo
from tests.services.workspaces.gitrepo import log, make_repo
from workq.domain.authority import Authority
from workq.errors import (
    AlreadyClaimed,
    BranchExists,
    Conflict,
    GitFailed,
    InvalidInput,
    MergeConflict,
    NotFound,
    NothingToCommit,
    NotHolder,
    OnDefaultBranch,
    QualityGateFailed,
    RuleViolation,
    TestsFailing,
    UncommittedChanges,
)
from workq.schemas import Status
from workq.services.coding import gates
from workq.services.handle import Queue
from workq.services.queue import claims, issues, notes
from workq.services.workspaces import checkouts, gitflow, repositories, to_main
from workq.vcs import git

# The merges here are trusted; the one test of the tests gate asks for evidence itself.
pytestmark = pytest.mark.usefixtures("trusted_tests_gate")

ME = "run-me"
BODY = "Make it.\n\n- [ ] parses input\n- [x] keeps order\n"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "app")


def _write(where: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        (where / name).write_text(text)


def _start(q: Queue, repo: Path, title: str = "Parse the input", **kw: object) -> int:
    number = issues.create(q, title=title, description=BODY).number
    gitflow.start_work_on_issue(q, repo, number, by=Authority.of({ME}), **kw)  # type: ignore[arg-type]
    return number


def _commit(q: Queue, where: Path, phase: str, files: dict[str, str], **kw: object) -> str:
    _write(where, files)
    by = Authority.of({ME})
    done = gitflow.commit_tdd_phase(q, where, phase, "the parser", by=by, actor=ME, **kw)  # type: ignore[arg-type]
    return done.commit_hash


def _branches(repo: Path) -> list[str]:
    return git.run(["branch", "--format=%(refname:short)"], cwd=repo).lines


# --- create_feature_branch -----------------------------------------------------------------


def test_create_feature_branch_from_the_default_branch(queue: Queue, repo: Path) -> None:
    git.switch_new(repo, "other", "main")
    (repo / "other.txt").write_text("x")
    git.stage_all(repo)
    git.commit(repo, "other work")
    made = gitflow.create_feature_branch(queue, repo, "feature", "config-schemas")
    assert (made.branch_name, made.created_from) == ("feature/config-schemas", "main")
    assert git.current_branch(repo) == "feature/config-schemas"
    assert git.head(repo) == git.head(repo, "main")  # from main, not from "other"


def test_create_feature_branch_refusals_change_nothing(queue: Queue, repo: Path) -> None:
    with pytest.raises(RuleViolation) as caught:
        gitflow.create_feature_branch(queue, repo, "feature", "Not_Kebab")
    assert caught.value.facts["rule"] == "TDD-002"
    gitflow.create_feature_branch(queue, repo, "fix", "one")
    git.switch(repo, "main")
    with pytest.raises(BranchExists) as exists:
        gitflow.create_feature_branch(queue, repo, "fix", "one")
    assert exists.value.code == "ERR_BRANCH_EXISTS"
    (repo / "README.md").write_text("changed\n")
    with pytest.raises(UncommittedChanges) as dirty:
        gitflow.create_feature_branch(queue, repo, "fix", "two")
    assert dirty.value.code == "ERR_UNCOMMITTED_CHANGES"
    assert dirty.value.facts["files"] == ["README.md"]
    assert git.current_branch(repo) == "main"
    assert _branches(repo) == ["fix/one", "main"]


def test_outside_a_git_work_tree_is_a_clear_error(queue: Queue, tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    with pytest.raises(InvalidInput, match="not a git work tree"):
        gitflow.create_feature_branch(queue, tmp_path / "plain", "feature", "x")


# --- link_issue_to_branch ----------------------------------------------------------------------


def test_link_claims_and_records_the_branch(queue: Queue, repo: Path) -> None:
    number = issues.create(queue, title="Link me").number
    with pytest.raises(OnDefaultBranch):
        gitflow.link_issue_to_branch(queue, repo, number, by=Authority.of({ME}))
    gitflow.create_feature_branch(queue, repo, "feature", "link-me")
    linked = gitflow.link_issue_to_branch(queue, repo, number, by=Authority.of({ME}))
    assert linked.model_dump() == {
        "branch_name": "feature/link-me",
        "issue_number": number,
        "project_status": "In Progress",
    }
    assert issues.get(queue, number).claimed_by == ME
    again = gitflow.link_issue_to_branch(queue, repo, number, by=Authority.of({ME}))
    assert again == linked  # idempotent: one link event
    kinds = [e.kind for e in notes.history(queue, number)]
    assert kinds.count("branch_linked") == 1
    link = checkouts.of_branch(queue, "feature/link-me")
    assert link is not None and link.number == number


def test_link_refuses_a_done_or_missing_issue_and_another_holder(queue: Queue, repo: Path) -> None:
    gitflow.create_feature_branch(queue, repo, "feature", "x")
    with pytest.raises(NotFound):
        gitflow.link_issue_to_branch(queue, repo, 99, by=Authority.of({ME}))
    done = issues.create(queue, title="done").number
    claims.claim(queue, done, Authority.of({"other"}))
    claims.complete(queue, done, Authority.of(["other"]))
    with pytest.raises(
        Conflict, match=rf"^Issue #{done} is done: no work to start on it$"
    ) as refused:
        gitflow.link_issue_to_branch(queue, repo, done, by=Authority.of({ME}))
    assert (refused.value.code, refused.value.facts) == ("CONFLICT", {"number": done})
    theirs = issues.create(queue, title="theirs").number
    claims.claim(queue, theirs, Authority.of({"other"}))
    with pytest.raises(AlreadyClaimed):
        gitflow.link_issue_to_branch(queue, repo, theirs, by=Authority.of({ME}))
    assert checkouts.of_issue(queue, theirs) is None
    # Without claiming it, another caller's claimed issue is not linked to this branch
    # either (its holder's merge would land this branch): the door, "reshape".
    with pytest.raises(NotHolder, match="held by other"):
        gitflow.link_issue_to_branch(
            queue, repo, theirs, by=Authority.of({ME}), move_to_in_progress=False
        )
    assert checkouts.of_issue(queue, theirs) is None
    claims.release(queue, theirs, Authority.of({"other"}))
    linked = gitflow.link_issue_to_branch(
        queue, repo, theirs, by=Authority.of({ME}), move_to_in_progress=False
    )
    assert linked.project_status == "open"  # nobody's: linked, not claimed
    assert checkouts.of_issue(queue, theirs) is not None


# --- start_work_on_issue ---------------------------------------------------------------------


def test_start_claims_branches_links_and_gives_the_context(queue: Queue, repo: Path) -> None:
    number = issues.create(queue, title="Parse the input", description=BODY).number
    started = gitflow.start_work_on_issue(
        queue, repo, number, by=Authority.of({ME}), branch_type="fix"
    )
    assert started.branch_name == f"fix/{number}-parse-the-input"
    assert started.issue.model_dump() == {
        "number": number,
        "title": "Parse the input",
        "acceptance_criteria": ["parses input", "keeps order"],
    }
    assert (started.path, started.worktree, started.resumed) == (str(repo), False, False)
    assert git.current_branch(repo) == started.branch_name
    assert issues.get(queue, number).claimed_by == ME
    # Again by the holder: what exists is reported, nothing made twice.
    git.switch(repo, "main")
    again = gitflow.start_work_on_issue(
        queue, repo, number, by=Authority.of({ME}), branch_type="fix"
    )
    assert again.resumed and again.branch_name == started.branch_name
    assert git.current_branch(repo) == started.branch_name


def test_start_on_a_dirty_checkout_claims_nothing(queue: Queue, repo: Path) -> None:
    number = issues.create(queue, title="Dirty").number
    (repo / "scratch.txt").write_text("x")
    with pytest.raises(UncommittedChanges):
        gitflow.start_work_on_issue(queue, repo, number, by=Authority.of({ME}))
    issue = issues.get(queue, number)
    assert (issue.status, issue.claimed_by) == (Status.OPEN, None)
    assert _branches(repo) == ["main"]


def test_start_gives_the_claim_back_when_git_fails(queue: Queue, repo: Path) -> None:
    number = issues.create(queue, title="Locked").number
    lock = repo / ".git" / "refs" / "heads" / "feature"
    lock.mkdir(parents=True)
    (lock / f"{number}-locked.lock").write_text("")  # git cannot create the branch ref
    with pytest.raises(GitFailed, match="cannot lock ref 'refs/heads/feature/") as caught:
        gitflow.start_work_on_issue(queue, repo, number, by=Authority.of({ME}))
    assert caught.value.code == "GIT_FAILED"
    assert caught.value.facts["command"].startswith("switch ")
    assert caught.value.facts["claim_released"] is True
    assert issues.get(queue, number).claimed_by is None


def test_another_runs_branch_is_not_taken_over(queue: Queue, repo: Path) -> None:
    number = issues.create(queue, title="Shared").number
    gitflow.start_work_on_issue(queue, repo, number, by=Authority.of({"run-other"}))
    git.switch(repo, "main")
    claims.release(queue, number, Authority.of(["run-other"]))
    with pytest.raises(BranchExists):
        gitflow.start_work_on_issue(queue, repo, number, by=Authority.of({ME}))
    assert issues.get(queue, number).claimed_by is None


# --- commit_tdd_phase --------------------------------------------------------------------------


def test_red_refuses_non_tests_and_changes_nothing(queue: Queue, repo: Path) -> None:
    number = _start(queue, repo)
    (repo / "tests").mkdir()
    (repo / "tests" / "test_parse.py").write_text("def test_x(): assert False\n")
    git.stage_all(repo)  # something staged before: the refusal leaves it staged
    (repo / "src" / "app.py").write_text("x = 2\n")
    before = git.run(["status", "--porcelain"], cwd=repo).stdout
    head = git.head(repo)
    with pytest.raises(RuleViolation) as caught:
        gitflow.commit_tdd_phase(queue, repo, "red", "the parser", by=Authority.of({ME}))
    assert caught.value.facts == {"rule": "TDD-001", "files": ["src/app.py"]}
    assert git.head(repo) == head
    assert git.run(["status", "--porcelain"], cwd=repo).stdout == before
    git.run(["checkout", "--", "src/app.py"], cwd=repo)
    red = gitflow.commit_tdd_phase(
        queue, repo, "red", "the parser", by=Authority.of({ME}), actor=ME, test_count="0/1"
    )
    assert red.commit_message.startswith("test: add failing tests for the parser")
    assert red.commit_message.endswith(f"\nIssue: #{number} Parse the input\n")
    assert red.issue_number == number
    assert git.run(["log", "-1", "--format=%B"], cwd=repo).stdout.strip() == (
        red.commit_message.strip()
    )
    events = [e for e in notes.history(queue, number) if e.kind == "tdd_committed"]
    assert events[-1].after is not None and events[-1].after["commit"] == red.commit_hash
    assert events[-1].after["phase"] == "red"


def test_nothing_to_commit_and_not_on_a_branch(queue: Queue, repo: Path) -> None:
    with pytest.raises(OnDefaultBranch):
        gitflow.commit_tdd_phase(queue, repo, "green", "x", by=Authority.of({ME}))
    _start(queue, repo)
    with pytest.raises(NothingToCommit):
        gitflow.commit_tdd_phase(queue, repo, "green", "x", by=Authority.of({ME}))


def test_commits_run_the_repositorys_hooks(queue: Queue, repo: Path) -> None:
    _start(queue, repo)
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\necho 'refused by the hook' >&2\nexit 1\n")
    hook.chmod(0o755)
    _write(repo, {"src/app.py": "x = 3\n"})
    head = git.head(repo)
    with pytest.raises(GitFailed, match=r"^git commit failed: refused by the hook$") as caught:
        gitflow.commit_tdd_phase(queue, repo, "green", "x", by=Authority.of({ME}))
    assert caught.value.facts["command"].startswith("commit ")
    assert caught.value.facts["exit_code"] == 1
    assert git.head(repo) == head
    assert git.staged_paths(repo) == []  # the index is as it was


# --- merge_to_main -------------------------------------------------------------------------------


def _parents(repo: Path, ref: str = "main") -> int:
    return len(git.run(["rev-list", "--parents", "-n", "1", ref], cwd=repo).stdout.split()) - 1


def test_merge_no_ff_makes_a_merge_commit_completes_and_cleans_up(queue: Queue, repo: Path) -> None:
    number = _start(queue, repo)
    branch = git.current_branch(repo)
    red = _commit(queue, repo, "red", {"tests/test_parse.py": "def test(): pass\n"})
    green = _commit(queue, repo, "green", {"src/parse.py": "def parse(): pass\n"})
    done = to_main.merge_to_main(queue, repo, by=Authority.of({ME}), actor=ME)
    assert (done.merged_branch, done.target_branch) == (branch, "main")
    assert done.branch_deleted and _branches(repo) == ["main"]
    assert git.current_branch(repo) == "main"
    assert done.commit_hash == git.head(repo, "main")
    assert _parents(repo) == 2  # a fast-forward was possible: no-ff made a merge commit
    assert git.is_ancestor(repo, red, "main") and git.is_ancestor(repo, green, "main")
    issue = issues.get(queue, number)
    assert issue.status == Status.DONE
    assert not git.dirty_paths(repo)
    kinds = [e.kind for e in notes.history(queue, number)]
    assert "merged_to_main" in kinds and "completed" in kinds


def test_merge_squash_lands_one_commit_and_can_keep_the_branch(queue: Queue, repo: Path) -> None:
    _start(queue, repo)
    branch = git.current_branch(repo)
    assert branch is not None
    _commit(queue, repo, "red", {"tests/test_parse.py": "def test(): pass\n"})
    green = _commit(queue, repo, "green", {"src/parse.py": "def parse(): pass\n"})
    before = git.head(repo, "main")
    done = to_main.merge_to_main(
        queue, repo, by=Authority.of({ME}), actor=ME, strategy="squash", delete_branch=False
    )
    assert _parents(repo) == 1
    assert git.run(["rev-parse", "main^"], cwd=repo).stdout.strip() == before
    assert not git.is_ancestor(repo, green, "main")
    assert (repo / "src" / "parse.py").exists() and git.current_branch(repo) == "main"
    assert not done.branch_deleted and branch in _branches(repo)
    assert log(repo)[0].startswith("#")


def test_merge_refuses_a_dirty_checkout_and_the_default_branch(queue: Queue, repo: Path) -> None:
    with pytest.raises(OnDefaultBranch):
        to_main.merge_to_main(queue, repo, by=Authority.of({ME}))
    number = _start(queue, repo)
    _commit(queue, repo, "green", {"src/parse.py": "x\n"})
    (repo / "src" / "parse.py").write_text("y\n")
    main = git.head(repo, "main")
    with pytest.raises(UncommittedChanges):
        to_main.merge_to_main(queue, repo, by=Authority.of({ME}))
    assert git.head(repo, "main") == main
    assert issues.get(queue, number).status == Status.IN_PROGRESS
    with pytest.raises(InvalidInput):
        to_main.merge_to_main(queue, repo, by=Authority.of({ME}), strategy="rebase")


def test_a_rerun_after_the_default_branch_moved_finishes(queue: Queue, repo: Path) -> None:
    """A crash after the default branch moved, before the issue was completed: the rerun
    completes it and merges nothing twice."""
    number = _start(queue, repo)
    branch = git.current_branch(repo)
    assert branch is not None
    _commit(queue, repo, "green", {"src/parse.py": "x\n"})
    tip = git.head(repo)
    main = git.head(repo, "main")
    merged = git.commit_tree(
        repo,
        git.run(["rev-parse", tip + "^{tree}"], cwd=repo).stdout.strip(),
        [main],
        "squash by the crashed run",
    )
    checkouts.intend_merge(queue, number, merged, by=Authority.of({ME}))
    git.update_ref(repo, "main", merged, main)
    done = to_main.merge_to_main(queue, repo, by=Authority.of({ME}), actor=ME, strategy="squash")
    assert done.commit_hash == merged
    assert log(repo).count("squash by the crashed run") == 1
    assert issues.get(queue, number).status == Status.DONE
    assert _branches(repo) == ["main"]


def test_merge_to_main_deletes_only_a_branch_workq_made(queue: Queue, repo: Path) -> None:
    """A person's branch linked to an issue lands and stays; a branch create_feature_branch
    made lands and goes (issue 40: cleanup deletes only branches workq created)."""
    git.switch_new(repo, "alice/parse", "main")
    number = issues.create(queue, title="Parse").number
    gitflow.link_issue_to_branch(queue, repo, number, by=Authority.of({ME}))
    _commit(queue, repo, "green", {"src/parse.py": "x\n"}, number=number)
    done = to_main.merge_to_main(queue, repo, by=Authority.of({ME}), actor=ME, number=number)
    assert git.is_ancestor(repo, git.head(repo, "alice/parse"), "main")
    assert not done.branch_deleted and "alice/parse" in _branches(repo)
    gitflow.create_feature_branch(queue, repo, "feature", "print")
    other = issues.create(queue, title="Print").number
    gitflow.link_issue_to_branch(queue, repo, other, by=Authority.of({ME}))
    _commit(queue, repo, "green", {"src/print.py": "y\n"}, number=other)
    done = to_main.merge_to_main(queue, repo, by=Authority.of({ME}), actor=ME, number=other)
    assert done.branch_deleted and "feature/print" not in _branches(repo)


# --- the worktree variant ---------------------------------------------------------------


def test_the_loop_in_a_worktree(queue: Queue, repo: Path) -> None:
    repositories.add(queue, "app", repo)
    number = issues.create(queue, title="In a worktree", description=BODY).number
    started = gitflow.start_work_on_issue(queue, repo, number, by=Authority.of({ME}), worktree=True)
    assert started.worktree and started.path != str(repo)
    assert started.branch_name == f"feature/{number}-in-a-worktree"
    assert git.current_branch(repo) == "main"  # the server's checkout stays where it was
    again = gitflow.start_work_on_issue(queue, repo, number, by=Authority.of({ME}))
    assert again.resumed and again.worktree and again.path == started.path
    where = Path(started.path)
    _write(where, {"src/app.py": "x = 9\n"})
    with pytest.raises(RuleViolation):
        gitflow.commit_tdd_phase(queue, repo, "red", "c", by=Authority.of({ME}))
    _write(where, {"tests/test_app.py": "def test(): pass\n"})
    git.run(["checkout", "--", "src/app.py"], cwd=where)
    red = gitflow.commit_tdd_phase(queue, repo, "red", "c", by=Authority.of({ME}))
    assert git.head(where) == red.commit_hash and red.issue_number == number
    _commit(queue, where, "green", {"src/app.py": "x = 10\n"})
    done = to_main.merge_to_main(queue, repo, by=Authority.of({ME}), actor=ME)
    assert _parents(repo) == 2 and done.branch_deleted
    assert not where.exists()
    assert issues.get(queue, number).status == Status.DONE
    assert (repo / "src" / "app.py").read_text() == "x = 10\n"
    # The answer was lost: the same call again says where it landed and changes nothing.
    head = git.head(repo, "main")
    rerun = to_main.merge_to_main(queue, repo, by=Authority.of({ME}), actor=ME, number=number)
    assert rerun.already_merged and not done.already_merged
    assert (rerun.merged_branch, rerun.target_branch) == (done.merged_branch, "main")
    assert rerun.commit_hash == done.commit_hash == head and rerun.branch_deleted
    assert git.head(repo, "main") == head


def test_merge_to_main_run_again_says_it_merged_and_where(queue: Queue, repo: Path) -> None:
    number = _start(queue, repo)
    _commit(queue, repo, "red", {"tests/test_parse.py": "def test(): pass\n"})
    done = to_main.merge_to_main(queue, repo, by=Authority.of({ME}), actor=ME, number=number)
    events = len(notes.history(queue, number))
    again = to_main.merge_to_main(queue, repo, by=Authority.of({ME}), actor=ME, number=number)
    assert again == done.model_copy(update={"already_merged": True})
    assert git.head(repo, "main") == done.commit_hash
    assert len(notes.history(queue, number)) == events  # nothing recorded, nothing moved
    # An issue that is done without a merge has no landing to report.
    other = issues.create(queue, title="done by hand").number
    claims.complete(queue, other, Authority.overriding("admin", who="admin"))
    with pytest.raises(Conflict, match=f"Issue #{other} has no branch"):
        to_main.merge_to_main(queue, repo, by=Authority.of({ME}), number=other)


def test_comment_with_the_seed_prefix(queue: Queue) -> None:
    number = issues.create(queue, title="talk").number
    added = gitflow.add_issue_comment(queue, number, "half done", "progress", author=ME)
    assert added.body == "**📝 Progress Update**\n\nhalf done"
    assert added.kind.value == "progress"
    assert notes.comments(queue, number)[-1].body == added.body
    with pytest.raises(InvalidInput):
        gitflow.add_issue_comment(queue, number, "  ", "progress", author=ME)


def test_a_repository_with_a_worktree_per_claim_gets_one(queue: Queue, repo: Path) -> None:
    repositories.add(queue, "app", repo, auto_worktree=True)
    number = issues.create(queue, title="Auto").number
    repositories.assign(queue, number, "app", by=Authority.of(()))
    (repo / "scratch.txt").write_text("the server's checkout may be dirty: it is not used")
    started = gitflow.start_work_on_issue(queue, repo, number, by=Authority.of({ME}))
    assert started.worktree and Path(started.path).is_dir()
    assert git.current_branch(Path(started.path)) == f"feature/{number}-auto"
    again = gitflow.start_work_on_issue(queue, repo, number, by=Authority.of({ME}))
    assert again.resumed and again.path == started.path


def test_a_worktree_needs_a_repository(queue: Queue, tmp_path: Path) -> None:
    number = issues.create(queue, title="Nowhere").number
    (tmp_path / "plain").mkdir()
    with pytest.raises(InvalidInput, match="belongs to no repository"):
        gitflow.start_work_on_issue(
            queue, tmp_path / "plain", number, by=Authority.of({ME}), worktree=True
        )
    assert [e.kind for e in notes.history(queue, number)] == ["created"]


def _conflicting(queue: Queue, repo: Path) -> tuple[int, str, str]:
    """An issue whose branch changes src/app.py as main does, differently: its number, its
    branch (checked out) and main's tip."""
    number = _start(queue, repo)
    branch = git.current_branch(repo)
    assert branch is not None
    _commit(queue, repo, "green", {"src/app.py": "x = 'ours'\n"})
    git.switch(repo, "main")
    _write(repo, {"src/app.py": "x = 'theirs'\n"})
    git.stage_all(repo)
    main = git.commit(repo, "a conflicting change on main")
    git.switch(repo, branch)
    return number, branch, main


def test_a_conflicting_merge_changes_nothing(queue: Queue, repo: Path) -> None:
    number, branch, main = _conflicting(queue, repo)
    with pytest.raises(MergeConflict) as caught:
        to_main.merge_to_main(queue, repo, by=Authority.of({ME}), actor=ME)
    assert caught.value.facts["conflicting_files"] == ["src/app.py"]
    assert git.head(repo, "main") == main and git.current_branch(repo) == branch
    assert issues.get(queue, number).status == Status.IN_PROGRESS


def _tests_gate_runs(tmp_path: Path, code: str) -> Path:
    """A gated repository whose tests gate runs ``python -c code``."""
    toml = GATES_TOML.replace(
        f'command = [{PY}, "checks/tests.py"]', f'command = [{PY}, "-c", {json.dumps(code)}]'
    )
    assert toml != GATES_TOML
    return gated_repo(tmp_path / "gated", toml=toml)


def test_a_conflict_is_refused_before_any_gate_runs(queue: Queue, tmp_path: Path) -> None:
    marker = tmp_path / "gates-ran"
    repo = _tests_gate_runs(tmp_path, f"open({str(marker)!r}, 'w')")
    queue.tests_gate = "evidence"
    number, _, main = _conflicting(queue, repo)
    with pytest.raises(MergeConflict) as caught:
        to_main.merge_to_main(queue, repo, by=Authority.of({ME}), actor=ME)
    assert caught.value.facts["conflicting_files"] == ["src/app.py"]
    assert not marker.exists()  # no gate ran
    assert git.head(repo, "main") == main
    assert issues.get(queue, number).status == Status.IN_PROGRESS


def test_a_gate_that_failed_on_a_commit_is_not_run_again_unless_asked(
    queue: Queue, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    repo = _tests_gate_runs(tmp_path, f"open({str(runs)!r}, 'a').write('x'); raise SystemExit(1)")
    queue.tests_gate = "evidence"
    number = _start(queue, repo)
    _commit(queue, repo, "green", {"src/app.py": "x = 2\n"})
    with pytest.raises(TestsFailing, match=r"tests \(exit 1\)$"):
        to_main.merge_to_main(queue, repo, by=Authority.of({ME}), actor=ME)
    assert runs.read_text() == "x"
    # The same commit again: refused from the stored run, which it names; not run again.
    with pytest.raises(TestsFailing, match=r"in a run that finished .* \(not run again\)$") as e:
        to_main.merge_to_main(queue, repo, by=Authority.of({ME}), actor=ME)
    assert runs.read_text() == "x"
    assert set(e.value.facts["failed_at"]) == {"tests"}
    assert "run_quality_gates" in (e.value.hint or "")
    # Asked: run_quality_gates runs them again on that commit.
    gates.run(queue, number, repo, by=Authority.of({ME}), actor=ME)
    assert runs.read_text() == "xx"
    assert issues.get(queue, number).status == Status.IN_PROGRESS


def test_merge_needs_the_gates_on_the_branch_tip(queue: Queue, tmp_path: Path) -> None:
    repo = gated_repo(tmp_path / "gated")
    queue.tests_gate = "evidence"
    number = _start(queue, repo)
    _commit(queue, repo, "green", {"src/app.py": "x = 'FAIL'\n"})
    main = git.head(repo, "main")
    with pytest.raises(TestsFailing):
        to_main.merge_to_main(queue, repo, by=Authority.of({ME}), actor=ME)
    assert git.head(repo, "main") == main
    assert issues.get(queue, number).status == Status.IN_PROGRESS
    _commit(queue, repo, "green", {"src/app.py": "x = 'BAD'\n"})
    with pytest.raises(QualityGateFailed):
        to_main.merge_to_main(queue, repo, by=Authority.of({ME}), actor=ME)
    _commit(queue, repo, "green", {"src/app.py": "x = 3\n"})
    done = to_main.merge_to_main(queue, repo, by=Authority.of({ME}), actor=ME)
    assert done.commit_hash == git.head(repo, "main") != main
    assert issues.get(queue, number).status == Status.DONE
