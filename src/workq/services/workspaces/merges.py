"""A worktree's merge into its repository's default branch (and, for a repository that
lands through pull requests, its landing queued instead: pr_landings.py).

Merges into one repository run one at a time under its merge lease (merge_lease.py); the
landing itself is land.py's: checked in memory, gated, recorded before the default branch
moves. Then the issue is completed, and the worktree and branch removed.

A rerun after a crash at any point finishes or reports, and never merges twice: before the
default branch moves, the commit it will move to is recorded (state ``merging``), and a
branch whose tip, or whose recorded commit, the default branch already contains counts as
merged: only the cleanup is left.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, select, update

from workq.db.tables import issues, worktrees
from workq.domain.authority import Authority
from workq.domain.decisions import Action
from workq.errors import Conflict, NotFound, Step, WorkqError, WorktreeDirty
from workq.schemas import MergeResult, Status
from workq.services.coding.gates import unconfigured
from workq.services.handle import Queue
from workq.services.queue import claims, door
from workq.services.workspaces.land import (
    Landing,
    Strategy,
    again,
    early,
    gates_for,
    land,
    landed_but,
)
from workq.services.workspaces.merge_lease import (
    DEFAULT_LEASE_SECONDS,
    DEFAULT_WAIT_SECONDS,
    merge_lease,
)
from workq.services.workspaces.merge_records import record_merge
from workq.services.workspaces.pr_landings import Proceed, through_pull_request
from workq.services.workspaces.repositories import row as repository_row
from workq.services.workspaces.worktree_cleanup import discard, drop_branch
from workq.services.workspaces.worktrees import (
    acted_as,
    branch_made,
    by_id,
    latest_for_issue,
)
from workq.vcs import git


def merge(
    q: Queue,
    repo: str,
    worktree_id: str,
    *,
    by: Authority,
    actor: str | None = None,
    lease_seconds: int = DEFAULT_LEASE_SECONDS,
    wait_seconds: float = DEFAULT_WAIT_SECONDS,
    strategy: Strategy | None = None,
    keep_branch: bool = False,
    proceed: Proceed | None = None,
) -> MergeResult:
    """Merge worktree ``worktree_id`` of ``repo`` into the default branch, complete its
    issue, then clean up. Only the holder of its issue (``by``) or an override may (the
    door, ``merge``). ``strategy`` None merges as the repository is configured
    (fast-forward when possible); ``no-ff`` and ``squash`` always add a commit.
    ``proceed`` is asked last before the default branch moves (or the landing is queued),
    after the gates: it raises to stop the merge there (a task cancelled meanwhile).

    A merge whose commit is on the default branch finishes whatever refused it after
    (its completion, its cleanup): asked again, it lands nothing twice and does what is
    left."""
    with q.db.read() as conn:
        r = repository_row(conn, repo)
        w = by_id(conn, worktree_id, repo)
    if r.land == "pr" and w.state != "merged":
        return through_pull_request(q, r, w, actor, by, proceed=proceed)
    if w.number is not None and w.state != "merged" and not _done_and_landed(q, r, w):
        actor = acted_as(door.ask(q, Action.MERGE, w.number, by), by, actor)
    if w.state == "active":
        root, path = Path(r.path), Path(w.path)
        early(root, r.default_branch, w.branch, path, gates_for(q, root, path, w.number, actor, by))
    with merge_lease(q, repo, lease_seconds=lease_seconds, wait_seconds=wait_seconds):
        return _merge_locked(q, repo, worktree_id, actor, by, strategy, keep_branch, proceed)


def _done_and_landed(q: Queue, r: Any, w: Any) -> bool:
    """Whether ``w``'s merge landed and completed its issue, its cleanup left undone (a
    worktree with uncommitted edits, an interrupted run): no claim guards it any more, and
    asking the merge again finishes it."""
    if w.state != "merging" or not w.merge_commit:
        return False
    with q.db.read() as conn:
        status = conn.execute(select(issues.c.status).where(issues.c.id == w.issue_id)).scalar()
    if status != Status.DONE.value:
        return False
    root = Path(r.path)
    head = git.branch_tip(root, r.default_branch)
    return head is not None and git.is_ancestor(root, w.merge_commit, head)


def merge_issue(
    q: Queue,
    number: int,
    *,
    by: Authority,
    actor: str | None = None,
    lease_seconds: int = DEFAULT_LEASE_SECONDS,
    strategy: Strategy | None = None,
    proceed: Proceed | None = None,
) -> MergeResult:
    """Merge issue ``number``'s worktree (its newest, active or merged: a merge to finish
    or report), as ``merge`` does.

    Raises:
        NotFound: the issue has no worktree.
    """
    info = latest_for_issue(q, number)
    if info is None:
        raise NotFound(
            f"Issue #{number} has no worktree to merge",
            number=number,
            hint=("make one with ", Step.MAKE_WORKTREE),
        )
    return merge(
        q,
        info.repository,
        info.worktree_id,
        by=by,
        actor=actor,
        lease_seconds=lease_seconds,
        strategy=strategy,
        proceed=proceed,
    )


def _merge_locked(
    q: Queue,
    repo: str,
    worktree_id: str,
    actor: str | None,
    by: Authority,
    strategy: Strategy | None,
    keep_branch: bool,
    proceed: Proceed | None = None,
) -> MergeResult:
    with q.db.read() as conn:
        r = repository_row(conn, repo)
        w = by_id(conn, worktree_id, repo)
        title = conn.execute(select(issues.c.title).where(issues.c.id == w.issue_id)).scalar()
    root, into = Path(r.path), r.default_branch
    if w.state == "merged":
        if not keep_branch and branch_made(q, w):
            drop_branch(root, w.branch, into)
        return MergeResult(
            merged=True,
            branch=w.branch,
            into=into,
            worktree_cleaned=True,
            commit=w.merge_commit or git.branch_tip(root, into),
            already_merged=True,
            number=w.number,
        )
    if w.state in ("removed", "creating"):
        raise Conflict(
            f"worktree {worktree_id} was {'removed' if w.state == 'removed' else 'never made'}"
            ", not merged: nothing to merge",
            worktree_id=worktree_id,
        )
    path = Path(w.path)

    def dirty() -> WorkqError:
        return WorktreeDirty(
            f"worktree {worktree_id} ({path}) has uncommitted changes",
            worktree_id=worktree_id,
            hint="commit them there (or discard them), then merge again",
        )

    intended: list[str] = []

    def intend(new: str) -> None:
        """Record the commit the default branch moves to, once the door lets ``by`` merge
        (in that transaction: the last word before the branch moves)."""
        if proceed is not None:
            proceed()

        def work(conn: Connection) -> None:
            if w.number is not None:
                with contextlib.suppress(NotFound):  # deleted meanwhile: the merge stands
                    door.admit(q, conn, Action.MERGE, w.number, by)
            conn.execute(
                update(worktrees)
                .where(worktrees.c.id == w.id)
                .values(state="merging", merge_commit=new, updated_at=q.now())
            )

        q.db.write(work)
        intended.append(new)

    def abandon() -> None:
        """A refusal after ``intend`` (the default branch's checkout dirty, or moved): the
        branch did not move, so the worktree goes back to what it was."""
        q.db.write(
            lambda conn: conn.execute(
                update(worktrees)
                .where(worktrees.c.id == w.id, worktrees.c.merge_commit == intended[-1])
                .values(state=w.state, merge_commit=w.merge_commit, updated_at=q.now())
            )
        )

    label = f"#{w.number}: {title}" if w.number is not None else w.branch
    landing = Landing(
        root=root,
        into=into,
        branch=w.branch,
        base_commit=w.base_commit,
        recorded=w.merge_commit,
        checkout=path,
        label=label,
        strategy=strategy or ("squash-or-ff" if r.merge_mode == "squash" else "ff"),
    )
    try:
        gates = gates_for(q, root, path, w.number, actor, by)
        head, already = land(landing, gates=gates, intend=intend, dirty=dirty)
    except WorkqError:
        if intended:
            abandon()
        raise
    landed = (w.merge_commit if already else head) or head
    _finish(q, w, r, actor, by, already, landed, keep_branch)
    return MergeResult(
        merged=True,
        branch=w.branch,
        into=into,
        worktree_cleaned=True,
        commit=head,
        already_merged=already,
        number=w.number,
        note=None if already else unconfigured(q, root, head),
    )


def _finish(
    q: Queue,
    w: Any,
    r: Any,
    actor: str | None,
    by: Authority,
    already: bool,
    landed: str,
    keep_branch: bool = False,
) -> None:
    """After the default branch moved to ``landed``: complete the issue (the door asked
    again in that transaction: a blocker added while the gates ran refuses it), remove the
    worktree (never one holding uncommitted edits) and its branch (only one workq made,
    once the default branch has all of its work), mark it merged. Whatever refuses here
    leaves the worktree "merging": the work stays landed, and the merge asked again does
    what is left, landing nothing twice."""
    into = r.default_branch
    try:
        if w.number is not None:
            # The worktree is "merging" by now (``intend``), so completing does not count
            # its branch's commits as unmerged work (a squash leaves them off the default
            # branch).
            with contextlib.suppress(NotFound):  # deleted meanwhile: the merge stands
                claims.complete(q, w.number, by, actor=actor or w.agent)
        discard(q, w, r, force=False, state="merged", keep_branch=keep_branch, actor=actor)
        record_merge(q, w, actor or w.agent, already, landed)
    except WorktreeDirty as exc:
        raise landed_but(
            exc,
            w,
            into,
            landed,
            "its worktree holds uncommitted edits, which no cleanup removes",
            "commit them (to its branch, which is then kept) or discard them, then merge "
            "again to finish",
        ) from None
    except WorkqError as exc:
        raise landed_but(exc, w, into, landed, "finishing it was refused", again(exc)) from None
