"""The git pre-commit hook: refuse a commit that changes a path another holder reserved
exclusively. ``install`` writes the hook into a repository; the hook runs ``workq hooks
check``, which is :func:`check`. workq's own commits (``commit_tdd_phase``) ask
:func:`refuse_reserved` in process, which answers PATHS_RESERVED naming holder and issue,
and tell the hook so (``CHECKED``): it then exits at once instead of starting a CLI.

Who commits: the run id in ``WORKQ_RUN_ID``, and the issue of the branch when its name is
``{type}/{number}-...`` (workflow branches are): the holder of that issue's claim and the
issue's own reservations are the committer's.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from workq.domain import globs
from workq.domain.authority import Authority
from workq.errors import GitFailed, InvalidInput, PathsReserved
from workq.services.handle import Queue
from workq.services.queue import reservations
from workq.vcs import git

MARK = "# workq pre-commit hook"
# The environment of a commit whose reservations workq checked itself: the hook skips.
CHECKED = {"WORKQ_HOOK_CHECKED": "1"}
# The hook's line that obeys it.
_SKIP = '[ "$WORKQ_HOOK_CHECKED" = 1 ] && exit 0  # checked by workq before committing'
_BRANCH = re.compile(r"[A-Za-z]+/(\d{1,9})(?:-|$)")


@dataclass(frozen=True)
class Refusal:
    path: str
    held: reservations.Held


def _work_tree(repo: Path) -> Path:
    """The root of the git work tree ``repo`` stands in.

    Raises:
        InvalidInput: ``repo`` is no directory, or in no git repository.
    """
    if not repo.is_dir():
        raise InvalidInput(
            f"{repo} is not a directory",
            field="repo",
            hint="give --repo a directory in the repository",
        )
    try:
        return git.toplevel(repo)
    except GitFailed:
        raise InvalidInput(
            f"{repo} is not in a git repository",
            field="repo",
            hint="run it inside the repository, or give --repo",
        ) from None


def _ours(text: str) -> bool:
    """Whether a hook is one workq wrote, and nothing else: its lines of its own would be
    lost if it were replaced."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or MARK not in text:
        return False
    mine = [
        line
        for line in lines
        if not (
            line.startswith("#!")
            or line.startswith(MARK)
            or line == _SKIP
            or (line.startswith("exec ") and line.endswith(" hooks check"))
        )
    ]
    return not mine


def install(repo: Path, *, db_path: Path | None, force: bool = False) -> Path:
    """Write the pre-commit hook into the repository ``repo`` stands in; it runs this
    Python's workq against ``db_path`` (a SQLite file), or else the database its
    environment names (WORKQ_DATABASE_URL). A hook that is not exactly one workq wrote (a
    foreign one, workq's with lines added, a symbolic link) is kept unless ``force``;
    forced, a link is replaced, not written through.

    Raises:
        InvalidInput: no repository at ``repo``, or a hook to keep.
    """
    hook = git.hooks_dir(_work_tree(repo)) / "pre-commit"
    if hook.is_symlink():
        if not force:
            raise InvalidInput(
                f"{hook} is a symbolic link (to {os.readlink(hook)})",
                hint="add 'workq hooks check' to the hook it points to, or replace the link "
                "with --force",
            )
        hook.unlink()
    elif hook.exists() and not force and not _ours(found := hook.read_text(errors="replace")):
        said = "has lines of its own" if MARK in found else "is not workq's"
        raise InvalidInput(
            f"{hook} exists and {said}",
            hint="add 'workq hooks check' to it yourself, or replace it with --force",
        )
    command = [sys.executable, "-m", "workq.cli.main"]
    if db_path is not None:
        command += ["--db", str(db_path.resolve())]
    command += ["hooks", "check"]
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text(
        f"#!/bin/sh\n{MARK}: refuses paths reserved by others\n"
        f"{_SKIP}\n"
        f"exec {shlex.join(command)}\n"
    )
    hook.chmod(0o755)
    return hook


def branch_issue(repo: Path) -> int | None:
    """The issue number of the checked-out branch ``{type}/{number}-...``, if it is one."""
    branch = git.current_branch(repo)
    found = _BRANCH.match(branch or "")
    return int(found.group(1)) if found else None


def check(
    q: Queue,
    repo: Path,
    *,
    by: Authority,
    issue: int | None = None,
    index_file: str | None = None,
) -> list[Refusal]:
    """The staged paths of ``repo`` that another holder reserved exclusively. The committer
    is ``by`` (its run ids) and the holder of ``issue`` (default: the issue of the branch).

    Raises:
        InvalidInput: no repository at ``repo``.
    """
    paths = git.staged_paths(_work_tree(repo), index_file)
    if not paths:
        return []
    if issue is None:
        issue = branch_issue(repo)
    held = reservations.list_live(q)
    mine = set(by.run_ids) | {h.holder for h in held if h.number == issue}
    refused: list[Refusal] = []
    for path in paths:
        for h in held:
            if h.mode != reservations.EXCLUSIVE or h.holder in mine or h.number == issue:
                continue
            if globs.matches(path, h.glob):
                refused.append(Refusal(path, h))
                break
    return refused


def refuse_reserved(q: Queue, repo: Path, *, by: Authority, issue: int | None) -> None:
    """What the hook would say, as an error: before workq commits what is staged in ``repo``.

    Raises:
        PathsReserved: a staged path another holder reserved exclusively (facts: each path
            with its holder, issue and glob).
    """
    refused = check(q, repo, by=by, issue=issue)
    if not refused:
        return
    said = "; ".join(f"{r.path} by {r.held.holder} for issue #{r.held.number}" for r in refused)
    raise PathsReserved(
        f"the commit changes paths reserved exclusively by another holder: {said}",
        number=issue,
        reserved=[
            {"path": r.path, "holder": r.held.holder, "number": r.held.number, "glob": r.held.glob}
            for r in refused[:20]
        ],
    )
