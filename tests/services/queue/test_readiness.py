"""One answer to "is this claim live, is this issue ready" from every service that asks
(claims, claim_next on both engines, explain, reports, the board, reservations, the
background renewal), from the rule in domain/readiness.py and its SQL in
services/queue/predicates.py. A claim without a lease (reports called it locked, claim took it,
claim_next never found it) cannot be written any more."""

from __future__ import annotations

from datetime import datetime

import pytest
from sqlalchemy import select, update

from tests.conftest import FakeClock
from workq.db.tables import issues as issues_t
from workq.domain import readiness
from workq.domain.authority import Authority
from workq.errors import StorageError
from workq.services.handle import Queue
from workq.services.queue import (
    blocking,
    claims,
    issues,
    overview,
    predicates,
    ready_queue,
    reports,
)


def _sql_says(queue: Queue, now: datetime) -> dict[int, tuple[bool, bool, bool]]:
    with queue.db.read() as conn:
        rows = conn.execute(
            select(
                issues_t.c.number,
                predicates.claim_live(now),
                predicates.claim_lapsed(now),
                predicates.ready(now),
            )
        ).all()
    return {r[0]: (bool(r[1]), bool(r[2]), bool(r[3])) for r in rows}


def _python_says(queue: Queue, now: datetime) -> dict[int, tuple[bool, bool, bool]]:
    with queue.db.read() as conn:
        rows = conn.execute(select(issues_t)).all()
    return {
        r.number: (
            readiness.claim_live(r, now),
            readiness.claim_lapsed(r, now),
            readiness.ready(r, now),
        )
        for r in rows
    }


def test_sql_and_python_give_one_answer(queue: Queue, clock: FakeClock) -> None:
    for title in ("open", "live", "lapsed", "lapsed too", "blocked", "done", "waits"):
        issues.create(queue, title=title)
    claims.claim(queue, 2, Authority.of({"run-a"}))
    claims.claim(queue, 3, Authority.of({"run-a"}))
    claims.claim(queue, 4, Authority.of({"run-a"}))
    blocking.block(queue, 5, "stuck", by=Authority.of(()))
    claims.claim(queue, 6, Authority.of({"run-a"}))
    claims.complete(queue, 6, Authority.of({"run-a"}))
    from workq.services.queue import dependencies

    dependencies.depend(queue, blocker=1, blocked=7)
    clock.advance(queue.lease_seconds / 2)
    claims.heartbeat(queue, 2, Authority.of({"run-a"}))
    clock.advance(queue.lease_seconds / 2 + 1)  # 3's and 4's leases ran out; 2's lives
    now = queue.now()
    python = _python_says(queue, now)
    assert _sql_says(queue, now) == python
    assert python == {
        1: (False, False, True),
        2: (True, False, False),
        3: (False, True, True),
        4: (False, True, True),
        5: (False, False, False),
        6: (False, False, False),
        7: (False, False, False),
    }


def test_a_lapsed_claim_is_ready_and_taken_by_every_door(queue: Queue, clock: FakeClock) -> None:
    issues.create(queue, title="its agent died")
    claims.claim(queue, 1, Authority.of({"run-a"}))
    clock.advance(queue.lease_seconds + 1)
    assert [r.number for r in ready_queue.ready(queue, limit=10)] == [1]
    assert ready_queue.explain(queue) == []  # nothing keeps it from being claimed
    (item,) = reports.backlog(queue).backlog
    assert not item.is_locked and item.locked_by is None
    assert reports.stats(queue).ready == 1
    columns = {c.name: c for c in overview.view(queue).columns}
    assert [c.number for c in columns["ready"].cards] == [1]
    assert columns["in_progress"].count == 0
    assert claims.renew_leases(queue, ["run-a"]) == 0  # not renewed: it is not live
    taken = claims.claim_next(queue, Authority.of({"run-b"}))
    assert taken is not None and taken.number == 1 and taken.claimed_by == "run-b"


@pytest.mark.parametrize(
    "values",
    [
        {"status": "in_progress"},
        {"status": "in_progress", "claimed_by": "ghost"},
        {"status": "in_progress", "lease_expires_at": None},
    ],
    ids=["nobody-no-lease", "no-lease", "lease-dropped"],
)
def test_the_database_refuses_an_issue_in_progress_without_holder_or_lease(
    queue: Queue, values: dict[str, object]
) -> None:
    issues.create(queue, title="x")
    if values.get("lease_expires_at", 0) is None:
        claims.claim(queue, 1, Authority.of({"run-a"}))
    with pytest.raises(StorageError):
        queue.db.write(
            lambda conn: conn.execute(
                update(issues_t).where(issues_t.c.number == 1).values(**values)
            )
        )
