"""The names of repositories: one registered with workq (``workq repo add NAME``), and one
on GitHub (``OWNER/NAME``), given or read from a git remote's URL."""

from __future__ import annotations

import re

from workq.errors import InvalidInput

REPOSITORY_NAME_MAX = 64
_REPOSITORY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_GITHUB_REPO = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
# A URL (https://host/o/r, ssh://git@host:22/o/r) or git's scp-like form (git@host:o/r,
# host:o/r), then OWNER/NAME with an optional .git and slash.
_REMOTE = re.compile(
    r"(?:[A-Za-z][A-Za-z0-9+.-]*://(?P<authority>[^/]+)/|(?:[^@/]+@)?(?P<host>[^@/:]+):)"
    r"(?P<repo>[^/]+/[^/]+?)(?:\.git)?/?"
)


def repository_name(name: str) -> str:
    """``name`` if it may name a registered repository.

    Raises:
        InvalidInput: it may not (field ``repo``).
    """
    if (
        not isinstance(name, str)
        or not _REPOSITORY_NAME.fullmatch(name)
        or len(name) > REPOSITORY_NAME_MAX
    ):
        raise InvalidInput(
            f"invalid repository name {name!r:.80}: use 1-{REPOSITORY_NAME_MAX} of "
            "A-Z a-z 0-9 . _ - (starting with a letter or digit)",
            field="repo",
        )
    return name


def is_github_repo(text: str) -> bool:
    """Whether ``text`` is a GitHub repository's ``OWNER/NAME`` (nothing around it)."""
    return _GITHUB_REPO.fullmatch(text) is not None


def owner(repo: str) -> str:
    """The ``OWNER`` of ``OWNER/NAME``."""
    return repo.partition("/")[0]


def github_repo_of_remote(url: str, *, host: str | None = None) -> str | None:
    """The ``OWNER/NAME`` a git remote's URL ends in; None for anything else (a local
    path, a URL with a longer path), or, given ``host``, for a remote on another host."""
    found = _REMOTE.fullmatch(url.strip())
    if found is None or not is_github_repo(found["repo"]):
        return None
    if host is not None:
        where = found["host"] or found["authority"].rpartition("@")[2].partition(":")[0]
        if where.lower() != host:
            return None
    return found["repo"]
