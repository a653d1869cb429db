"""The git wrapper against real repositories in tmp_path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from workq.errors import GitFailed, GitMissing
from workq.vcs import git


def make_repo(path: Path) -> Path:
    path.mkdir()
    git.run(["init", "-q", "-b", "main"], cwd=path)
    git.run(["config", "user.email", "t@example.invalid"], cwd=path)
    git.run(["config", "user.name", "T"], cwd=path)
    (path / "a.txt").write_text("one\n")
    git.run(["add", "a.txt"], cwd=path)
    git.run(["commit", "-q", "-m", "first"], cwd=path)
    return path


def test_identity_is_the_common_dir_from_every_worktree(tmp_path):
    repo = make_repo(tmp_path / "repo")
    git.run(["worktree", "add", "-q", "-b", "feat/1-x", str(tmp_path / "wt")], cwd=repo)
    assert git.common_dir(tmp_path / "wt") == git.common_dir(repo) == repo / ".git"
    assert git.toplevel(tmp_path / "wt") == tmp_path / "wt"
    assert git.current_branch(tmp_path / "wt") == "feat/1-x"
    assert git.current_branch(repo) == "main"


def test_detached_head_has_no_branch(tmp_path):
    repo = make_repo(tmp_path / "repo")
    git.run(["checkout", "-q", "--detach"], cwd=repo)
    assert git.current_branch(repo) is None
    assert len(git.head(repo)) == 40


def test_failure_carries_gits_message(tmp_path):
    repo = make_repo(tmp_path / "repo")
    with pytest.raises(GitFailed) as caught:
        git.run(["checkout", "no-such-branch"], cwd=repo)
    assert "no-such-branch" in caught.value.message
    assert caught.value.code == "GIT_FAILED"
    assert git.run(["checkout", "no-such-branch"], cwd=repo, check=False).returncode != 0


def test_not_a_repository(tmp_path):
    with pytest.raises(GitFailed, match="not a git repository"):
        git.toplevel(tmp_path)


def test_user_hooks_and_global_config_do_not_run(tmp_path, monkeypatch):
    repo = make_repo(tmp_path / "repo")
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\necho refused >&2\nexit 1\n")
    hook.chmod(0o755)
    (repo / "a.txt").write_text("two\n")
    git.run(["commit", "-q", "-am", "second"], cwd=repo)
    (repo / "a.txt").write_text("three\n")
    with pytest.raises(GitFailed, match="refused"):
        git.run(["commit", "-q", "-am", "third"], cwd=repo, hooks=True)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[alias]\n  st = status\n")
    monkeypatch.setenv("HOME", str(home))
    with pytest.raises(GitFailed):
        git.run(["st"], cwd=repo)


def test_dirty_paths_see_staged_unstaged_untracked_and_renames(tmp_path):
    repo = make_repo(tmp_path / "repo")
    assert git.dirty_paths(repo) == []
    (repo / "a.txt").write_text("changed\n")
    (repo / "new dir").mkdir()
    (repo / "new dir" / "b c.txt").write_text("x\n")
    git.run(["mv", "a.txt", "renamed.txt"], cwd=repo)
    assert sorted(git.dirty_paths(repo)) == ["new dir/b c.txt", "renamed.txt"]


def test_timeout_becomes_git_failed(tmp_path):
    repo = make_repo(tmp_path / "repo")
    with pytest.raises(GitFailed, match="did not finish"):
        git.run(["-c", "alias.wait=!sleep 5", "wait"], cwd=repo, timeout=0.5)


def test_branch_names_are_checked_by_git(tmp_path):
    repo = make_repo(tmp_path / "repo")
    assert git.is_valid_branch_name("feature/12-add-login", repo)
    for bad in ("a..b", "-x", "x y", "x~1", "x.lock", "@{", ""):
        assert not git.is_valid_branch_name(bad, repo), bad


def test_version_parsing_and_requirement():
    assert git.parse_version("git version 2.39.5") == (2, 39, 5)
    assert git.parse_version("git version 2.50.1.windows.1") == (2, 50, 1)
    assert git.version() >= (2, 0)
    with pytest.raises(GitMissing, match=r"needs git 99\.0 or newer"):
        git.require((99, 0), "everything")


def test_missing_git_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(GitMissing, match="not installed"):
        git.run(["version"], cwd=tmp_path)
    assert os.environ["PATH"] == str(tmp_path)
