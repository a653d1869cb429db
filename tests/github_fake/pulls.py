"""Pull requests for the fake GitHub: create and get (JSON, or the diff with ``Accept:
application/vnd.github.diff``), reviews and their comments on the diff, check runs (with
their output and annotations) and combined commit statuses of a commit, merging (``PUT
/pulls/{n}/merge``) and updating the branch (``PUT /pulls/{n}/update-branch``), with the
field names and status codes of GitHub's REST documentation (``/repos/{o}/{r}/pulls``,
``/pulls/{n}/reviews``, ``/pulls/{n}/comments``, ``/commits/{ref}/check-runs``,
``/check-runs/{id}/annotations``, ``/commits/{ref}/status``).

A pull request is also an issue (same number series, ``pull_request`` key in the issue
list), as on GitHub. Branches are seeded with ``seed_branch``, or read from a bare git
repository on disk set with ``set_git_dir`` (what ``git push`` updated), so that creating a
pull request from a branch nobody pushed is a 422 as on GitHub.

With a git directory the fake works on it as GitHub works on its repository: an open pull
request's ``head.sha`` and ``base.sha`` follow the branches, ``mergeable_state`` is computed
(conflicts with ``git merge-tree``, branch protection, check runs and statuses of the head),
merging makes the merge, squash or rebased commits and moves the base branch, updating the
branch merges the base into the head branch, and ``protect_branch`` installs a ``pre-receive``
hook that refuses pushes to the protected branch (the fake's own ref updates run no hooks).
Without one, merging only records the merge (with a made-up sha). The git plumbing runs with a
fixed identity (``GIT_IDENTITY``), no shell, closed stdin and a timeout.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
from collections.abc import Iterable, Sequence
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
    "stale",
    "startup_failure",
)
STATUS_STATES = ("error", "failure", "pending", "success")
ANNOTATION_LEVELS = ("notice", "warning", "failure")
MERGEABLE_STATES = ("clean", "dirty", "blocked", "unstable", "behind", "draft", "unknown")
MERGE_METHODS = ("merge", "squash", "rebase")
# What a required check may end with and still let the pull request merge (as on GitHub).
PASSING = frozenset({"success", "neutral", "skipped"})
# Check run conclusions and status states that make a pull request "unstable".
FAILING = frozenset({"failure", "timed_out", "cancelled", "action_required", "error"})
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
        "protect_branch",
        "pulls",
    }
)
# Who the fake's own commits (merges, squashes, rebases, branch updates) are by.
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "GitHub",
    "GIT_AUTHOR_EMAIL": "noreply@github.com",
    "GIT_COMMITTER_NAME": "GitHub",
    "GIT_COMMITTER_EMAIL": "noreply@github.com",
}
GIT_TIMEOUT = 30
HOOK_MARK = "# written by the fake GitHub (tests/github_fake/pulls.py): branch protection"


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
    merge_commit_sha: str | None = None  # the real one, once merged through the API
    # ``mergeable`` and ``mergeable_state`` a test forced with ``set_pull``; the others are
    # computed (``mergeable`` from the state: false when "dirty", null when "unknown").
    forced: dict[str, Any] = field(default_factory=dict)
    diff: str = ""
    reviews: list[dict[str, Any]] = field(default_factory=list)
    review_comments: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Protection:
    """Branch protection: required checks (check run names or status contexts) and whether
    the head must contain the base's tip ("Require branches to be up to date")."""

    required_checks: tuple[str, ...] = ()
    up_to_date: bool = False


@dataclass
class RepoPulls:
    branches: dict[str, str] = field(default_factory=dict)
    git_dir: str | None = None
    pulls: dict[int, PullState] = field(default_factory=dict)
    check_runs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    statuses: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    protection: dict[str, Protection] = field(default_factory=dict)
    annotations: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # by run id


