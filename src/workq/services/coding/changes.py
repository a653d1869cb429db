"""What an issue's checkout changes: the files a lint of "only my changes" takes."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from workq.services.handle import Queue
from workq.services.workspaces import checkouts
from workq.vcs import git

__all__ = ["Changed", "changed_files"]


class Changed(NamedTuple):
    against: str
    """The default branch the changes are counted from (from where the branch left it)."""
    files: list[str]
    """Relative to the checkout's top, sorted; files that the changes delete left out."""


def changed_files(q: Queue, checkout: Path) -> Changed:
    """The files ``checkout`` changes since its branch left the repository's default
    branch: in its commits, staged, unstaged and untracked (not ignored).

    Raises:
        InvalidInput: not a git work tree, or its default branch is unknown.
    """
    found = checkouts.at(q, checkout)
    base = git.merge_base(found.path, "refs/heads/" + found.default_branch, "HEAD")
    names = git.changed_files(found.path, base)
    return Changed(found.default_branch, [n for n in names if (found.path / n).is_file()])
