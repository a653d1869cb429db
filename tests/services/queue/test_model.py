"""Random operation sequences against a small pure-Python model of the queue.

After every step the ready list must equal the model's, and the stored blocked counts must
equal the graph (the doctor's oracle). The model holds the rules about claims that wait: a
dependency added to a claimed issue, or a blocker reopened, leaves the claim where it is;
the holder's re-claim and heartbeat renew it and say what it waits on; completing it is
refused, naming those, until they are done (or forced). A holder's claim_next of its own
expired claim is a renewal too (no takeover, the same claimed_at).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from sqlalchemy import delete, insert

from tests.conftest import ADMIN, FakeClock
from tests.services.plans.conftest import fill
from workq.db.tables import (
    comments,
    counters,
    dependencies,
    events,
    github_links,
    issues,
    labels,
    plan_issues,
    plans,
)
from workq.domain.authority import Authority
from workq.errors import LeaseLapsed, OpenBlockers, WorkqError
from workq.schemas import Claim, IssueType, Priority
from workq.services.handle import Queue
from workq.services.maintenance import maintenance
from workq.services.plans import plan_mode as plans_service
from workq.services.queue import blocking, claims, ready_queue
from workq.services.queue import dependencies as deps_service
from workq.services.queue import issues as issues_service
from workq.services.sync import mirror

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
    claimed_at: datetime | None = None
    blockers: set[int] = field(default_factory=set)


class Model:
    def __init__(self) -> None:
        self.items: dict[int, Item] = {}
        self.next = 1

    def waits_on(self, item: Item) -> list[int]:
        return sorted(
            b for b in item.blockers if b in self.items and self.items[b].status != "done"
        )

    def waiting(self, item: Item) -> bool:
        return bool(self.waits_on(item))

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
        for table in (
            labels,
            dependencies,
            comments,
            events,
            plan_issues,
            plans,
            github_links,
            issues,
            counters,
        ):
            conn.execute(delete(table))  # type: ignore[attr-defined]
        conn.execute(insert(counters).values(name="issue_number", value=0))  # type: ignore[attr-defined]

    queue.db.write(work)


# The tasks of the plan tests.conftest's fill() writes: 3 waits for 1, 4 for 1 and 3.
PLAN_TASKS = {1: set(), 2: set(), 3: {1}, 4: {1, 3}}


class QueueMachine(RuleBasedStateMachine):
    queue: Queue
    clock: FakeClock
    plans_dir: Path

    def __init__(self) -> None:
        super().__init__()
        reset(self.queue)
        self.model = Model()
        self.launches = 0
        self.plans_dir.mkdir(exist_ok=True)
        self.folder = Path(tempfile.mkdtemp(dir=self.plans_dir))  # plan files of this run

    def _now(self) -> datetime:
        return self.clock.now

    def _expect(self, allowed: bool, call: object) -> object:
        try:
            got = call()  # type: ignore[operator]
        except WorkqError as exc:
            assert not allowed, f"refused but the model allows it: {exc.describe()}"
            return exc
        assert allowed, "accepted but the model refuses it"
        return got

    def _take(self, item: Item, run: str, now: datetime) -> None:
        """The model's claim: a renewal keeps claimed_at, a new claim sets it."""
        if not (item.status == "in_progress" and item.holder == run):
            item.claimed_at = now
        item.status, item.holder, item.until = "in_progress", run, now + timedelta(seconds=LEASE)

    # Few numbers, most of them made at the start, so that claims, dependencies and
    # completions meet on the same issues.
    numbers = st.integers(min_value=1, max_value=5)

    @initialize(priorities=st.lists(st.sampled_from(list(Priority)), min_size=3, max_size=3))
    def start(self, priorities: list[Priority]) -> None:
        for priority in priorities:
            self.create(priority)

    @rule(priority=st.sampled_from(list(Priority)))
    def create(self, priority: Priority) -> None:
        made = issues_service.create(self.queue, title="t", priority=priority)
        assert made.number == self.model.next
        self.model.items[made.number] = Item(made.number, priority.rank, self._now())
        self.model.next += 1

    @rule(priority=st.sampled_from(list(Priority)), done=st.booleans())
    def import_from_github(self, priority: Priority, done: bool) -> None:
        number = self.model.next
        made = mirror.create_from_github(
            self.queue,
            repo="acme/widgets",
            gh_number=number,
            url=f"https://github.com/acme/widgets/issues/{number}",
            title="from github",
            description="",
            priority=priority,
            issue_type=IssueType.TASK,
            label_names=[],
            done=done,
            snapshot="{}",
            remote_updated_at=self._now(),
            actor="github",
        )
        assert made.number == number
        status = "done" if done else "open"
        self.model.items[number] = Item(number, priority.rank, self._now(), status=status)
        self.model.next += 1

    @precondition(lambda self: self.launches < 2)  # keeps the queue under ready's page
    @rule()
    def launch_plan(self) -> None:
        """A plan's tasks become issues that wait for each other (launchSwarm)."""
        self.launches += 1
        slug = f"plan-{self.launches}"
        plans_service.enter(self.queue, "planner", slug, "goal", self.folder)
        fill(self.folder / f"{slug}.md")
        done = plans_service.exit_plan(self.queue, "planner", launch_swarm=True)
        first = self.model.next
        assert [i.number for i in done.launched] == [first + t - 1 for t in PLAN_TASKS]
        for task, waits in PLAN_TASKS.items():
            blockers = {first + w - 1 for w in waits}
            item = Item(first + task - 1, Priority.MEDIUM.rank, self._now(), blockers=blockers)
            self.model.items[item.number] = item
        self.model.next += len(PLAN_TASKS)

    @rule(number=numbers, run=st.sampled_from(RUNS))
    def claim(self, number: int, run: str) -> None:
        item = self.model.items.get(number)
        now = self._now()
        # The holder's own claim is renewed whatever it has come to wait on.
        renewal = item is not None and item.holder == run and item.status == "in_progress"
        allowed = item is not None and (renewal or self.model.claimable(item, now))
        got = self._expect(allowed, lambda: claims.claim(self.queue, number, Authority.of({run})))
        if allowed and item is not None:
            assert isinstance(got, Claim)
            assert got.already_held == renewal
            assert got.waits_on == self.model.waits_on(item)
            self._take(item, run, now)
            assert got.claimed_at == item.claimed_at

    @rule(run=st.sampled_from(RUNS))
    def claim_next(self, run: str) -> None:
        now = self._now()
        expected = self.model.ready(now)
        got = claims.claim_next(self.queue, Authority.of({run}))
        if not expected:
            assert got is None
            return
        assert got is not None and got.number == expected[0]
        item = self.model.items[got.number]
        renewal = item.status == "in_progress" and item.holder == run
        # Its own expired claim comes back as a renewal, not a takeover from itself.
        assert got.already_held == renewal
        assert got.previous_holder == (None if renewal else item.holder)
        self._take(item, run, now)
        assert got.claimed_at == item.claimed_at

    @rule(number=numbers, run=st.sampled_from(RUNS))
    def heartbeat(self, number: int, run: str) -> None:
        item = self.model.items.get(number)
        holds = item is not None and item.status == "in_progress" and item.holder == run
        # A lapsed lease is not revived: the holder must claim again.
        allowed = holds and item is not None and self.model.live(item, self._now())
        got = self._expect(
            allowed, lambda: claims.heartbeat(self.queue, number, Authority.of({run}))
        )
        if holds and not allowed:
            assert isinstance(got, LeaseLapsed), got
        if allowed and item is not None:
            assert isinstance(got, Claim)
            assert got.waits_on == self.model.waits_on(item)
            assert got.claimed_at == item.claimed_at
            item.until = self._now() + timedelta(seconds=LEASE)

    @rule(number=numbers, run=st.sampled_from(RUNS))
    def complete(self, number: int, run: str) -> None:
        item = self.model.items.get(number)
        holds = item is not None and item.status == "in_progress" and item.holder == run
        allowed = item is not None and (
            item.status == "done" or (holds and not self.model.waiting(item))
        )
        got = self._expect(
            allowed, lambda: claims.complete(self.queue, number, Authority.of({run}))
        )
        if holds and not allowed and item is not None:
            # Refused for what it waits on, naming exactly those.
            assert isinstance(got, OpenBlockers), got
            assert got.facts["waits_on"] == self.model.waits_on(item)
        if allowed and item is not None:
            item.status, item.holder, item.until = "done", None, None

    @rule(number=numbers)
    def force_complete(self, number: int) -> None:
        item = self.model.items.get(number)
        self._expect(
            item is not None,
            lambda: claims.complete(self.queue, number, Authority.overriding("admin", who="admin")),
        )
        if item is not None:
            item.status, item.holder, item.until = "done", None, None

    @rule(number=numbers, run=st.sampled_from(RUNS))
    def release(self, number: int, run: str) -> None:
        item = self.model.items.get(number)
        allowed = item is not None and item.status == "in_progress" and item.holder == run
        self._expect(allowed, lambda: claims.release(self.queue, number, Authority.of({run})))
        if allowed and item is not None:
            item.status, item.holder, item.until = "open", None, None

    @rule(number=numbers, run=st.sampled_from((None, *RUNS)))
    def block(self, number: int, run: str | None) -> None:
        """As an admin (``run`` None), or as a run, which may not block another's live claim."""
        item = self.model.items.get(number)
        others = item is not None and self.model.live(item, self._now()) and item.holder != run
        allowed = item is not None and item.status != "done" and (run is None or not others)
        by = Authority.overriding("admin", who="admin") if run is None else Authority.of({run})
        self._expect(allowed, lambda: blocking.block(self.queue, number, "why", by=by))
        if allowed and item is not None:
            item.blocked, item.status, item.holder, item.until = True, "open", None, None

    @rule(number=numbers)
    def unblock(self, number: int) -> None:
        item = self.model.items.get(number)
        self._expect(item is not None, lambda: blocking.unblock(self.queue, number))
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
        self._expect(
            item is not None,
            lambda: issues_service.delete_issue(self.queue, number, by=ADMIN),
        )
        for other in self.model.items.values():
            other.blockers.discard(number)

    # Rules that pick from the model's state, so that random sequences often meet the
    # cases of claims that come to wait: a claimed issue given a dependency, then renewed
    # or completed by its holder; a done issue that claimed ones wait on, reopened.
    def _claimed(self) -> list[int]:
        return sorted(n for n, i in self.model.items.items() if i.status == "in_progress")

    @precondition(lambda self: self._claimed())
    @rule(data=st.data())
    def depend_a_claimed_issue(self, data: st.DataObject) -> None:
        blocked = data.draw(st.sampled_from(self._claimed()))
        blocker = data.draw(st.sampled_from(sorted(self.model.items)))
        self.depend(blocker, blocked)

    @precondition(lambda self: self._claimed())
    @rule(data=st.data(), act=st.sampled_from(["claim", "heartbeat", "complete"]))
    def holder_acts(self, data: st.DataObject, act: str) -> None:
        number = data.draw(st.sampled_from(self._claimed()))
        holder = self.model.items[number].holder
        assert holder is not None
        getattr(self, act)(number, holder)

    @precondition(lambda self: any(i.status == "done" for i in self.model.items.values()))
    @rule(data=st.data())
    def reopen_a_done_issue(self, data: st.DataObject) -> None:
        done = sorted(n for n, i in self.model.items.items() if i.status == "done")
        self.reopen(data.draw(st.sampled_from(done)))

    @rule(seconds=st.sampled_from([1, 30, LEASE + 1]))
    def wait(self, seconds: int) -> None:
        self.clock.advance(seconds)

    @invariant()
    def ready_matches_the_model(self) -> None:
        got = [i.number for i in ready_queue.ready(self.queue, limit=50)]
        assert got == self.model.ready(self._now())

    @invariant()
    def blocked_counts_match_the_graph(self) -> None:
        report = maintenance.doctor(self.queue)
        assert [f for f in report.findings if f.check == "blocked_count"] == []


@pytest.mark.slow
def test_queue_behaves_like_its_model(queue: Queue, clock: FakeClock, tmp_path: Path) -> None:
    queue.lease_seconds = LEASE
    # A fresh subclass per engine: hypothesis settings may be applied to a class only once.
    machine: type[QueueMachine] = type(
        "Machine",
        (QueueMachine,),
        {"queue": queue, "clock": clock, "plans_dir": tmp_path / "plans"},
    )
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
    claims.claim(queue, 1, Authority.of({"run-a"}))
    clock.advance(seconds)
    assert claims.claim_next(queue, Authority.of({"run-b"})) is None
