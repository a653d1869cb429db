"""Landing an issue's branch through a pull request (a repository registered with
``land="pr"``): checked here as a local merge is, queued (the record is landings.py), moved
by the GitHub worker (github/landing.py), and finished here once GitHub merged it."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import select, update

from workq.db.tables import landings as landing_rows
from workq.db.tables import worktrees
from workq.domain.authority import Authority
from workq.domain.decisions import Action
from workq.errors import Conflict, NotFound, NothingToMerge, WorktreeDirty
from workq.schemas import LandingStatus, MergeResult
from workq.services.coding.gates import MergeCandidate
from workq.services.handle import Queue
from workq.services.queue import claims, door
from workq.services.sync import worker_lease
from workq.services.workspaces import checkouts, landings
from workq.services.workspaces.land import check_gates, refuse_conflicts
from workq.services.workspaces.merge_records import landing_of, record_landed, record_merge
from workq.services.workspaces.repositories import row as repository_row
from workq.services.workspaces.worktree_cleanup import discard, refuse_dirty
from workq.services.workspaces.worktrees import (
    acted_as,
    branch_made,
    by_id,
)
from workq.vcs import git

# Asked last before a merge's point of no return; raises to stop it there (merges.merge).
Proceed = Callable[[], None]


def through_pull_request(
    q: Queue, r: Any, w: Any, actor: str | None, by: Authority, *, proceed: Proceed | None = None
) -> MergeResult:
    if w.number is None:
        raise Conflict(
            f"worktree {w.id} belongs to no issue: only an issue's work lands through a pull "
            "request",
            worktree_id=w.id,
        )
    if w.state != "active":
        raise Conflict(f"worktree {w.id} is {w.state}: nothing to land", worktree_id=w.id)
    branch = Branch(w.number, w.branch, w.base_commit, Path(w.path), w.id)
    return queue_landing(q, r, branch, actor, by, proceed=proceed)


@dataclass(frozen=True)
class Branch:
    """An issue's branch to land, and where it is checked out."""

    number: int
    name: str
    base_commit: str | None  # where it started: a tip still there has no work
    checkout: Path
    worktree_id: str | None  # None: a shared checkout (contract E's merge_to_main)


def queue_landing(
    q: Queue,
    r: Any,
    b: Branch,
    actor: str | None,
    by: Authority,
    *,
    proceed: Proceed | None = None,
) -> MergeResult:
    """Queue ``b`` to land through a pull request (its repository ``r`` lands with "pr"):
    checked here as a local merge is (clean, ahead, no conflict with the default branch as
    this checkout knows it, the gates on its tip), then answered at once; the GitHub
    worker moves it (github/landing.py). Only the holder (``by``) may (the door,
    ``queue-landing``, asked before the checks and again in the transaction that queues)."""
    actor = acted_as(door.ask(q, Action.QUEUE_LANDING, b.number, by), by, actor)
    root = Path(r.path)
    tip, head = git.branch_tip(root, b.name), git.branch_tip(root, r.default_branch)
    if tip is None:
        raise NotFound(f"branch {b.name!r} is gone", branch=b.name)
    if b.checkout.is_dir() and git.dirty_paths(b.checkout):
        raise WorktreeDirty(
            f"the checkout of {b.name} at {b.checkout} has uncommitted changes",
            branch=b.name,
            hint="commit them there (or discard them), then land again",
        )
    if tip == b.base_commit or (head is not None and git.is_ancestor(root, tip, head)):
        raise NothingToMerge(
            f"branch {b.name} has no commits the default branch lacks: nothing to land",
            branch=b.name,
        )
    if head is not None:
        refuse_conflicts(root, head, tip, b.name)
    check_gates(q, MergeCandidate(root, b.checkout, tip, None, b.number, actor, by))
    if proceed is not None:
        proceed()
    status = landings.queue(
        q,
        b.number,
        repo=r.name,
        branch=b.name,
        worktree_id=b.worktree_id,
        tip=tip,
        by=by,
        actor=actor,
    )
    return _answer(q, r, status)


