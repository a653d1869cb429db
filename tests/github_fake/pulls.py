"""Pull requests for the fake GitHub: create and get (JSON, or the diff with ``Accept:
application/vnd.github.diff``), reviews, check runs and combined commit statuses of a
commit, and merging, with the field names and status codes of GitHub's REST documentation
(``/repos/{o}/{r}/pulls``, ``/pulls/{n}/reviews``, ``/commits/{ref}/check-runs``,
``/commits/{ref}/status``).

A pull request is also an issue (same number series, ``pull_request`` key in the issue
list), as on GitHub. Branches are seeded with ``seed_branch``, or read from a bare git
repository on disk set with ``set_git_dir`` (what ``git push`` updated), so that creating a
pull request from a branch nobody pushed is a 422 as on GitHub.
"""

from __future__ import annotations

import hashlib
import subprocess
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

DIFF_MEDIA_TYPE = "application/vnd.github.diff"
REVIEW_STATES = ("APPROVED", "CHANGES_REQUESTED", "COMMENTED", "DISMISSED", "PENDING")
CHECK_STATUSES = ("queued", "in_progress", "completed")
CHECK_CONCLUSIONS = (
    "success",
    "failure",
    "neutral",
    "cancelled",
    "skipped",
    "timed_out",
    "action_required",
)
STATUS_STATES = ("error", "failure", "pending", "success")
MERGEABLE_STATES = ("clean", "dirty", "blocked", "unstable", "behind", "draft", "unknown")
PULL_OPS = frozenset(
    {
        "seed_branch",
        "set_git_dir",
        "seed_pull",
        "set_pull",
        "add_review",
        "add_check_run",
        "add_status",
        "merge_pull",
        "pulls",
    }
)


@dataclass
class Text:
    """A non-JSON answer body (a diff)."""

    body: str
    content_type: str


@dataclass
class PullState:
    number: int
    head: str
    head_sha: str
    base: str
    base_sha: str
    draft: bool
    merged_at: datetime | None = None
    mergeable: bool | None = True
    mergeable_state: str = "clean"
    diff: str = ""
    reviews: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class RepoPulls:
    branches: dict[str, str] = field(default_factory=dict)
    git_dir: str | None = None
    pulls: dict[int, PullState] = field(default_factory=dict)
    check_runs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    statuses: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def fake_sha(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


class PullsControl:
    """Control operations for pull requests (mixed into ControlAPI)."""

    def _call(self, op: str, **kwargs: Any) -> Any:
        raise NotImplementedError

    def seed_branch(self, name: str, *, sha: str | None = None, repo: str | None = None) -> str:
        return str(self._call("seed_branch", name=name, sha=sha, repo=repo))

    def set_git_dir(self, path: str, *, repo: str | None = None) -> None:
        """Read branches from this (bare) git repository: the push remote of a test."""
        self._call("set_git_dir", path=path, repo=repo)

    def seed_pull(
        self,
        title: str,
        *,
        head: str = "feature",
        base: str = "main",
        body: str | None = None,
        draft: bool = False,
        diff: str = "",
        repo: str | None = None,
    ) -> dict[str, Any]:
        return dict(
            self._call(
                "seed_pull",
                title=title,
                head=head,
                base=base,
                body=body,
                draft=draft,
                diff=diff,
                repo=repo,
            )
        )

    def set_pull(self, number: int, *, repo: str | None = None, **changes: Any) -> None:
        """Change ``mergeable``, ``mergeable_state``, ``diff`` or ``draft`` of a pull."""
        self._call("set_pull", number=number, repo=repo, changes=changes)

    def add_review(
        self, number: int, state: str, *, user: str = "reviewer", repo: str | None = None
    ) -> dict[str, Any]:
        return dict(self._call("add_review", number=number, state=state, user=user, repo=repo))

    def add_check_run(
        self,
        sha: str,
        name: str,
        *,
        status: str = "completed",
        conclusion: str | None = "success",
        repo: str | None = None,
    ) -> dict[str, Any]:
        return dict(
            self._call(
                "add_check_run",
                sha=sha,
                name=name,
                status=status,
                conclusion=conclusion,
                repo=repo,
            )
        )

    def add_status(
        self, sha: str, context: str, state: str, *, repo: str | None = None
    ) -> dict[str, Any]:
        return dict(self._call("add_status", sha=sha, context=context, state=state, repo=repo))

    def merge_pull(self, number: int, *, repo: str | None = None) -> dict[str, Any]:
        """The pull request is merged (as if someone pressed the button)."""
        return dict(self._call("merge_pull", number=number, repo=repo))

    def pulls(self, *, repo: str | None = None) -> list[dict[str, Any]]:
        return list(self._call("pulls", repo=repo))


def git_branches(git_dir: str) -> dict[str, str]:
    """The branches of a git repository on disk and their commits (test-side only)."""
    done = subprocess.run(
        ["git", "for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads"],
        cwd=git_dir,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
        stdin=subprocess.DEVNULL,
    )
    found: dict[str, str] = {}
    for line in done.stdout.splitlines():
        name, _, sha = line.partition(" ")
        found[name] = sha
    return found


def combined_state(statuses: list[dict[str, Any]]) -> str:
    """GitHub's rule: failure if any is error or failure, pending if none or any pending,
    else success (the latest status of each context counts)."""
    latest: dict[str, str] = {}
    for s in statuses:
        latest[s["context"]] = s["state"]
    states = set(latest.values())
    if states & {"error", "failure"}:
        return "failure"
    if not states or "pending" in states:
        return "pending"
    return "success"


def git_diff(git_dir: str, base: str, head: str) -> str:
    """What GitHub's diff media type answers: the changes of head since it left base."""
    done = subprocess.run(
        ["git", "diff", "--no-color", f"{base}...{head}"],
        cwd=git_dir,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
        stdin=subprocess.DEVNULL,
    )
    return done.stdout
