"""The merge queue: one worktree's branch into its repository's default branch (and, through
``land``, a branch checked out in a shared checkout: contract E's merge_to_main).

Merges into one repository are serialised by a lease on its row (held in the database, so
across processes and machines; a killed merger's lease expires). The merge is checked with
``git merge-tree --write-tree`` (no checkout touched) and refused with the conflicting files;
then the default branch fast-forwards, or gets a merge commit (or one squashed commit, as the
repository is configured, or as the caller asks: ``no-ff``, ``squash``), the issue is
completed, and the worktree and branch removed.

A rerun after a crash at any point finishes or reports, and never merges twice: before the
default branch moves, the commit it will move to is recorded (state ``merging``), and a
branch whose tip, or whose recorded commit, the default branch already contains counts as
merged: only the cleanup is left.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import Connection, select, update

from workq.db.tables import events, issues, repositories, worktrees
from workq.domain.authority import Authority
from workq.domain.decisions import Action
from workq.errors import (
    Conflict,
    MergeBusy,
    MergeConflict,
    NotFound,
    NothingToMerge,
    Step,
    WorkqError,
    WorktreeDirty,
)
from workq.schemas import MergeResult, Status
from workq.services.coding.gates import MergeCandidate, merge_gate, unconfigured
from workq.services.handle import Queue, load, record
from workq.services.queue import claims, door, processes
from workq.services.sync import outbox
from workq.services.workspaces import checkouts, landings
from workq.services.workspaces.repositories import row as repository_row
from workq.services.workspaces.worktrees import (
    _discard,
    acted_as,
    branch_made,
    by_id,
    drop_branch,
    latest_for_issue,
    refuse_dirty,
)
from workq.vcs import git

DEFAULT_LEASE_SECONDS = 120
DEFAULT_WAIT_SECONDS = 300.0
Gate = Callable[[Queue, MergeCandidate], None]


# Checks run before a merge lands: each gets the queue and what would land (the
# repository, the worktree, the branch tip, the commit the default branch moves to, the
# issue) and raises a WorkqError to refuse. Asked once before the merge lease is taken
# (``commit`` None: a check may take minutes) and again under it. The quality gates hang
# here (services/coding/gates.py: evidence for the branch tip, unless the tests gate trusts).
# Who may merge is not among them: the door (services/queue/door.py) is asked before they
# run and again in the transaction that records the commit the default branch moves to.
GATES: list[Gate] = [merge_gate]
# How a merge lands (contract E's merge_to_main): a merge commit even where a fast-forward
# would do, or one squashed commit.
Strategy = Literal["no-ff", "squash"]
STRATEGIES: tuple[Strategy, ...] = ("no-ff", "squash")


def _try_lease(q: Queue, repo: str, holder: str, seconds: int) -> bool:
    """Take ``repo``'s merge lease: free, lapsed, already ours, or held by a process of this
    host that is gone (a merger killed mid-way: taken at once, recorded as
    ``merge_lease_taken_over``, instead of waiting out its lease)."""

    def work(conn: Connection) -> bool:
        now = q.now()
        current = conn.execute(
            select(repositories.c.merge_holder).where(repositories.c.name == repo)
        ).scalar()
        dead = current is not None and current != holder and processes.gone(current)
        free = (
            repositories.c.merge_holder.is_(None)
            | (repositories.c.merge_expires_at <= now)
            | (repositories.c.merge_holder == holder)
        )
        taken = conn.execute(
            update(repositories)
            .where(
                repositories.c.name == repo,
                (repositories.c.merge_holder == current) if dead else free,
            )
            .values(merge_holder=holder, merge_expires_at=now + _seconds(seconds))
        ).rowcount
        if taken == 1 and dead:
            record(
                q,
                conn,
                kind="merge_lease_taken_over",
                issue_id=None,
                number=None,
                actor=holder,
                now=now,
                before={"repository": repo, "holder": current},
                after={"repository": repo, "holder": holder},
            )
        return bool(taken == 1)

    return q.db.write(work)


def _seconds(n: int) -> timedelta:
    return timedelta(seconds=n)


def _release_lease(q: Queue, repo: str, holder: str) -> None:
    q.db.write(
        lambda conn: conn.execute(
            update(repositories)
            .where(repositories.c.name == repo, repositories.c.merge_holder == holder)
            .values(merge_holder=None, merge_expires_at=None)
        )
    )


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
) -> MergeResult:
    """Merge worktree ``worktree_id`` of ``repo`` into the default branch, complete its
    issue, then clean up. Only the holder of its issue (``by``) or an override may (the
    door, ``merge``). ``strategy`` None merges as the repository is configured
    (fast-forward when possible); ``no-ff`` and ``squash`` always add a commit.

    A merge whose commit is on the default branch finishes whatever refused it after
    (its completion, its cleanup): asked again, it lands nothing twice and does what is
    left."""
    with q.db.read() as conn:
        r = repository_row(conn, repo)
        w = by_id(conn, worktree_id, repo)
    if r.land == "pr" and w.state != "merged":
        return _through_pull_request(q, r, w, actor, by)
    if w.number is not None and w.state != "merged" and not _done_and_landed(q, r, w):
        actor = acted_as(door.ask(q, Action.MERGE, w.number, by), by, actor)
    _check_early(q, Path(r.path), r.default_branch, w, actor, by)
    with merge_lease(q, repo, lease_seconds=lease_seconds, wait_seconds=wait_seconds):
        return _merge_locked(q, repo, worktree_id, actor, by, strategy, keep_branch)


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
    )


@contextlib.contextmanager
def merge_lease(
    q: Queue,
    repo: str | None,
    *,
    lease_seconds: int = DEFAULT_LEASE_SECONDS,
    wait_seconds: float = DEFAULT_WAIT_SECONDS,
) -> Iterator[None]:
    """Hold ``repo``'s merge lease (waiting for it up to ``wait_seconds``). A repository
    that is not registered has no lease: its merges rely on the default branch's
    compare-and-swap alone."""
    if repo is None:
        yield
        return
    holder = processes.token()
    deadline = time.monotonic() + wait_seconds
    pause = 0.02
    while not _try_lease(q, repo, holder, lease_seconds):
        if time.monotonic() >= deadline:
            raise MergeBusy(f"another merge into {repo!r} holds the merge lease", repo=repo)
        time.sleep(pause)
        pause = min(pause * 1.5, 0.25)
    stop = threading.Event()
    keeper = threading.Thread(
        target=_keep_lease,
        args=(q, repo, holder, lease_seconds, stop),
        name=f"workq-merge-lease-{repo}",
        daemon=True,
    )
    keeper.start()
    try:
        yield
    finally:
        stop.set()
        keeper.join()
        _release_lease(q, repo, holder)


def _keep_lease(q: Queue, repo: str, holder: str, seconds: int, stop: threading.Event) -> None:
    """Renew the lease every third of its length while the merge runs: its gates and git
    steps may take longer than the lease, which lapses only once its holder stops renewing
    it (killed: then a merger of this host takes it at once, see ``_try_lease``)."""

    def renew(conn: Connection) -> int:
        return conn.execute(
            update(repositories)
            .where(repositories.c.name == repo, repositories.c.merge_holder == holder)
            .values(merge_expires_at=q.now() + _seconds(seconds))
        ).rowcount

    while not stop.wait(seconds / 3):
        try:
            if not q.db.write(renew):
                return  # taken over; the default branch's compare-and-swap guards the rest
        except WorkqError:
            continue  # a busy or lost database: the next turn tries again


def _merge_locked(
    q: Queue,
    repo: str,
    worktree_id: str,
    actor: str | None,
    by: Authority,
    strategy: Strategy | None,
    keep_branch: bool,
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

    def gates(tip: str, new: str) -> None:
        may(q, Action.MERGE, w.number, by)
        check_gates(q, MergeCandidate(root, path, tip, new, w.number, actor, by))

    intended: list[str] = []

    def intend(new: str) -> None:
        """Record the commit the default branch moves to, once the door lets ``by`` merge
        (in that transaction: the last word before the branch moves)."""

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


def _through_pull_request(
    q: Queue, r: Any, w: Any, actor: str | None, by: Authority
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
    return queue_landing(q, r, branch, actor, by)


@dataclass(frozen=True)
class Branch:
    """An issue's branch to land, and where it is checked out."""

    number: int
    name: str
    base_commit: str | None  # where it started: a tip still there has no work
    checkout: Path
    worktree_id: str | None  # None: a shared checkout (contract E's merge_to_main)


