"""Random operation sequences against a small pure-Python model of the queue.

After every step the ready list must equal the model's, and the stored blocked counts must
equal the graph (the doctor's oracle).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from sqlalchemy import delete, insert

from tests.conftest import FakeClock
from workq.db.tables import comments, counters, dependencies, events, issues, labels
from workq.errors import WorkqError
from workq.schemas import Priority
from workq.services import claims, maintenance
from workq.services import dependencies as deps_service
from workq.services import issues as issues_service
from workq.services.context import Queue

RUNS = ("run-a", "run-b", "run-c")
LEASE = 60


@dataclass
class Item:
    number: int
    rank: int
    created: datetime
    status: str = "open"
    blocked: bool = False
    holder: str | None = None
    until: datetime | None = None
    blockers: set[int] = field(default_factory=set)


class Model:
    def __init__(self) -> None:
        self.items: dict[int, Item] = {}
        self.next = 1

    def waiting(self, item: Item) -> bool:
        return any(self.items[b].status != "done" for b in item.blockers if b in self.items)

    def live(self, item: Item, now: datetime) -> bool:
        return item.holder is not None and item.until is not None and item.until > now

    def claimable(self, item: Item, now: datetime) -> bool:
        if item.status == "done" or item.blocked or self.waiting(item):
            return False
        return item.status == "open" or not self.live(item, now)

    def ready(self, now: datetime) -> list[int]:
        found = [i for i in self.items.values() if self.claimable(i, now)]
        found.sort(key=lambda i: (i.rank, i.created, i.number))
        return [i.number for i in found]

    def reaches(self, start: int, target: int) -> bool:
        """Does ``target`` wait (transitively) on ``start``?"""
        seen, todo = set(), [start]
        while todo:
            current = todo.pop()
            if current == target:
                return True
            seen.add(current)
            todo.extend(
                i.number
                for i in self.items.values()
                if current in i.blockers and i.number not in seen
            )
        return False


def reset(queue: Queue) -> None:
    def work(conn: object) -> None:
        for table in (labels, dependencies, comments, events, issues, counters):
            conn.execute(delete(table))  # type: ignore[attr-defined]
        conn.execute(insert(counters).values(name="issue_number", value=0))  # type: ignore[attr-defined]

    queue.db.write(work)


class QueueMachine(RuleBasedStateMachine):
    queue: Queue
    clock: FakeClock

    def __init__(self) -> None:
        super().__init__()
        reset(self.queue)
        self.model = Model()

    def _now(self) -> datetime:
        return self.clock.now

    def _expect(self, allowed: bool, call: object) -> None:
        try:
            call()  # type: ignore[operator]
        except WorkqError as exc:
            assert not allowed, f"refused but the model allows it: {exc.describe()}"
        else:
            assert allowed, "accepted but the model refuses it"

    numbers = st.integers(min_value=1, max_value=8)

    @rule(priority=st.sampled_from(list(Priority)))
    def create(self, priority: Priority) -> None:
        made = issues_service.create(self.queue, title="t", priority=priority)
        assert made.number == self.model.next
        self.model.items[made.number] = Item(made.number, priority.rank, self._now())
        self.model.next += 1

    @rule(number=numbers, run=st.sampled_from(RUNS))
    def claim(self, number: int, run: str) -> None:
        item = self.model.items.get(number)
        now = self._now()
        allowed = item is not None and (
            (
                item.holder == run
                and item.status == "in_progress"
                and not item.blocked
                and not self.model.waiting(item)
            )
            or self.model.claimable(item, now)
        )
        self._expect(allowed, lambda: claims.claim(self.queue, number, run))
        if allowed and item is not None:
            item.status, item.holder, item.until = (
                "in_progress",
                run,
                now + timedelta(seconds=LEASE),
            )

    @rule(run=st.sampled_from(RUNS))
    def claim_next(self, run: str) -> None:
        now = self._now()
        expected = self.model.ready(now)
        got = claims.claim_next(self.queue, run)
        if not expected:
            assert got is None
            return
        assert got is not None and got.number == expected[0]
        item = self.model.items[got.number]
        item.status, item.holder, item.until = "in_progress", run, now + timedelta(seconds=LEASE)

    @rule(number=numbers, run=st.sampled_from(RUNS))
    def complete(self, number: int, run: str) -> None:
        item = self.model.items.get(number)
        allowed = item is not None and (
            item.status == "done" or (item.status == "in_progress" and item.holder == run)
        )
        self._expect(allowed, lambda: claims.complete(self.queue, number, {run}))
        if allowed and item is not None:
            item.status, item.holder, item.until = "done", None, None

    @rule(number=numbers, run=st.sampled_from(RUNS))
    def release(self, number: int, run: str) -> None:
        item = self.model.items.get(number)
        allowed = item is not None and item.status == "in_progress" and item.holder == run
        self._expect(allowed, lambda: claims.release(self.queue, number, {run}))
        if allowed and item is not None:
            item.status, item.holder, item.until = "open", None, None

    @rule(number=numbers)
    def block(self, number: int) -> None:
        item = self.model.items.get(number)
        allowed = item is not None and item.status != "done"
        self._expect(allowed, lambda: claims.block(self.queue, number, "why"))
        if allowed and item is not None:
            item.blocked, item.status, item.holder, item.until = True, "open", None, None

    @rule(number=numbers)
    def unblock(self, number: int) -> None:
        item = self.model.items.get(number)
        self._expect(item is not None, lambda: claims.unblock(self.queue, number))
        if item is not None:
            item.blocked = False

    @rule(blocker=numbers, blocked=numbers)
    def depend(self, blocker: int, blocked: int) -> None:
        known = blocker in self.model.items and blocked in self.model.items
        allowed = (
            known
            and blocker != blocked
            and (
                blocker in self.model.items[blocked].blockers
                or not self.model.reaches(blocked, blocker)
            )
        )
        self._expect(
            allowed, lambda: deps_service.depend(self.queue, blocker=blocker, blocked=blocked)
        )
        if allowed:
            self.model.items[blocked].blockers.add(blocker)

    @rule(blocker=numbers, blocked=numbers)
    def undepend(self, blocker: int, blocked: int) -> None:
        known = blocker in self.model.items and blocked in self.model.items
        self._expect(
            known, lambda: deps_service.undepend(self.queue, blocker=blocker, blocked=blocked)
        )
        if known:
            self.model.items[blocked].blockers.discard(blocker)

    @rule(number=numbers)
    def reopen(self, number: int) -> None:
        item = self.model.items.get(number)
        allowed = item is not None and item.status == "done"
        self._expect(allowed, lambda: issues_service.reopen(self.queue, number))
        if allowed and item is not None:
            item.status = "open"

    @rule(number=numbers)
    def delete(self, number: int) -> None:
        item = self.model.items.pop(number, None)
        self._expect(item is not None, lambda: issues_service.delete_issue(self.queue, number))
        for other in self.model.items.values():
            other.blockers.discard(number)

    @rule(seconds=st.sampled_from([1, 30, LEASE + 1]))
    def wait(self, seconds: int) -> None:
        self.clock.advance(seconds)

    @invariant()
    def ready_matches_the_model(self) -> None:
        got = [i.number for i in claims.ready(self.queue, limit=50)]
        assert got == self.model.ready(self._now())

    @invariant()
    def blocked_counts_match_the_graph(self) -> None:
        report = maintenance.doctor(self.queue)
        assert [f for f in report.findings if f.check == "blocked_count"] == []


def test_queue_behaves_like_its_model(queue: Queue, clock: FakeClock) -> None:
    queue.lease_seconds = LEASE
    # A fresh subclass per engine: hypothesis settings may be applied to a class only once.
    machine: type[QueueMachine] = type("Machine", (QueueMachine,), {"queue": queue, "clock": clock})
    run = settings(
        max_examples=40,
        stateful_step_count=30,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )(machine).TestCase
    run().runTest()


@pytest.mark.parametrize("seconds", [0, LEASE - 1])
def test_lease_boundary(queue: Queue, clock: FakeClock, seconds: int) -> None:
    queue.lease_seconds = LEASE
    issues_service.create(queue, title="t")
    claims.claim(queue, 1, "run-a")
    clock.advance(seconds)
    assert claims.claim_next(queue, "run-b") is None
