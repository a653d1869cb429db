"""What a client does with a task, whatever its kind: poll it, cancel it; and what a server
does for tasks nobody polls (``sweep``).

A poll advances the task (``Kind.advance``) before it answers, so a task completes when it
is polled even in a process whose waker never saw it (a restarted server, another worker).
A completed answer is marked read in the poll that delivers it: from then on it is the
client's, and a cancel arriving later loses. A claim completed for a task and never read
(its ttl ended, or the task was cancelled first) goes back to the queue.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from workq.errors import StorageError, TaskExpired, TaskNotFound, WorkqError
from workq.schemas import TaskStatus, TaskView
from workq.services.handle import Queue
from workq.services.tasks import catalog, store
from workq.services.tasks.store import COMPLETED, WORKING, TaskRecord

log = logging.getLogger("workq.tasks")

# An answer still unfinished this long after its claim committed is finished by whoever
# polls it (the process that claimed stopped); before that it shows as working.
FINISH_GRACE_SECONDS = 30.0
UNREAD = "Its answer was not read within its ttl: the claim went back to the queue"
CANCELLED = "Cancelled by its caller"
CANCELLED_UNREAD = "its task was cancelled before the claim was read"


def poll(q: Queue, task_id: str, owner: str) -> TaskView:
    """Task ``task_id`` of ``owner``, advanced first; a completed answer it delivers is the
    client's from now on.

    Raises:
        TaskNotFound: no such task of ``owner``.
        TaskExpired: its time to live is over.
    """
    task = store.owned(q, task_id, owner)
    kind = catalog.of(task.kind)
    if kind is not None and _advancing(q, task):
        try:
            kind.advance(q, task)
        except StorageError as exc:  # the answer says working; the next poll tries again
            log.warning("workq: task %s could not advance: %s", task.kind, exc.describe())
        task = store.owned(q, task_id, owner)
    if task.status == COMPLETED:
        if task.unfinished():
            return _as_working(task)
        if task.read_at is None and not store.mark_read(q, task.id):
            task = store.owned(q, task_id, owner)  # cancelled meanwhile: say so
    return task.view()


def _advancing(q: Queue, task: TaskRecord) -> bool:
    """Whether a poll should try to move ``task`` on."""
    if task.status == WORKING:
        return True
    if task.status == COMPLETED and task.unfinished():
        grace = timedelta(seconds=FINISH_GRACE_SECONDS)
        return q.now() - task.updated_at >= grace
    return False


def _as_working(task: TaskRecord) -> TaskView:
    """A task whose answer is being finished, as working (the client polls again)."""
    return task.view().model_copy(
        update={"status": TaskStatus.WORKING, "answer": None, "status_message": "Finishing"}
    )


def cancel(q: Queue, task_id: str, owner: str) -> TaskView:
    """Cancel task ``task_id`` of ``owner``: a waiting one claims nothing from now on; one
    whose claim was made and not yet read gives that claim back. A task already settled,
    or whose answer was read, stays as it is (the cancel loses).

    Raises:
        TaskNotFound: no such task of ``owner``.
        TaskExpired: its time to live is over.
    """
    store.owned(q, task_id, owner)
    cancelled = store.cancel(q, task_id, CANCELLED)
    if cancelled is not None and cancelled.number is not None:
        _give_back(q, cancelled, CANCELLED_UNREAD)
    return store.owned(q, task_id, owner).view()


def abandon(q: Queue, owner: str, message: str) -> int:
    """``owner`` is gone for good (a stdio client that ended, whose run id no later server
    can take): its waiting tasks are cancelled and the claims made for them and not read
    go back to the queue. How many tasks it had."""
    found = store.unsettled_of(q, owner)
    for task_id in found:
        cancelled = store.cancel(q, task_id, message)
        if cancelled is not None and cancelled.number is not None:
            _give_back(q, cancelled, CANCELLED_UNREAD)
    return len(found)


def _give_back(q: Queue, task: TaskRecord, reason: str) -> None:
    kind = catalog.of(task.kind)
    if kind is not None and kind.release is not None:
        kind.release(q, task, reason)
    store.mark_released(q, task.id)


def sweep(q: Queue) -> int:
    """Give back the claims of tasks nobody will read (unread past their ttl, cancelled
    before they were read; a crash between a cancel and its release included), then
    delete long-expired tasks. How many claims went back."""
    released = 0
    for task in store.unclaimed_leftovers(q):
        try:
            if task.status == COMPLETED:
                error = {"code": -32603, "message": f"Task has expired: {UNREAD}"}
                if not store.expire_unread(q, task.id, UNREAD, error):
                    continue  # read meanwhile: the client's
            why = (
                CANCELLED_UNREAD
                if task.status == store.CANCELLED
                else "its task's answer was not read in time"
            )
            _give_back(q, task, why)
            released += 1
        except WorkqError as exc:
            log.warning("workq: a task's claim could not be given back: %s", exc.describe())
    store.purge(q)
    return released


__all__ = ["TaskExpired", "TaskNotFound", "abandon", "cancel", "poll", "sweep"]