def queue_landing(q: Queue, r: Any, b: Branch, actor: str | None, by: Authority) -> MergeResult:
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
    return MergeResult(
        merged=status.state == "landed",
        branch=b.name,
        into=r.default_branch,
        worktree_cleaned=False,
        commit=status.merge_sha,
        number=b.number,
        note=_unmoved(q, r.github_repo),
        landing=status,
    )


def _unmoved(q: Queue, github_repo: str) -> str | None:
    """What to start when no GitHub worker is moving landings into ``github_repo`` now."""
    if outbox.worker_live(q, github_repo):
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
        _record_landed(q, number, branch, r.default_branch, merged, actor)
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
                _discard(q, w, r, force=False, state="merged", keep_branch=True, actor=actor)
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


def _record_landed(q: Queue, number: int, branch: str, into: str, merged: str, actor: str) -> None:
    """merge_to_main's event for a branch of a shared checkout that landed through its
    pull request: what a merge asked again answers (``landing_of``)."""

    def work(conn: Connection) -> None:
        row = load(conn, number)
        after = {"branch": branch, "into": into, "commit": merged, "through": "pull request"}
        record(
            q,
            conn,
            kind="merged_to_main",
            issue_id=row.id,
            number=number,
            actor=actor,
            now=q.now(),
            after=after,
        )

    with contextlib.suppress(NotFound):
        q.db.write(work)


