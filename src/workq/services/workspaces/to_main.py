"""Contract E's merge_to_main: the issue's branch into the default branch, from its worktree
(a worktree's merge, merges.py), through a pull request (pr_landings.py), or from the
server's shared checkout (here), each landing through land.py under the merge lease."""

from __future__ import annotations

import contextlib
from pathlib import Path

from workq.domain import fields
from workq.domain.authority import Authority
from workq.domain.decisions import Action
from workq.errors import Conflict, InvalidInput, NotFound, UncommittedChanges, WorkqError
from workq.schemas import Issue, LandingStatus, MergedToMain, Status
from workq.services.coding.gates import unconfigured
from workq.services.handle import Queue
from workq.services.queue import claims, door, issues
from workq.services.workspaces import (
    checkouts,
    land,
    merge_lease,
    merge_records,
    merges,
    pr_landings,
    repositories,
    worktree_cleanup,
    worktrees,
)
from workq.services.workspaces.gitflow import Work, locate, record_step
from workq.vcs import git


def merge_to_main(
    q: Queue,
    where: Path,
    *,
    by: Authority,
    actor: str | None = None,
    strategy: str = "no-ff",
    delete_branch: bool = True,
    number: int | None = None,
    lease_seconds: int = merge_lease.DEFAULT_LEASE_SECONDS,
) -> MergedToMain:
    """Merge the issue's branch into the default branch (``no-ff``: always a merge commit;
    ``squash``: one commit) once its checkout is clean and the gates passed on its tip;
    complete the issue; delete the branch if asked and workq made it; the server's checkout
    goes back to the default branch. Only the holder (``by``) or an override may (the door,
    ``merge``). Through the merge queue: its lease, its in-memory conflict check, its
    crash-safe record of the commit it lands; a merge that landed and was refused after
    (its completion, its cleanup) finishes when asked again."""
    if strategy not in land.STRATEGIES:
        raise InvalidInput(
            f"merge_strategy must be one of {', '.join(land.STRATEGIES)}",
            field="merge_strategy",
        )
    chosen: land.Strategy = "squash" if strategy == "squash" else "no-ff"
    if number is not None:
        fields.number(number)
        landed = merge_records.landing_of(q, number)
        if landed is not None:  # merged already: a rerun after a lost answer
            return MergedToMain(
                merged_branch=landed.branch,
                target_branch=landed.into or "",
                commit_hash=landed.commit or "",
                issue_number=number,
                branch_deleted=_branch_gone(q, number, landed.branch),
                already_merged=True,
            )
    work = locate(q, where, by, number)
    if work.number is None:
        raise Conflict(
            f"branch {work.branch} is linked to no issue",
            branch=work.branch,
            hint="link_issue_to_branch first",
        )
    n = work.number
    issue = issues.get(q, n)
    pr = work.repo is not None and repositories.get(q, work.repo).land == "pr"
    # Before any other answer, the door; not for a merge that landed and completed its
    # issue, its cleanup left (a worktree's merge asks on its own, merges.merge).
    if issue.status != Status.DONE or (work.worktree_id is None and not _landed(work)):
        let = door.ask(q, Action.QUEUE_LANDING if pr else Action.MERGE, n, by)
        actor = worktrees.acted_as(let, by, actor)
    if issue.status != Status.DONE:
        checkouts.require_clean(work.path)
    if work.worktree_id is not None and work.repo is not None:
        done = merges.merge(
            q,
            work.repo,
            work.worktree_id,
            by=by,
            actor=actor,
            lease_seconds=lease_seconds,
            strategy=chosen,
            keep_branch=not delete_branch,
        )
        if done.landing is not None:
            return _queued(work, n, done.landing)
        head, note = done.commit or "", done.note  # the merge queue said what it checked
    elif work.repo is not None and pr:
        with q.db.read() as conn:
            r = repositories.row(conn, work.repo)
        branch = pr_landings.Branch(n, work.branch, work.base_commit, work.path, None)
        queued = pr_landings.queue_landing(q, r, branch, actor, by)
        assert queued.landing is not None
        return _queued(work, n, queued.landing)
    else:
        head = _merge_checkout(q, work, issue, chosen, delete_branch, actor, by, lease_seconds)
        note = unconfigured(q, work.root, head) if head else None
    return MergedToMain(
        merged_branch=work.branch,
        target_branch=work.into,
        commit_hash=head,
        issue_number=n,
        branch_deleted=git.branch_tip(work.root, work.branch) is None,
        note=note,
    )