class GitError(RuntimeError):
    """A git command of the fake failed in a way it does not expect."""


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
        """Change ``mergeable``, ``mergeable_state``, ``diff`` or ``draft`` of a pull.

        A ``mergeable`` or ``mergeable_state`` given here is forced: it is answered instead
        of the computed one (merging clears it). ``mergeable_state=None`` drops both forced
        values, so that they are computed again; ``mergeable=None`` forces "not known yet".
        """
        self._call("set_pull", number=number, repo=repo, changes=changes)

    def add_review(
        self,
        number: int,
        state: str,
        *,
        user: str = "reviewer",
        body: str = "",
        comments: Sequence[dict[str, Any]] = (),
        repo: str | None = None,
    ) -> dict[str, Any]:
        """A review of the pull request's head as it is now, with ``comments`` on its diff
        (each ``{"path", "line", "body"}``), served by ``GET .../pulls/{n}/comments``."""
        return dict(
            self._call(
                "add_review",
                number=number,
                state=state,
                user=user,
                body=body,
                comments=[dict(c) for c in comments],
                repo=repo,
            )
        )

    def add_check_run(
        self,
        sha: str,
        name: str,
        *,
        status: str = "completed",
        conclusion: str | None = "success",
        title: str | None = None,
        summary: str | None = None,
        annotations: Sequence[dict[str, Any]] = (),
        repo: str | None = None,
    ) -> dict[str, Any]:
        """A check run on ``sha``, its ``output`` with ``title``, ``summary`` and
        ``annotations`` (each ``{"path", "start_line", "annotation_level", "message"}``, more
        of the documented fields optional), served by ``GET .../check-runs/{id}/annotations``."""
        return dict(
            self._call(
                "add_check_run",
                sha=sha,
                name=name,
                status=status,
                conclusion=conclusion,
                title=title,
                summary=summary,
                annotations=[dict(a) for a in annotations],
                repo=repo,
            )
        )

    def add_status(
        self, sha: str, context: str, state: str, *, repo: str | None = None
    ) -> dict[str, Any]:
        return dict(self._call("add_status", sha=sha, context=context, state=state, repo=repo))

    def merge_pull(self, number: int, *, repo: str | None = None) -> dict[str, Any]:
        """The pull request is recorded as merged (as if someone pressed the button), with no
        check and without touching git: ``PUT .../pulls/{n}/merge`` merges for real."""
        return dict(self._call("merge_pull", number=number, repo=repo))

    def protect_branch(
        self,
        name: str,
        *,
        required_checks: Sequence[str] = (),
        up_to_date: bool = False,
        repo: str | None = None,
    ) -> dict[str, Any]:
        """Protect branch ``name``: pull requests into it are "blocked" until every check in
        ``required_checks`` (a check run name or a status context) passed on their head, and
        with ``up_to_date`` "behind" while their head does not contain the branch's tip.
        With a git directory (now or later) a ``pre-receive`` hook there refuses any push to
        the branch, with GitHub's GH006 message; merging through the API still moves it.
        Calling it again replaces the branch's rules."""
        return dict(
            self._call(
                "protect_branch",
                name=name,
                required_checks=list(required_checks),
                up_to_date=up_to_date,
                repo=repo,
            )
        )

    def pulls(self, *, repo: str | None = None) -> list[dict[str, Any]]:
        return list(self._call("pulls", repo=repo))


def git(
    git_dir: str, *args: str, env: dict[str, str] | None = None, codes: Iterable[int] = (0,)
) -> subprocess.CompletedProcess[str]:
    """Run ``git ARGS`` in ``git_dir`` with the fake's identity and no user or system
    configuration; a GitError unless it exits with one of ``codes``."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    isolated = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=git_dir,
            env={**clean, **isolated, **GIT_IDENTITY, **(env or {})},
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitError(f"git {' '.join(args)}: {exc}") from exc
    if done.returncode not in tuple(codes):
        raise GitError(f"git {' '.join(args)}: exit {done.returncode}: {done.stderr.strip()}")
    return done


def git_branches(git_dir: str) -> dict[str, str]:
    """The branches of a git repository on disk and their commits (test-side only)."""
    done = git(git_dir, "for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads")
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


def check_outcomes(
    check_runs: list[dict[str, Any]], statuses: list[dict[str, Any]]
) -> dict[str, list[str]]:
    """By check run name and status context: the latest outcome of each kind on a commit
    (a conclusion, "pending" for a run not completed, or a status state)."""
    latest: dict[str, dict[str, str]] = {}
    for run in check_runs:
        outcome = run["conclusion"] if run["status"] == "completed" else "pending"
        latest.setdefault(run["name"], {})["run"] = outcome
    for status in statuses:
        latest.setdefault(status["context"], {})["status"] = status["state"]
    return {name: list(kinds.values()) for name, kinds in latest.items()}


def checks_verdict(outcomes: dict[str, list[str]], required: Iterable[str]) -> str:
    """The verdict of the checks on a pull request's head: "blocked" if a required check
    has not passed (pending, missing or failed), "unstable" if any check failed, else
    "clean"."""
    for name in required:
        if not outcomes.get(name) or any(o not in PASSING for o in outcomes[name]):
            return "blocked"
    if any(o in FAILING for found in outcomes.values() for o in found):
        return "unstable"
    return "clean"


def git_diff(git_dir: str, base: str, head: str) -> str:
    """What GitHub's diff media type answers: the changes of head since it left base."""
    return git(git_dir, "diff", "--no-color", f"{base}...{head}").stdout


def merge_tree(git_dir: str, ours: str, theirs: str) -> str | None:
    """The tree of merging two commits (``git merge-tree --write-tree``), None on a conflict
    (exit 1 with a tree; exit 1 without one is an error, as is refusing unrelated
    histories)."""
    done = git(git_dir, "merge-tree", "--write-tree", ours, theirs, codes=(0, 1))
    tree = done.stdout.split("\n", 1)[0].strip()
    if not tree:
        raise GitError(f"git merge-tree {ours} {theirs}: {done.stderr.strip()}")
    return tree if done.returncode == 0 else None