def check_gates(q: Queue, candidate: MergeCandidate) -> None:
    """Ask every check in ``GATES`` about ``candidate``."""
    for gate in GATES:
        gate(q, candidate)


def may(q: Queue, action: Action, number: int | None, by: Authority) -> None:
    """The door's word on ``by`` doing ``action`` now: before a long step and before an
    external write (an issue deleted meanwhile: the merge stands)."""
    if number is not None:
        with contextlib.suppress(NotFound):
            door.ask(q, action, number, by)


def _check_early(q: Queue, root: Path, into: str, w: Any, actor: str | None, by: Authority) -> None:
    """Ask the checks before the lease, for a branch that would land: clean, ahead."""
    path, tip, head = Path(w.path), git.branch_tip(root, w.branch), git.branch_tip(root, into)
    if w.state != "active" or tip is None or head is None or not path.is_dir():
        return
    if git.is_ancestor(root, tip, head) or git.dirty_paths(path):
        return  # landed already, or refused under the lease
    refuse_conflicts(root, head, tip, w.branch)
    check_gates(q, MergeCandidate(root, path, tip, None, w.number, actor, by))


def refuse_conflicts(root: Path, head: str, tip: str, branch: str) -> None:
    """MERGE_CONFLICT, naming the files, when ``tip`` cannot merge into ``head``: asked
    before any gate (a merge-tree costs milliseconds, a test suite minutes)."""
    if not git.is_ancestor(root, head, tip):
        _merged_tree(root, head, tip, branch)


def _merged_tree(root: Path, head: str, tip: str, branch: str) -> str:
    check = git.merge_tree(root, head, tip)
    if check.tree is None:
        raise MergeConflict(
            f"merge would result in conflicts in {', '.join(check.conflicts)}",
            conflicting_files=check.conflicts,
            branch=branch,
        )
    return check.tree


@dataclass(frozen=True)
class Landing:
    """A branch to land on the default branch ``into`` of the repository at ``root``."""

    root: Path
    into: str
    branch: str
    base_commit: str | None  # where the branch started: a tip still there has no work
    recorded: str | None  # the commit an interrupted merge was moving ``into`` to
    checkout: Path | None  # the work tree that has the branch checked out (must be clean)
    label: str  # names the work in the merge commit's message
    strategy: Strategy | Literal["ff", "squash-or-ff"]


def land(
    b: Landing,
    *,
    gates: Callable[[str, str], None],
    intend: Callable[[str], None],
    dirty: Callable[[], WorkqError],
) -> tuple[str, bool]:
    """Move ``b.into`` to a commit that has the branch's work, or find it already there.
    The merge is checked in memory (``merge-tree``; conflicts refused with the files), the
    ``gates`` see the branch tip and the commit to land, ``intend`` records that commit
    before the default branch moves. The default branch's new tip, and whether an earlier
    run had landed it."""
    root, into = b.root, b.into
    head = git.branch_tip(root, into)
    if head is None:
        raise NotFound(f"the default branch {into!r} at {root} is gone", branch=into)
    tip = git.branch_tip(root, b.branch)
    landed = bool(b.recorded) and git.is_ancestor(root, b.recorded or "", head)
    if not landed and tip is not None:
        landed = tip != b.base_commit and git.is_ancestor(root, tip, head)
    if landed:
        return head, True
    if tip is None:
        raise NotFound(f"branch {b.branch!r} is gone", branch=b.branch)
    if b.checkout is not None and b.checkout.is_dir() and git.dirty_paths(b.checkout):
        raise dirty()
    if tip == head or git.is_ancestor(root, tip, head):
        new = head
    elif b.strategy in ("ff", "squash-or-ff") and git.is_ancestor(root, head, tip):
        new = tip  # fast-forward
    else:
        tree = _merged_tree(root, head, tip, b.branch)
        if b.strategy in ("squash", "squash-or-ff"):
            new = git.commit_tree(root, tree, [head], f"{b.label}\n\nSquashed {b.branch}")
        else:
            new = git.commit_tree(root, tree, [head, tip], f"Merge {b.branch} ({b.label})")
    gates(tip, new)
    intend(new)
    _advance(root, into, head, new)
    return new, False


