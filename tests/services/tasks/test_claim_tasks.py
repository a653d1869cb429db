"""A waiting issue_claim_next as a task, through the services: the claim and the task's
completion are one transaction; a task belongs to its owner; a cancel claims nothing and
gives back a claim made as it arrives; a claim nobody reads goes back to the queue,
recorded; the waker serves the oldest waiting task first."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.conftest import FakeClock
from workq.domain.authority import Authority
from workq.errors import TaskExpired, TaskNotFound
from workq.schemas import ClaimedIssue, ReadyFilter, TaskStatus
from workq.services.handle import Queue
from workq.services.queue import claims, issues, notes
from workq.services.tasks import claim_next, lifecycle, store, waker
from workq.services.tasks.store import READ_GRACE_SECONDS

A = Authority.of({"run-a"})
B = Authority.of({"run-b"})


def start(q: Queue, by: Authority = A, wait: int = 60, f: ReadyFilter | None = None) -> str:
    owner = by.acts_as
    assert owner is not None
    task = claim_next.start(q, owner=owner, by=by, f=f, worktree=None, wait_seconds=wait)
    return task.id


def history(q: Queue, number: int) -> list[tuple[str, str | None]]:
    return [(e.kind, e.actor) for e in notes.history(q, number, limit=100)]


def test_a_waiting_task_completes_with_the_claim_made_in_its_own_transaction(
    queue: Queue,
) -> None:
    task_id = start(queue)
    seen = lifecycle.poll(queue, task_id, "run-a")
    assert seen.status is TaskStatus.WORKING and seen.ttl_ms == (60 + READ_GRACE_SECONDS) * 1000
    issues.create(queue, title="work")
    done = lifecycle.poll(queue, task_id, "run-a")  # a poll advances it
    assert done.status is TaskStatus.COMPLETED
    assert done.answer is not None and done.answer["value"]["number"] == 1
    assert done.answer["value"]["claimed_by"] == "run-a"
    row = store.load(queue, task_id)
    assert row is not None and (row.number, row.fence) == (1, 1) and row.read_at is not None
    assert issues.get(queue, 1).claimed_by == "run-a"
    # It never takes a second claim, however often it is advanced.
    issues.create(queue, title="more")
    claim_next.advance(queue, row)
    assert issues.get(queue, 2).claimed_by is None


def test_work_already_there_when_the_task_is_made_is_claimed_at_once(queue: Queue) -> None:
    issues.create(queue, title="arrived after the caller's own try")
    row = store.load(queue, start(queue))
    assert row is not None and row.status == "completed" and row.number == 1


def test_the_wait_ends_with_nothing_claimed(queue: Queue, clock: FakeClock) -> None:
    task_id = start(queue, wait=5)
    clock.advance(6)
    done = lifecycle.poll(queue, task_id, "run-a")
    assert done.status is TaskStatus.COMPLETED and done.answer == {"value": {"claimed": False}}
    issues.create(queue, title="too late")
    assert issues.get(queue, 1).claimed_by is None


def test_another_caller_is_told_no_such_task(queue: Queue) -> None:
    task_id = start(queue)
    for act in (lifecycle.poll, lifecycle.cancel):
        with pytest.raises(TaskNotFound) as refused:
            act(queue, task_id, "run-b")
        unknown = pytest.raises(TaskNotFound)
        with unknown as never_issued:
            act(queue, "no-such-task", "run-b")
        assert refused.value.message == never_issued.value.message  # nothing tells them apart
    assert lifecycle.poll(queue, task_id, "run-a").status is TaskStatus.WORKING


def test_an_expired_task_is_gone(queue: Queue, clock: FakeClock) -> None:
    task_id = start(queue, wait=1)
    clock.advance(1 + READ_GRACE_SECONDS)
    with pytest.raises(TaskExpired):
        lifecycle.poll(queue, task_id, "run-a")


def test_a_cancelled_task_claims_nothing(queue: Queue) -> None:
    task_id = start(queue)
    assert lifecycle.cancel(queue, task_id, "run-a").status is TaskStatus.CANCELLED
    issues.create(queue, title="work")
    row = store.load(queue, task_id)
    assert row is not None
    claim_next.advance(queue, row)
    assert lifecycle.poll(queue, task_id, "run-a").status is TaskStatus.CANCELLED
    assert issues.get(queue, 1).claimed_by is None
    assert [k for k, _ in history(queue, 1)] == ["created"]


def test_a_claim_made_as_the_cancel_arrives_is_given_back(queue: Queue) -> None:
    task_id = start(queue)
    issues.create(queue, title="work")
    row = store.load(queue, task_id)
    assert row is not None
    claim_next.advance(queue, row)  # the waker claimed; the client has not read it yet
    assert issues.get(queue, 1).claimed_by == "run-a"
    assert lifecycle.cancel(queue, task_id, "run-a").status is TaskStatus.CANCELLED
    assert issues.get(queue, 1).claimed_by is None
    assert [k for k, _ in history(queue, 1)] == ["created", "claimed", "released"]
    assert lifecycle.poll(queue, task_id, "run-a").answer is not None  # what it had held


def test_a_cancel_after_the_answer_was_read_loses(queue: Queue) -> None:
    task_id = start(queue)
    issues.create(queue, title="work")
    assert lifecycle.poll(queue, task_id, "run-a").status is TaskStatus.COMPLETED  # delivered
    assert lifecycle.cancel(queue, task_id, "run-a").status is TaskStatus.COMPLETED
    assert issues.get(queue, 1).claimed_by == "run-a"


def test_a_claim_nobody_reads_within_the_ttl_goes_back_recorded(
    queue: Queue, clock: FakeClock
) -> None:
    task_id = start(queue, wait=10)
    issues.create(queue, title="work")
    row = store.load(queue, task_id)
    assert row is not None
    claim_next.advance(queue, row)
    assert lifecycle.sweep(queue) == 0  # within its ttl: kept for its reader
    clock.advance(10 + READ_GRACE_SECONDS)
    assert lifecycle.sweep(queue) == 1
    assert issues.get(queue, 1).claimed_by is None
    released = notes.history(queue, 1, limit=10)[-1]
    assert released.kind == "released" and released.actor == "run-a"
    assert "not read" in str(released.after)
    with pytest.raises(TaskExpired):
        lifecycle.poll(queue, task_id, "run-a")
    assert lifecycle.sweep(queue) == 0  # once


def test_the_waker_serves_the_oldest_waiting_task_first(queue: Queue, clock: FakeClock) -> None:
    first = start(queue, B)
    clock.advance(1)
    second = start(queue, A)
    issues.create(queue, title="one")
    assert waker.advance_all(queue, [claim_next.KIND]) == 2
    assert issues.get(queue, 1).claimed_by == "run-b"
    assert lifecycle.poll(queue, second, "run-a").status is TaskStatus.WORKING
    assert lifecycle.poll(queue, first, "run-b").status is TaskStatus.COMPLETED


def test_tasks_with_another_filter_are_not_served_what_they_did_not_ask_for(
    queue: Queue,
) -> None:
    bugs = start(queue, A, f=ReadyFilter.model_validate({"include_types": ["bug"]}))
    issues.create(queue, title="a task, not a bug")
    waker.advance_all(queue, [claim_next.KIND])
    assert lifecycle.poll(queue, bugs, "run-a").status is TaskStatus.WORKING
    assert issues.get(queue, 1).claimed_by is None


def test_racing_completers_give_a_task_one_claim(queue: Queue) -> None:
    task_id = start(queue)
    for n in range(4):
        issues.create(queue, title=f"work {n}")
    row = store.load(queue, task_id)
    assert row is not None
    gate = threading.Barrier(4)

    def complete() -> None:
        gate.wait()
        claim_next.advance(queue, row)

    threads = [threading.Thread(target=complete) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    held = [n for n in range(1, 5) if issues.get(queue, n).claimed_by == "run-a"]
    assert len(held) == 1
    done = store.load(queue, task_id)
    assert done is not None and done.number == held[0]


def test_an_answer_left_unfinished_by_a_crash_is_finished_by_a_later_poll(
    queue: Queue, clock: FakeClock
) -> None:
    """The claim committed with the task's completion, and the process stopped before the
    worktree and briefing were added: the task shows working for a grace period (its
    process may still be finishing), then the next poll finishes it."""
    task_id = start(queue)
    issues.create(queue, title="work")

    def receive(conn: Any, claimed: ClaimedIssue) -> None:  # claim_next.py's, then a crash
        answer = {"value": claimed.model_dump(mode="json"), store.UNFINISHED: True}
        assert store.complete(
            conn, task_id, queue.now(), answer, number=claimed.number, fence=claimed.fence
        )

    assert claims.claim_next(queue, A, then=receive) is not None
    shown = lifecycle.poll(queue, task_id, "run-a")
    assert shown.status is TaskStatus.WORKING and shown.answer is None
    clock.advance(lifecycle.FINISH_GRACE_SECONDS + 1)
    done = lifecycle.poll(queue, task_id, "run-a")
    assert done.status is TaskStatus.COMPLETED and done.answer is not None
    assert done.answer["value"]["number"] == 1 and store.UNFINISHED not in done.answer
    row = store.load(queue, task_id)
    assert row is not None and not row.unfinished() and row.read_at is not None
    assert issues.get(queue, 1).claimed_by == "run-a"


def test_a_claim_taken_back_when_its_task_was_settled_meanwhile(queue: Queue) -> None:
    """A completer that lost the race to a cancel rolls its claim back: no event, no claim."""
    task_id = start(queue)
    row = store.load(queue, task_id)
    assert row is not None
    lifecycle.cancel(queue, task_id, "run-a")
    issues.create(queue, title="work")
    claim_next._claim(queue, row, None, None)  # as a waker that read the task before
    assert issues.get(queue, 1).claimed_by is None
    assert [k for k, _ in history(queue, 1)] == ["created"]
