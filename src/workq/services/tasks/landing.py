"""``issue_merge`` in a repository that lands through pull requests, as a task: the merge
queues the landing and answers at once, as always; the task then follows the landing
until it ends, and completes with what the merge answers for it then.

The landing is moved by the GitHub worker (github/landing.py: ``workq sync github
--watch``, or the sync of ``workq serve --sync-github``); the task only reads it. It is
advanced on the waker's timer (``EVERY_SECONDS``: no event of the queue says that GitHub
merged a pull request) and by every poll; it holds nothing, so a cancel only stops the
following (the landing goes on) and an answer nobody reads gives nothing back.

It completes:
- when the landing is ``landed`` (merged on GitHub, the issue completed, its worktree
  removed): merged, with the commit GitHub merged it as;
- when it is ``refused``: the reason and what to repair (``LandingStatus.failure``: the
  failing checks' output, the requested changes), as the merge answers for a refused
  landing (not an error: the merge call did what it was asked; its landing was refused);
- when the landing it follows was queued again with another tip (by its holder, through
  another merge: that merge's answer, or its own task, follows the new one), with the
  landing as it stands;
- when its wait ends (``WAIT_SECONDS``) with the landing still moving: as it stands (the
  synchronous answer's words; merge again to follow it further).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import update

from workq.db.tables import tasks
from workq.errors import NotFound, StorageError, WorkqError, stored
from workq.schemas import LandingStatus, MergeResult
from workq.services.handle import Queue
from workq.services.tasks import kinds, store
from workq.services.tasks.store import WORKING, TaskRecord
from workq.services.workspaces import landings, pr_landings

KIND = "landing"
# How often the waker looks at the landings its tasks follow (one read per task). The
# GitHub worker looks at a pull request every 10 s (LandOptions.check_interval).
EVERY_SECONDS = 3.0
# How long a task follows its landing: a day of checks and reviews. Its ttl is this plus
# store.READ_GRACE_SECONDS.
WAIT_SECONDS = 24 * 3600
# How often a client should poll: a landing takes minutes (checks), and moves in steps of
# the worker's 10 s looks.
POLL_MS = 5000
DONE = ("landed", "refused")


def follows(landing: LandingStatus | None) -> bool:
    """Whether a merge that answered with ``landing`` has something to follow (a landing
    the worker still moves)."""
    return landing is not None and landing.state in landings.ACTIVE


def start(q: Queue, *, owner: str, landing: LandingStatus) -> TaskRecord:
    """A task of ``owner`` that follows issue ``landing.number``'s landing of the tip
    ``landing.head_sha`` until it lands or is refused. Durable when this returns; advanced
    once at once (the worker may have moved it since the merge answered)."""
    task = store.create(
        q,
        owner=owner,
        kind=KIND,
        arguments={
            "number": landing.number,
            "repository": landing.repository,
            "head_sha": landing.head_sha,
        },
        wait_seconds=WAIT_SECONDS,
        status_message=said(landing),
    )
    q.db.write(
        lambda conn: conn.execute(
            update(tasks).where(tasks.c.id == task.id).values(poll_interval_ms=POLL_MS)
        )
    )
    advance(q, task)
    return store.load(q, task.id) or task


def said(landing: LandingStatus) -> str:
    """The task's status message while the landing moves: where it stands."""
    pull = f", pull request #{landing.pr_number}" if landing.pr_number else ""
    detail = f": {landing.detail}" if landing.detail else ""
    return f"Landing #{landing.number} {landing.state}{pull}{detail}"[:500]


def advance(q: Queue, task: TaskRecord) -> None:
    """Complete ``task`` once its landing landed, was refused, was queued again with
    another tip or its wait is over; else say where it stands."""
    args = task.args()
    follow(q, task, int(args["number"]), str(args["head_sha"]))


def follow(q: Queue, task: TaskRecord, number: int, head_sha: str) -> None:
    """``advance`` of a task that follows issue ``number``'s landing of ``head_sha`` (a
    merge task follows the landing its merge queued, merge.py)."""
    if task.status != WORKING:
        return
    try:
        landing = landings.require(q, number)
    except StorageError:
        raise  # the next round or poll reads it again
    except WorkqError as exc:  # the issue was deleted: nothing lands
        _complete(q, task, refusal(exc, number), f"Refused: {exc.code}")
        return
    over = task.deadline is not None and q.now() >= task.deadline
    if landing.state in DONE or landing.head_sha != head_sha or over:
        _complete(q, task, _answer(q, landing), _ended(landing, head_sha))
    elif said(landing) != task.status_message:
        _describe(q, task.id, said(landing))


def refusal(exc: WorkqError, number: int, kept: dict[str, Any] | None = None) -> dict[str, Any]:
    """A merge's refusal as a task's answer, worded as the call words it (``kept``: the
    error as kept, when not ``stored(exc)``)."""
    refused = kept if kept is not None else stored(exc)
    return {"value": {"refused": refused, "prefix": f"Could not merge issue #{number}"}}


def _answer(q: Queue, landing: LandingStatus) -> dict[str, Any]:
    try:
        found: MergeResult = pr_landings.answer(q, landing)
    except NotFound as exc:  # its repository was removed
        return refusal(exc, landing.number)
    return {"value": found.model_dump(mode="json")}


def _ended(landing: LandingStatus, head_sha: str) -> str:
    if landing.head_sha != head_sha:
        return f"Landing #{landing.number} was queued again with another tip"
    if landing.state == "landed":
        return f"Landed #{landing.number} as {(landing.merge_sha or '')[:12]}"
    if landing.state == "refused":
        return f"Landing #{landing.number} refused: {landing.detail or 'refused'}"[:500]
    return said(landing) + " (no longer followed: merge again to follow it)"


def _complete(q: Queue, task: TaskRecord, answer: dict[str, Any], message: str) -> None:
    store.complete_now(q, task.id, answer, message=message)


def _describe(q: Queue, task_id: str, message: str) -> None:
    """Say where a working task stands (its ``statusMessage``, ``lastUpdatedAt``)."""
    q.db.write(
        lambda conn: conn.execute(
            update(tasks)
            .where(tasks.c.id == task_id, tasks.c.status == WORKING)
            .values(status_message=message, updated_at=q.now())
        )
    )


KIND_OF = kinds.Kind(KIND, advance=advance, on_change=False, every_seconds=EVERY_SECONDS)