def _advance(root: Path, branch: str, old: str, new: str) -> None:
    """Move ``branch`` from ``old`` to ``new``. Where it is checked out, that checkout
    fast-forwards (it must be clean); elsewhere the ref moves only if still at ``old``."""
    if old == new:
        return
    checked_out = [wt for wt in git.worktrees(root) if wt.branch == branch and not wt.bare]
    if not checked_out:
        git.update_ref(root, branch, new, old)
        return
    where = checked_out[0].path
    if git.head(where) != old:
        raise Conflict(f"{branch} moved while merging; merge again", branch=branch)
    if git.dirty_paths(where):
        raise WorktreeDirty(
            f"the checkout of {branch} at {where} has uncommitted changes: workq fast-forwards "
            "it when merging, so it must be clean",
            hint="commit or stash them there, then merge again",
        )
    git.merge_ff_only(where, new)


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
        _discard(q, w, r, force=False, state="merged", keep_branch=keep_branch, actor=actor)
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


def again(exc: WorkqError) -> str:
    """The next step of a refusal after a merge landed: its own, then the merge again."""
    first = exc.hint_for()
    then = "merge again to finish: it completes the issue and cleans up, landing nothing twice"
    return f"{first}; then {then}" if first else then


def landed_but(exc: WorkqError, w: Any, into: str, landed: str, what: str, hint: str) -> WorkqError:
    """``exc``, told as the refusal of what follows a merge that landed: the commit is on
    ``into``, and the merge asked again finishes (``resumable``)."""
    issue = f" (issue #{w.number})" if w.number is not None else ""
    said = f"{w.branch}{issue} merged into {into} at {landed[:12]}, but {what}"
    exc.message = f"{said}: {exc.message}"
    exc.args = (exc.message,)
    exc.next_step = None
    exc.hint = hint
    exc.facts.update(landed=landed, into=into, resumable=True)
    return exc


def record_merge(
    q: Queue,
    w: Any,
    actor: str | None,
    already: bool,
    landed: str | None,
    *,
    kept: str | None = None,
) -> None:
    """The worktree_merged event: who merged, the branch, the commit that landed it (and
    why its worktree was kept, when it was)."""

    def work(conn: Connection) -> None:
        after: dict[str, Any] = {"branch": w.branch, "commit": landed, "resumed": already}
        if kept:
            after["worktree_kept"] = kept
        record(
            q,
            conn,
            kind="worktree_merged",
            issue_id=w.issue_id,
            number=w.number,
            actor=actor,
            now=q.now(),
            after=after,
        )

    q.db.write(work)


@dataclass(frozen=True)
class Landed:
    """Where a done issue's work landed, as its merge recorded it."""

    branch: str
    into: str | None
    commit: str | None


def landing_of(q: Queue, number: int) -> Landed | None:
    """The last merge recorded for issue ``number`` (a worktree's, or a shared checkout's
    merge_to_main) when the issue is done: what a merge run again after a lost answer is
    told, instead of looking for a branch that is gone."""
    with q.db.read() as conn:
        status = conn.execute(select(issues.c.status).where(issues.c.number == number)).scalar()
        if status != "done":
            return None
        found = conn.execute(
            select(events.c.after)
            .where(
                events.c.number == number,
                events.c.kind.in_(("worktree_merged", "merged_to_main")),
            )
            .order_by(events.c.id.desc())
            .limit(1)
        ).scalar()
        if found is None:
            return None
        after = json.loads(found)
        into = after.get("into")
        if into is None:  # a worktree's merge: into its repository's default branch
            into = conn.execute(
                select(repositories.c.default_branch)
                .join(issues, issues.c.repository == repositories.c.name)
                .where(issues.c.number == number)
            ).scalar()
    return Landed(branch=after["branch"], into=into, commit=after.get("commit"))


def holder_of(q: Queue, repo: str) -> tuple[str | None, Any]:
    with q.db.read() as conn:
        r = repository_row(conn, repo)
        return r.merge_holder, r.merge_expires_at