def _landed(work: Work) -> bool:
    """Whether the default branch has the commit a merge of ``work`` recorded (it landed:
    what is left is its completion and cleanup)."""
    head = git.branch_tip(work.root, work.into)
    recorded = work.merge_commit
    return head is not None and recorded is not None and git.is_ancestor(work.root, recorded, head)


def _queued(work: Work, number: int, landing: LandingStatus) -> MergedToMain:
    """The answer of a merge that goes through a pull request: queued, not merged yet."""
    return MergedToMain(
        merged_branch=work.branch,
        target_branch=work.into,
        commit_hash=landing.merge_sha or "",
        issue_number=number,
        branch_deleted=False,
        note=f"landing through a pull request: {landing.state}",
        landing=landing,
    )


def _branch_gone(q: Queue, number: int, branch: str) -> bool:
    issue = issues.get(q, number)
    if issue.repository is None:
        link = checkouts.of_issue(q, number)
        root = Path(link.checkout) if link is not None else None
    else:
        root = Path(repositories.get(q, issue.repository).path)
    return root is None or git.branch_tip(root, branch) is None


def _merge_checkout(
    q: Queue,
    work: Work,
    issue: Issue,
    strategy: land.Strategy,
    delete_branch: bool,
    actor: str | None,
    by: Authority,
    lease_seconds: int,
) -> str:
    """Merge a branch checked out in a shared checkout (not a worktree of its own)."""
    n = issue.number

    def dirty() -> WorkqError:
        return UncommittedChanges(f"the checkout at {work.path} has uncommitted changes")

    landing = land.Landing(
        root=work.root,
        into=work.into,
        branch=work.branch,
        base_commit=work.base_commit,
        recorded=work.merge_commit,
        checkout=work.path,
        label=f"#{n}: {issue.title}",
        strategy=strategy,
    )
    gates = land.gates_for(q, work.root, work.path, n, actor, by)
    land.early(work.root, work.into, work.branch, work.path, gates)
    with merge_lease.merge_lease(q, work.repo, lease_seconds=lease_seconds):
        head, already = land.land(
            landing,
            gates=gates,
            intend=lambda new: checkouts.intend_merge(q, n, new, by=by),
            dirty=dirty,
        )
    try:  # landed: whatever refuses now, the merge asked again finishes it
        with contextlib.suppress(NotFound):
            claims.complete(q, n, by, actor=actor)
        _leave(work)
        if delete_branch and checkouts.branch_made(q, n, work.branch):
            worktree_cleanup.drop_branch(work.root, work.branch, work.into)
        record_step(
            q,
            n,
            "merged_to_main",
            actor,
            {"branch": work.branch, "into": work.into, "commit": head, "strategy": strategy}
            | ({"resumed": True} if already else {}),
        )
    except WorkqError as exc:
        what = "finishing it was refused"
        raise land.landed_but(exc, work, work.into, head, what, land.again(exc)) from None
    return head


def _leave(work: Work) -> None:
    """Put the checkout back on the default branch (detached at it when another worktree
    has it checked out), so the merged branch can go."""
    if git.current_branch(work.path) != work.branch:
        return
    elsewhere = any(
        wt.branch == work.into and wt.path.resolve() != work.path.resolve()
        for wt in git.worktrees(work.root)
    )
    if elsewhere:
        git.run(["switch", "--quiet", "--detach", "refs/heads/" + work.into], cwd=work.path)
    else:
        git.switch(work.path, work.into)
