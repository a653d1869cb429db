"""The tip a landing pushes, and GitHub's updates of it: the commit asked to land pushed to
the issue's branch, and a pull request's head told apart as that tip, GitHub's merge of the
base into it (``update-branch``), or a head someone else pushed."""

from __future__ import annotations

from pathlib import Path

from workq.github.submit import REMOTE
from workq.vcs import git

# How many of GitHub's updates of the pushed tip (merges of the base into it) a head may be.
UPDATES_MAX = 20


def commit(root: Path, sha: str) -> str | None:
    """``sha`` when it names a commit of the repository at ``root``, else None."""
    done = git.run(
        ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{sha}^{{commit}}"],
        cwd=root,
        check=False,
    )
    return done.stdout.strip() or None if done.returncode == 0 else None


def push(root: Path, sha: str, branch: str) -> None:
    """Push commit ``sha`` to ``branch`` of the remote (forced: the issue's branch is its
    holder's), whatever the local branch holds by then."""
    spec = f"+{sha}:refs/heads/{branch}"
    git.run(["push", "--porcelain", REMOTE, spec], cwd=root, timeout=120.0)


def _parents(root: Path, sha: str) -> list[str]:
    done = git.run(["rev-list", "--parents", "--max-count=1", sha, "--"], cwd=root)
    return done.stdout.split()[1:]


def _tree(root: Path, sha: str) -> str:
    return git.run(["rev-parse", "--verify", f"{sha}^{{tree}}"], cwd=root).stdout.strip()


def updates_of(root: Path, head: str, pushed: str, base: str) -> bool:
    """Whether ``head`` is ``pushed``, or GitHub's update of it: a merge commit whose first
    parent is ``pushed`` (or such an update, as often as the base moved), whose second is
    a commit of the base branch (``base``, its tip, or before), and whose tree is what
    merging the two gives (a commit that only claims those parents, with other content,
    is not an update)."""
    at = head
    for _ in range(UPDATES_MAX + 1):
        if at == pushed:
            return True
        parents = _parents(root, at)
        if len(parents) != 2:
            return False
        first, second = parents
        if not git.is_ancestor(root, second, base):
            return False
        merged = git.merge_tree(root, first, second)
        if merged.tree is None or merged.tree != _tree(root, at):
            return False
        at = first
    return False
