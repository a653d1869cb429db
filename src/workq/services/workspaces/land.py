"""Landing a branch on a default branch: the one engine both merge paths use (a worktree's
merge, merges.py, and contract E's merge_to_main of a shared checkout, gitflow.py).

The merge is checked in memory (``git merge-tree --write-tree``: no checkout touched) and
refused with the conflicting files; the gates see the branch tip and the commit to land;
the commit is recorded before the default branch moves (a crash then finds it landed); the
default branch fast-forwards, or gets a merge commit, or one squashed commit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from workq.domain.authority import Authority
from workq.domain.decisions import Action
from workq.errors import Conflict, MergeConflict, NotFound, WorkqError, WorktreeDirty
from workq.services.coding.gates import MergeCandidate, merge_gate
from workq.services.handle import Queue
from workq.services.queue import door
from workq.vcs import git

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


def gates_for(
    q: Queue, root: Path, checkout: Path, number: int | None, actor: str | None, by: Authority
) -> Callable[[str, str | None], None]:
    """The check ``land`` runs on a branch tip and the commit to land (None: asked before
    the merge lease, where a gate may take minutes): the door, then every gate."""

    def gates(tip: str, new: str | None) -> None:
        may(q, Action.MERGE, number, by)
        check_gates(q, MergeCandidate(root, checkout, tip, new, number, actor, by))

    return gates


def early(
    root: Path, into: str, branch: str, checkout: Path, gates: Callable[[str, str | None], None]
) -> None:
    """Ask the checks before the merge lease, for a branch that would land (clean, ahead):
    conflicts first (a merge-tree costs milliseconds), then the gates."""
    tip, head = git.branch_tip(root, branch), git.branch_tip(root, into)
    if tip is None or head is None or not checkout.is_dir():
        return
    if git.is_ancestor(root, tip, head) or git.dirty_paths(checkout):
        return  # landed already, or refused under the lease
    refuse_conflicts(root, head, tip, branch)
    gates(tip, None)


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
    gates: Callable[[str, str | None], None],
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