def answer(q: Queue, status: LandingStatus) -> MergeResult:
    """What a merge answers for the landing ``status`` (as ``queue_landing`` answers when it
    queues one): merged once landed (``commit``: the commit GitHub merged it as), the
    landing as it stands (refused: with its ``failure``), and, while it still moves, what
    to start when no GitHub worker moves it."""
    with q.db.read() as conn:
        r = repository_row(conn, status.repository)
    return _answer(q, r, status)


def _answer(q: Queue, r: Any, status: LandingStatus) -> MergeResult:
    landed = status.state == "landed"
    return MergeResult(
        merged=landed,
        branch=status.branch,
        into=r.default_branch,
        worktree_cleaned=landed and _cleaned(q, status.number),
        commit=status.merge_sha,
        number=status.number,
        note=_unmoved(q, r.github_repo) if status.state in landings.ACTIVE else None,
        landing=status,
    )


def _cleaned(q: Queue, number: int) -> bool:
    """Whether the worktree issue ``number``'s landing came from was removed once it landed
    (one holding uncommitted edits is kept)."""
    with q.db.read() as conn:
        found = conn.execute(
            select(worktrees.c.state, worktrees.c.path)
            .join(landing_rows, landing_rows.c.worktree_id == worktrees.c.id)
            .where(landing_rows.c.number == number)
        ).first()
    return found is not None and found.state == "merged" and not Path(found.path).is_dir()


def _unmoved(q: Queue, github_repo: str) -> str | None:
    """What to start when no GitHub worker is moving landings into ``github_repo`` now."""
    if worker_lease.live(q, github_repo):
        return None
    return (
        f"no GitHub worker is moving landings into {github_repo} now: it waits until one runs "
        f"('workq sync github --repo {github_repo} --watch', or 'workq serve --sync-github "
        f"{github_repo}')"
    )


def finish_landing(
    q: Queue,
    number: int,
    repo: str,
    worktree_id: str | None,
    branch: str,
    *,
    merged: str,
    pushed: str,
    actor: str,
) -> None:
    """After GitHub merged the issue's pull request (as commit ``merged``): complete the
    issue (on the pull request's authority: it merged, whoever holds the issue now), record
    where it landed, remove its worktree unless it holds uncommitted edits (then it stays
    for its holder, recorded; ``workq worktree prune`` takes it once clean), and delete its
    branch if workq made it, it is still at ``pushed`` and checked out nowhere (a commit
    made after it was not part of the merge). Each step is one a rerun may repeat."""
    upstream = Authority.overriding("its pull request was merged", who=actor)
    with contextlib.suppress(NotFound):  # deleted meanwhile: the merge stands
        claims.complete(q, number, upstream, actor=actor)
    with q.db.read() as conn:
        r = repository_row(conn, repo)
        w = by_id(conn, worktree_id, repo) if worktree_id is not None else None
    root = Path(r.path)
    if w is None and landing_of(q, number) is None:  # a shared checkout's branch
        record_landed(q, number, branch, r.default_branch, merged, actor)
    if w is not None and w.state != "merged":
        kept = _dirty(w)
        record_merge(q, w, actor, False, merged, kept=kept)
        q.db.write(  # what a merge run again answers: the commit GitHub merged it as
            lambda conn: conn.execute(
                update(worktrees).where(worktrees.c.id == w.id).values(merge_commit=merged)
            )
        )
        if kept is None:
            with contextlib.suppress(WorktreeDirty):  # edited since: kept for prune
                discard(q, w, r, force=False, state="merged", keep_branch=True, actor=actor)
    made = branch_made(q, w) if w is not None else checkouts.branch_made(q, number, branch)
    checked_out = {wt.branch for wt in git.worktrees(root)}
    unused = made and branch != r.default_branch and branch not in checked_out
    if unused and git.branch_tip(root, branch) == pushed:
        git.delete_branch(root, branch)


def _dirty(w: Any) -> str | None:
    """Why worktree ``w`` must stay (it holds uncommitted edits), or None."""
    try:
        if Path(w.path).is_dir():
            refuse_dirty(w, Path(w.path))
    except WorktreeDirty as exc:
        return exc.message
    return None
