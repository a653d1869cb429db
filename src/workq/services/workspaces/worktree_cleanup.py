"""Removing worktrees: one at a time (``remove``, ``discard``), or every one whose work is
finished (``prune``). A worktree holding uncommitted edits is never removed without force;
a branch is deleted only if workq made it and the default branch has all of its work."""

from __future__ import annotations

import contextlib
import shutil
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, select, update

from workq.db.tables import issues, repositories, worktrees
from workq.domain.authority import Authority
from workq.domain.decisions import Action
from workq.errors import Conflict, NotFound, Step, WorktreeDirty
from workq.schemas import PruneReport, Status, WorktreeInfo
from workq.services.handle import Queue, record
from workq.services.queue import door
from workq.services.workspaces.repositories import ACTIVE
from workq.services.workspaces.repositories import row as repository_row
from workq.services.workspaces.worktrees import (
    CREATING_GRACE_SECONDS,
    acted_as,
    branch_made,
    by_id,
    listed,
)
from workq.vcs import git

# Who prunes: no caller's claim. The door lets it remove a worktree unless a live claim
# holds its issue (claimed again since it was found finished).
NOBODY = Authority()


def discard(
    q: Queue,
    w: Any,
    r: Any,
    *,
    force: bool,
    state: str = "removed",
    keep_branch: bool = False,
    actor: str | None = None,
    recorded: dict[str, Any] | None = None,
) -> bool:
    """Remove worktree ``w`` from disk and mark it ``state``; its branch goes too when
    workq made it and the default branch already has all of its work (unless
    ``keep_branch``). Whether the branch is gone. ``recorded``: what the event records of
    an override (who made it, and why).

    Raises:
        WorktreeDirty: it holds uncommitted edits and not ``force`` (nothing changed).
    """
    root, path = Path(r.path), Path(w.path)
    if path.is_dir():
        known = {wt.path.resolve() for wt in git.worktrees(root)}
        if path.resolve() in known:
            if not force:
                refuse_dirty(w, path)
            git.worktree_remove(root, path, force=True)
        elif path.parent == Path(r.worktree_dir) and not path.is_symlink():
            # What an interrupted removal left: git no longer knows it as a worktree.
            shutil.rmtree(path)
    elif state != "merged":
        # Gone from disk by other means: drop git's record of it. (Not on every removal:
        # a prune racing another process's `worktree add` can take its half-made record.)
        git.worktree_prune(root)
    deleted = git.branch_tip(root, w.branch) is None
    if not deleted and not keep_branch and branch_made(q, w):
        deleted = drop_branch(root, w.branch, r.default_branch)

    def mark(conn: Connection) -> None:
        now = q.now()
        conn.execute(
            update(worktrees).where(worktrees.c.id == w.id).values(state=state, updated_at=now)
        )
        record(
            q,
            conn,
            kind="worktree_removed",
            issue_id=w.issue_id,
            number=w.number,
            actor=actor,
            now=now,
            after={"path": w.path, "branch_deleted": deleted, **(recorded or {})},
        )

    q.db.write(mark)
    return deleted


def refuse_dirty(w: Any, path: Path) -> None:
    """WorktreeDirty, naming the files, when the worktree at ``path`` holds uncommitted
    edits: no cleanup removes them."""
    dirty = git.dirty_paths(path)
    if dirty:
        shown = ", ".join(dirty[:10]) + (" ..." if len(dirty) > 10 else "")
        raise WorktreeDirty(
            f"worktree {w.id} ({path}) has uncommitted changes: {shown}",
            worktree_id=w.id,
            files=dirty[:100],
        )


def drop_branch(root: Path, branch: str, into: str) -> bool:
    """Delete ``branch`` once the default branch ``into`` has all of its work (its tip, or
    a merge of it that would change nothing: a squash of it); whether it is gone. The
    default branch is never a task's to delete, and a branch with work of its own (a
    commit made after the merge) stays."""
    tip = git.branch_tip(root, branch)
    if tip is None:
        return True
    head = git.branch_tip(root, into)
    if branch == into or head is None:
        return False
    if not git.is_ancestor(root, tip, head):
        merged = git.merge_tree(root, head, tip).tree
        tree = git.run(["rev-parse", head + "^{tree}"], cwd=root).stdout.strip()
        if merged is None or merged != tree:
            return False
    git.delete_branch(root, branch)
    return True


