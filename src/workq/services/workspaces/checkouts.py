"""The checkout a server runs in (contract E's git steps switch its branch), and the branch an
issue's work is on (``issue_branches``: which issue a branch is for, where it is checked
out, and the commit a merge of it is moving the default branch to)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, delete, insert, select, update

from workq.db.engine import retry_lost_read
from workq.db.tables import events, issue_branches, repositories
from workq.domain.authority import Authority
from workq.domain.decisions import Action
from workq.errors import GitFailed, InvalidInput, UncommittedChanges
from workq.services.handle import Queue, load, record
from workq.services.queue import door
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
    by: Authority,
    action: Action = Action.STEP,
    base_commit: str | None = None,
    created: bool = False,
    actor: str | None = None,
) -> bool:
    """Record that issue ``number``'s work is on ``branch``, checked out at ``checkout``,
    once the door lets ``by`` do ``action`` (the holder's ``step``; linking an issue
    without claiming it, ``reshape``: anyone unless another caller holds it). ``created``:
    workq made the branch (cleanup deletes no other). Whether anything changed (linking
    the same branch again changes nothing)."""

    def work(conn: Connection) -> bool:
        issue = load(conn, number, for_update=True)
        door.check(q, conn, issue, action, by)
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
            after={"branch": branch, "checkout": str(checkout), "created": created},
        )
        return True

    return bool(q.db.write(work))


# A branch workq made before any issue was linked to it (create_feature_branch): the event
# that says so, found when an issue is linked to it.
CREATED = "branch_created"


def record_created(q: Queue, root: Path, branch: str, *, actor: str | None) -> None:
    """Record that workq made ``branch`` in the repository at ``root`` (no issue yet)."""

    def work(conn: Connection) -> None:
        after = {"branch": branch, "root": str(root)}
        record(
            q, conn, kind=CREATED, issue_id=None, number=None, actor=actor, now=q.now(), after=after
        )

    q.db.write(work)


@retry_lost_read
def created_here(q: Queue, root: Path, branch: str) -> bool:
    """Whether workq made ``branch`` in the repository at ``root`` (``record_created``)."""
    with q.db.read() as conn:
        found = conn.execute(
            select(events.c.after)
            .where(events.c.kind == CREATED, events.c.number.is_(None))
            .order_by(events.c.id.desc())
            .limit(200)
        ).scalars()
        wanted = {"branch": branch, "root": str(root)}
        return any(json.loads(text or "{}") == wanted for text in found)


@retry_lost_read
def branch_made(q: Queue, number: int, branch: str) -> bool:
    """Whether workq made ``branch``, the one issue ``number`` was last linked to (its
    ``branch_linked`` event says so): cleanup deletes no other branch. Unknown (linked
    before workq recorded it) counts as not made: the branch is kept."""
    with q.db.read() as conn:
        found = conn.execute(
            select(events.c.after)
            .where(events.c.number == number, events.c.kind == "branch_linked")
            .order_by(events.c.id.desc())
            .limit(20)
        ).scalars()
        for text in found:
            after = json.loads(text or "{}")
            if after.get("branch") == branch:
                return bool(after.get("created"))
    return False


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


def intend_merge(q: Queue, number: int, commit: str, *, by: Authority) -> None:
    """Record the commit a merge of issue ``number``'s branch moves the default branch to,
    before it moves, once the door lets ``by`` merge (in that transaction: the last word
    before the branch moves)."""

    def work(conn: Connection) -> None:
        door.admit(q, conn, Action.MERGE, number, by)
        conn.execute(
            update(issue_branches)
            .where(issue_branches.c.number == number)
            .values(merge_commit=commit)
        )

    q.db.write(work)


def check_git() -> str:
    """The version of this machine's git, once it is known to do what the git steps
    needs (``merge-tree --write-tree``: git 2.38).

    Raises:
        GitMissing: git is not on PATH, or too old.
    """
    git.require(git.MERGE_TREE_VERSION, "the git steps")
    return ".".join(map(str, git.version()))
