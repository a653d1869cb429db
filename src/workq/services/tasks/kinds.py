"""Which tool calls may become tasks, and how a task of each kind advances.

A kind is defined by the module that knows its work (claim_next.py for
``issue_claim_next``) and listed in catalog.py. Everything else about a task (its row,
polling, cancelling, expiry, the waker) is the same for every kind.

- ``advance(q, task)``: try to move a working task on, now: complete it (``store.complete``,
  in the transaction of the work that completes it) if it can, else leave it working. Safe
  to call from any process at any time, concurrently: the status's compare-and-set decides.
  Also finishes a completed task whose answer is unfinished (``store.UNFINISHED``).
- ``ready(q, task)``: whether ``advance`` may find something now (a read, no write): the
  waker asks it once per ``key(task)`` after a change (tasks asking the same question share
  the answer) and leaves the task alone when it says no, unless its wait is over. None:
  always try.
- ``on_change``: the waker advances its working tasks when the queue changes (new ready
  work); ``every_seconds``: and at least this often (a pull request's state, which no event
  of the queue announces). Every kind is advanced when its task is polled (``tasks/get``).
- ``release(q, task, reason)``: give back what a task holds that nobody will receive (a
  claim completed for it whose answer was not read within its ttl, or cancelled): None if
  the kind holds nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass

from workq.services.handle import Queue
from workq.services.tasks.store import TaskRecord


@dataclass(frozen=True)
class Kind:
    name: str
    advance: Callable[[Queue, TaskRecord], None]
    release: Callable[[Queue, TaskRecord, str], None] | None = None
    ready: Callable[[Queue, TaskRecord], bool] | None = None
    key: Callable[[TaskRecord], Hashable] | None = None
    on_change: bool = True
    every_seconds: float | None = None
