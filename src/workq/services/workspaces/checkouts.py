"""The checkout a server runs in (contract E's git steps switch its branch), and the branch an
issue's work is on (``issue_branches``: which issue a branch is for, where it is checked
out, and the commit a merge of it is moving the default branch to)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, delete, insert, select, update

from workq.db.engine import retry_lost_read
from workq.db.tables import issue_branches, repositories
from workq.errors import GitFailed, InvalidInput, UncommittedChanges
from workq.services.handle import Queue, load, record
from workq.services.workspaces.repositories import main_worktree
from workq.vcs import git

# Where a repository's default branch is looked for when it is not registered.
DEFAULT_BRANCH_GUESSES = ("main", "master", "trunk")


@dataclass(frozen=True)
class Checkout:
    """A work tree: its top folder, its repository's main work tree and default branch,
    and the name it is registered under (None: not registered)."""

    path: Path
    root: Path
    default_branch: str
    repo: str | None


def at(q: Queue, where: Path) -> Checkout:
    """The checkout ``where`` stands in.

    Raises:
        InvalidInput: ``where`` is not in a git work tree, or its default branch is unknown.
    """
    try:
        path = git.toplevel(where)
    except GitFailed:
        raise InvalidInput(
            f"the server runs in {where}, which is not a git work tree",
            hint="start workq serve inside the repository, or work in a worktree "
            "(start_work_on_issue with worktree=true in a registered repository)",
        ) from None
    root = main_worktree(path)
    with q.db.read() as conn:
        found = conn.execute(
            select(repositories.c.name, repositories.c.default_branch).where(
                repositories.c.path == str(root)
            )
        ).first()
    if found is not None:
        return Checkout(path, root, found.default_branch, found.name)
    return Checkout(path, root, _guess_default(root), None)


def _guess_default(root: Path) -> str:
    """The default branch of an unregistered repository: the one origin's HEAD names, else
    the first of main, master, trunk that exists."""
    done = git.run(
        ["symbolic-ref", "--quiet", "--short", "refs/remotes/origin/HEAD"], cwd=root, check=False
    )
    named = done.stdout.strip().removeprefix("origin/") if done.returncode == 0 else ""
    for branch in (named, *DEFAULT_BRANCH_GUESSES):
        if branch and git.branch_exists(root, branch):
            return branch
    raise InvalidInput(
        f"cannot tell the default branch of {root}",
        hint="register the repository with its default branch (workq repo add NAME PATH "
        "--default-branch BRANCH)",
    )


def require_clean(path: Path) -> None:
    """Refuse a work tree with uncommitted changes (contract E's ERR_UNCOMMITTED_CHANGES)."""
    dirty = git.dirty_paths(path)
    if dirty:
        shown = ", ".join(dirty[:10]) + (" ..." if len(dirty) > 10 else "")
        raise UncommittedChanges(
            f"the checkout at {path} has uncommitted changes: {shown}",
            files=dirty[:100],
        )


# --- the branch of an issue ------------------------------------------------------------------


@dataclass(frozen=True)
class BranchLink:
    number: int
    branch: str
    checkout: str
    base_commit: str | None
    merge_commit: str | None


def _link(r: Any) -> BranchLink:
    return BranchLink(r.number, r.branch, r.checkout, r.base_commit, r.merge_commit)


def link(
    q: Queue,
    number: int,
    branch: str,
    checkout: Path,
    *,
    base_commit: str | None = None,
    actor: str | None = None,
) -> bool:
    """Record that issue ``number``'s work is on ``branch``, checked out at ``checkout``.
    Whether anything changed (linking the same branch again changes nothing)."""

    def work(conn: Connection) -> bool:
        issue = load(conn, number, for_update=True)
        found = conn.execute(
            select(issue_branches).where(issue_branches.c.issue_id == issue.id)
        ).first()
        if found is not None and (found.branch, found.checkout) == (branch, str(checkout)):
            return False
        now = q.now()
        conn.execute(delete(issue_branches).where(issue_branches.c.issue_id == issue.id))
        conn.execute(
            insert(issue_branches).values(
                issue_id=issue.id,
                number=number,
                branch=branch,
                checkout=str(checkout),
                base_commit=base_commit,
                linked_by=actor,
                linked_at=now,
            )
        )
        record(
            q,
            conn,
            kind="branch_linked",
            issue_id=issue.id,
            number=number,
            actor=actor,
            now=now,
            before={"branch": found.branch} if found is not None else None,
            after={"branch": branch, "checkout": str(checkout)},
        )
        return True

    return bool(q.db.write(work))


@retry_lost_read
def of_issue(q: Queue, number: int) -> BranchLink | None:
    with q.db.read() as conn:
        found = conn.execute(
            select(issue_branches).where(issue_branches.c.number == number)
        ).first()
    return _link(found) if found is not None else None


@retry_lost_read
def of_branch(q: Queue, branch: str) -> BranchLink | None:
    """The issue most recently linked to ``branch``."""
    with q.db.read() as conn:
        found = conn.execute(
            select(issue_branches)
            .where(issue_branches.c.branch == branch)
            .order_by(issue_branches.c.linked_at.desc())
        ).first()
    return _link(found) if found is not None else None


def intend_merge(q: Queue, number: int, commit: str) -> None:
    """Record the commit a merge of issue ``number``'s branch moves the default branch to,
    before it moves."""
    q.db.write(
        lambda conn: conn.execute(
            update(issue_branches)
            .where(issue_branches.c.number == number)
            .values(merge_commit=commit)
        )
    )


def check_git() -> str:
    """The version of this machine's git, once it is known to do what the git steps
    needs (``merge-tree --write-tree``: git 2.38).

    Raises:
        GitMissing: git is not on PATH, or too old.
    """
    git.require(git.MERGE_TREE_VERSION, "the git steps")
    return ".".join(map(str, git.version()))
