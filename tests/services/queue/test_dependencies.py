"""Dependencies: readiness follows the graph, cycles are refused, counts match the oracle."""

from __future__ import annotations

import pytest

from tests.conftest import ADMIN
from workq.domain.authority import Authority
from workq.errors import DependencyCycle, InvalidInput, NotClaimable, NotFound
from workq.services.handle import Queue
from workq.services.maintenance import maintenance
from workq.services.queue import claims, dependencies, issues, ready_queue


def _ready(queue: Queue) -> list[int]:
    return [i.number for i in ready_queue.ready(queue, limit=50)]


def _finish(queue: Queue, number: int) -> list[int]:
    claims.claim(queue, number, Authority.of({"run"}))
    return claims.complete(queue, number, Authority.of({"run"})).unblocked


def _assert_counts_match_oracle(queue: Queue) -> None:
    report = maintenance.doctor(queue)
    assert [f for f in report.findings if f.check == "blocked_count"] == []


def test_dependent_is_ready_only_after_its_last_blocker(queue: Queue) -> None:
    for title in ("a", "b", "c"):
        issues.create(queue, title=title)
    dependencies.depend(queue, blocker=1, blocked=3)
    dependencies.depend(queue, blocker=2, blocked=3)
    assert _ready(queue) == [1, 2]
    with pytest.raises(NotClaimable):
        claims.claim(queue, 3, Authority.of({"run"}))
    assert _finish(queue, 1) == []
    assert _ready(queue) == [2]
    assert _finish(queue, 2) == [3]
    assert _ready(queue) == [3]
    _assert_counts_match_oracle(queue)


def test_cycles_are_refused(queue: Queue) -> None:
    for title in ("a", "b", "c"):
        issues.create(queue, title=title)
    dependencies.depend(queue, blocker=1, blocked=2)
    dependencies.depend(queue, blocker=2, blocked=3)
    with pytest.raises(DependencyCycle):
        dependencies.depend(queue, blocker=3, blocked=1)
    with pytest.raises(DependencyCycle):
        dependencies.depend(queue, blocker=2, blocked=1)
    with pytest.raises(InvalidInput):
        dependencies.depend(queue, blocker=1, blocked=1)
    with pytest.raises(NotFound):
        dependencies.depend(queue, blocker=1, blocked=9)
    assert issues.get(queue, 1).blocked_by == []


def test_repeated_edges_and_removal(queue: Queue) -> None:
    issues.create(queue, title="a")
    issues.create(queue, title="b")
    dependencies.depend(queue, blocker=1, blocked=2)
    dependencies.depend(queue, blocker=1, blocked=2)
    assert issues.get(queue, 2).open_blockers == 1
    dependencies.undepend(queue, blocker=1, blocked=2)
    dependencies.undepend(queue, blocker=1, blocked=2)
    assert issues.get(queue, 2).open_blockers == 0
    assert _ready(queue) == [1, 2]


def test_done_blocker_does_not_block_and_reopen_blocks_again(queue: Queue) -> None:
    issues.create(queue, title="a")
    issues.create(queue, title="b")
    _finish(queue, 1)
    dependencies.depend(queue, blocker=1, blocked=2)
    assert _ready(queue) == [2]
    issues.reopen(queue, 1)
    assert _ready(queue) == [1]
    _assert_counts_match_oracle(queue)


def test_deleting_a_blocker_frees_its_dependents(queue: Queue) -> None:
    issues.create(queue, title="a")
    issues.create(queue, title="b")
    dependencies.depend(queue, blocker=1, blocked=2)
    issues.delete_issue(queue, 1, by=ADMIN)
    assert _ready(queue) == [2]
    assert issues.get(queue, 2).blocked_by == []
    _assert_counts_match_oracle(queue)


def test_doctor_finds_and_repairs_drift(queue: Queue) -> None:
    from sqlalchemy import update

    from workq.db.tables import issues as table

    issues.create(queue, title="a")
    issues.create(queue, title="b")
    dependencies.depend(queue, blocker=1, blocked=2)
    queue.db.write(lambda c: c.execute(update(table).values(open_blockers=5)))
    report = maintenance.doctor(queue)
    assert not report.ok and len(report.findings) == 2
    fixed = maintenance.doctor(queue, repair=True)
    assert fixed.repaired == 2
    assert maintenance.doctor(queue).findings == []
    assert _ready(queue) == [1]
