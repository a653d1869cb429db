"""``issue_claim_next`` as a task: a claim that waits for work without holding a call open.

The task is completed by the claim itself: the claim and the task's completion are one
transaction (``claims.claim_next``'s ``then``), so a crash never leaves a claim without a
task to receive it, and a task never receives two claims (the task's compare-and-set on
its status rolls a second claim back, as it does a claim racing a cancel). What the claim
adds after it committed (its worktree, the briefing of the claim before) finishes the
answer afterwards; a crash in between leaves an unfinished answer that the next poll
finishes (``finish_claim_next`` may run again for the same claim).

The answer is what the synchronous call answers: the claimed issue, ``{"claimed": false}``
when the wait ends with nothing claimed, or the refusal (a plan mode, a worktree that
could not be made: the claim is then given back).
"""

from __future__ import annotations

import logging
from typing import Any

from workq.domain.authority import Authority
from workq.errors import Conflict, NotFound, StorageError, TaskSettled, WorkqError, stored
from workq.schemas import NOTHING_CLAIMED, ClaimedIssue, ReadyFilter
from workq.services.handle import Queue
from workq.services.queue import claims
from workq.services.tasks import kinds, store
from workq.services.tasks.store import COMPLETED, UNFINISHED, WORKING, TaskRecord
from workq.services.workspaces import claiming

log = logging.getLogger("workq.tasks")

KIND = "claim_next"
WAITING = "Waiting for a ready issue"
NOTHING = "Nothing became ready within the wait"


def arguments(by: Authority, f: ReadyFilter | None, worktree: bool | None) -> dict[str, Any]:
    """What a task of this kind keeps of the call: who claims, for what."""
    return {
        "run_id": by.acts_as,
        "run_ids": sorted(by.run_ids),
        "who": by.who,
        "filter": f.model_dump(mode="json", exclude_defaults=True) if f else None,
        "worktree": worktree,
    }


def _authority(args: dict[str, Any], fence: int | None = None) -> Authority:
    return Authority.of(args["run_ids"], acts_as=args["run_id"], fence=fence, who=args["who"])


def _filter(args: dict[str, Any]) -> ReadyFilter | None:
    found = args.get("filter")
    return ReadyFilter.model_validate(found) if found is not None else None


def start(
    q: Queue,
    *,
    owner: str,
    by: Authority,
    f: ReadyFilter | None,
    worktree: bool | None,
    wait_seconds: int,
) -> TaskRecord:
    """A task of ``owner`` that claims the next ready issue for ``by`` when one comes, within
    ``wait_seconds``. Durable when this returns. It is advanced once at once: work that
    arrived after the caller's own attempt and before the task existed is not missed."""
    task = store.create(
        q,
        owner=owner,
        kind=KIND,
        arguments=arguments(by, f, worktree),
        wait_seconds=wait_seconds,
        status_message=WAITING,
    )
    advance(q, task)
    return store.load(q, task.id) or task


def advance(q: Queue, task: TaskRecord) -> None:
    """Claim for ``task`` if something is there; end its wait once its deadline passed;
    finish an unfinished answer."""
    if task.status == COMPLETED and task.unfinished():
        finish(q, task)
        return
    if task.status != WORKING:
        return
    args = task.args()
    f, worktree = _filter(args), args.get("worktree")
    if claiming.claimable(q, f, worktree=worktree) and _claim(q, task, f, worktree):
        return
    if task.deadline is not None and q.now() >= task.deadline:
        store.complete_now(q, task.id, {"value": NOTHING_CLAIMED}, message=NOTHING)


def _claim(q: Queue, task: TaskRecord, f: ReadyFilter | None, worktree: bool | None) -> bool:
    """Claim the next issue into ``task``; whether the task is settled now (by this claim,
    by a refusal, or by someone else: cancelled, completed by another process)."""
    by = _authority(task.args())

    def receive(conn: Any, claimed: ClaimedIssue) -> None:
        answer = {"value": claimed.model_dump(mode="json"), UNFINISHED: True}
        if not store.complete(
            conn,
            task.id,
            q.now(),
            answer,
            message=f"Claimed issue #{claimed.number}",
            number=claimed.number,
            fence=claimed.fence,
        ):
            raise TaskSettled(number=claimed.number)

    try:
        taken = claiming.claim_next(q, by, f, worktree=worktree, then=receive)
    except TaskSettled:
        return True
    except StorageError:
        raise  # the next change or poll tries again
    except WorkqError as exc:
        _refused(q, task.id, exc)
        return True
    if taken is None:
        return False
    store.finished(q, task.id, {"value": taken.model_dump(mode="json")}, message=_said(taken))
    return True


def _said(taken: ClaimedIssue) -> str:
    return f"Claimed issue #{taken.number}: {taken.title}"


def _refused(q: Queue, task_id: str, exc: WorkqError) -> None:
    """The call's refusal is the task's answer: before a claim (a plan mode), or after one
    that was given back (its worktree could not be made)."""
    answer = {"refused": stored(exc)}
    message = f"Refused: {exc.code}"
    if not store.complete_now(q, task_id, answer, message=message):
        store.finished(q, task_id, answer, message=message)


def finish(q: Queue, task: TaskRecord) -> None:
    """Finish the unfinished answer of ``task`` (its process stopped between the claim and
    its worktree and briefing)."""
    args = task.args()
    found = task.answer() or {}
    taken = ClaimedIssue.model_validate(found.get("value"))
    f, worktree = _filter(args), args.get("worktree")
    try:
        done = claiming.finish_claim_next(q, _authority(args), f, taken, worktree=worktree)
    except StorageError:
        raise
    except WorkqError as exc:
        store.finished(q, task.id, {"refused": stored(exc)}, message=f"Refused: {exc.code}")
        return
    store.finished(q, task.id, {"value": done.model_dump(mode="json")}, message=_said(done))


def release(q: Queue, task: TaskRecord, reason: str) -> None:
    """Give the claim made for ``task`` back to the queue (fenced: only that very claim)."""
    if task.number is None:
        return
    by = _authority(task.args(), fence=task.fence)
    try:
        claims.release(q, task.number, by, reason=reason)
    except (Conflict, NotFound) as exc:  # it moved on meanwhile: nothing of the task's left
        log.info("workq: task claim of #%s not released: %s", task.number, exc.describe())


def ready(q: Queue, task: TaskRecord) -> bool:
    """Whether ``claim_next`` may find an issue for ``task`` now (a read)."""
    args = task.args()
    return claiming.claimable(q, _filter(args), worktree=args.get("worktree"))


def key(task: TaskRecord) -> str:
    """Tasks that ask the same question (the filter, with or without a worktree)."""
    args = task.args()
    return store.dump({"filter": args.get("filter"), "worktree": bool(args.get("worktree"))})


KIND_OF = kinds.Kind(KIND, advance=advance, release=release, ready=ready, key=key)