def is_ancestor(git_dir: str, ancestor: str, commit: str) -> bool:
    return (
        git(git_dir, "merge-base", "--is-ancestor", ancestor, commit, codes=(0, 1)).returncode == 0
    )


def commit_tree(
    git_dir: str,
    tree: str,
    parents: Sequence[str],
    message: str,
    *,
    author: dict[str, str] | None = None,
) -> str:
    """A new commit object (no ref moves); ``author`` overrides GIT_AUTHOR_* variables."""
    args = ["commit-tree", tree, "-m", message]
    for parent in parents:
        args += ["-p", parent]
    return git(git_dir, *args, env=author).stdout.strip()


def update_ref(git_dir: str, ref: str, new: str, old: str) -> bool:
    """Move ``ref`` to ``new`` if it is still at ``old`` (no hooks run); False if it moved."""
    return git(git_dir, "update-ref", ref, new, old, codes=(0, 1, 128)).returncode == 0


def _tree_of(git_dir: str, commit: str) -> str:
    return git(git_dir, "rev-parse", f"{commit}^{{tree}}").stdout.strip()


def _pick_tree(git_dir: str, onto: str, commit: str) -> str | None:
    """The tree of cherry-picking ``commit`` onto ``onto``, None on a conflict. merge-tree
    (before git 2.40's --merge-base) merges from the commits' merge base, so both sides are
    restated as children of a parentless commit holding the tree of ``commit``'s parent."""
    parent = git(git_dir, "rev-parse", "--verify", "--quiet", f"{commit}^", codes=(0, 1))
    if parent.returncode == 0:
        before = _tree_of(git_dir, parent.stdout.strip())
    else:  # a root commit: it starts from the empty tree
        before = git(git_dir, "mktree").stdout.strip()
    base = commit_tree(git_dir, before, [], "base")
    ours = commit_tree(git_dir, _tree_of(git_dir, onto), [base], "ours")
    theirs = commit_tree(git_dir, _tree_of(git_dir, commit), [base], "theirs")
    return merge_tree(git_dir, ours, theirs)


def rebase_commits(git_dir: str, onto: str, head: str) -> str | None:
    """Replay the commits of ``head`` that ``onto`` lacks (merge commits left out) one by
    one onto ``onto``, keeping their messages and authors; the new tip, or None on a
    conflict. A commit whose change is already there is dropped, as ``git rebase`` does."""
    listed = git(git_dir, "rev-list", "--reverse", "--topo-order", "--no-merges", f"{onto}..{head}")
    tip = onto
    for commit in listed.stdout.split():
        tree = _pick_tree(git_dir, tip, commit)
        if tree is None:
            return None
        if tree == _tree_of(git_dir, tip):
            continue
        shown = git(git_dir, "show", "-s", "--format=%an%x00%ae%x00%ad%x00%B", "--date=raw", commit)
        name, email, date, message = shown.stdout.split("\0", 3)
        author = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": date}
        tip = commit_tree(git_dir, tree, [tip], message.rstrip("\n"), author=author)
    return tip


def land(git_dir: str, method: str, base_tip: str, head_tip: str, message: str) -> str | None:
    """The commit the base branch moves to when ``head_tip`` lands on ``base_tip`` by
    ``method`` (``message`` is not used by "rebase"), or None on a conflict. No ref moves."""
    if method == "rebase":
        return rebase_commits(git_dir, base_tip, head_tip)
    tree = merge_tree(git_dir, base_tip, head_tip)
    if tree is None:
        return None
    parents = [base_tip, head_tip] if method == "merge" else [base_tip]
    return commit_tree(git_dir, tree, parents, message)


def write_protection_hook(git_dir: str, branches: Iterable[str]) -> str:
    """(Re)write ``hooks/pre-receive`` of the bare repository so that pushes updating any of
    ``branches`` are refused with GitHub's message; its path."""
    refs = sorted(shlex.quote(f"refs/heads/{name}") for name in branches)
    lines = [
        "#!/bin/sh",
        HOOK_MARK,
        "refused=0",
        "while read -r old new ref; do",
        '    case "$ref" in',
    ]
    if refs:
        lines += [
            f"        {'|'.join(refs)})",
            '            echo "error: GH006: Protected branch update failed for $ref." >&2',
            '            echo "error: Changes must be made through a pull request." >&2',
            "            refused=1",
            "            ;;",
        ]
    lines += ["    esac", "done", 'exit "$refused"', ""]
    hooks = os.path.join(git_dir, "hooks")
    os.makedirs(hooks, exist_ok=True)
    path = os.path.join(hooks, "pre-receive")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    os.chmod(path, 0o755)
    return path