def remove(
    q: Queue,
    repo: str,
    worktree_id: str,
    *,
    by: Authority,
    force: bool = False,
    actor: str | None = None,
) -> WorktreeInfo:
    """Remove a worktree from disk and the registry. While a live claim holds its issue,
    only the holder (``by``) or an override may (the door, ``remove-worktree``). Refused
    with uncommitted changes unless ``force``, which only the holder of its claim (even a
    lapsed one) or an override may use: nobody else throws its edits away. Its branch is
    kept if it has work the default branch lacks, or if workq did not make it."""

    with q.db.read() as conn:
        r = repository_row(conn, repo)
        w = by_id(conn, worktree_id, repo)
    if w.state in ("removed", "merged"):
        return listed(w)
    recorded: dict[str, Any] = {}
    if w.number is not None:
        with contextlib.suppress(NotFound):  # its issue deleted: nobody holds it
            let = door.ask(q, Action.REMOVE_WORKTREE, w.number, by)
            actor = acted_as(let, by, actor)
            recorded = by.recorded() if let.overridden else {}
            mine = let.holder is None or let.mine or let.overridden
            force = force and mine
    if w.state == "merging":
        raise Conflict(
            f"worktree {worktree_id} is being merged (or a merge of it was interrupted)",
            worktree_id=worktree_id,
            number=w.number,
            hint=("finish the merge: ", Step.MERGE),
        )
    discard(q, w, r, force=force, actor=actor, recorded=recorded)
    with q.db.read() as conn:
        return listed(by_id(conn, worktree_id))


def _finished(conn: Connection, w: Any, now: datetime) -> bool:
    """Whether ``w``'s issue no longer needs it: done, deleted, or released (open and
    unclaimed) - not merely with an expired lease (a live agent may still commit)."""
    if w.state == "creating":  # interrupted, unless another process is making it now
        return bool(w.updated_at < now - timedelta(seconds=CREATING_GRACE_SECONDS))
    if w.state == "merging":  # a merge to finish, not to throw away
        return False
    found = conn.execute(
        select(issues.c.status, issues.c.claimed_by).where(issues.c.id == w.issue_id)
    ).first()
    if found is None:
        return True
    return bool(found.status == Status.DONE.value or found.claimed_by is None)


def prune(q: Queue, repo: str | None = None, *, force: bool = False) -> PruneReport:
    """Remove the worktrees of done, released or deleted issues (never one with uncommitted
    changes unless ``force``, nor one whose issue was claimed again meanwhile); report the
    rest with their disk use. Branches go as ``remove`` deletes them."""
    with q.db.read() as conn:
        stmt = select(worktrees).where(worktrees.c.state.in_(ACTIVE))
        if repo is not None:
            repository_row(conn, repo)
            stmt = stmt.where(worktrees.c.repository == repo)
        now = q.now()
        candidates = [(w, _finished(conn, w, now)) for w in conn.execute(stmt).all()]
        repos = {r.name: r for r in conn.execute(select(repositories)).all()}
    removed: list[WorktreeInfo] = []
    kept: list[WorktreeInfo] = []
    for w, finished in candidates:
        info = listed(w, disk=True)
        if not finished or _claimed_again(q, w):
            kept.append(info)
            continue
        try:
            discard(q, w, repos[w.repository], force=force)
        except WorktreeDirty:
            kept.append(info)
            continue
        removed.append(info)
    return PruneReport(removed=removed, kept=kept)


def _claimed_again(q: Queue, w: Any) -> bool:
    """Whether a live claim holds ``w``'s issue now (the door refuses its removal)."""
    if w.number is None:
        return False
    found = door.refusal(q, Action.REMOVE_WORKTREE, w.number, NOBODY)
    return found is not None and not isinstance(found, NotFound)  # deleted: nobody holds it
