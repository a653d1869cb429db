"""The outbox on the queue's mutations, on SQLite (and PostgreSQL when configured)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.conftest import ADMIN, FakeClock
from workq.domain.authority import Authority
from workq.errors import Conflict, InvalidInput
from workq.services.handle import Queue
from workq.services.queue import claims, dependencies, issues, notes
from workq.services.sync import (
    mirror,
    mirror_target,
    outbox,
    outbox_rows,
    sync_status,
    worker_lease,
)

REPO = "acme/widgets"


def _rows(q: Queue) -> dict[int, outbox_rows.OutboxItem]:
    found = {}
    for item in outbox_rows.due(q, limit=1000):
        found[item.number] = item
    return found


def test_without_a_mirror_mutations_queue_nothing(queue: Queue) -> None:
    made = issues.create(queue, title="x")
    issues.update_issue(queue, made.number, title="y", by=ADMIN)
    claims.claim(queue, made.number, Authority.of({"run-1"}))
    assert sync_status.status(queue).pending == 0
    assert mirror_target.mirror(queue) is None


def test_configuring_queues_every_issue_once(queue: Queue) -> None:
    for n in range(3):
        issues.create(queue, title=f"n{n}")
    configured, queued = mirror_target.configure(queue, REPO)
    assert (configured.repo, queued) == (REPO, 3)
    assert mirror_target.configure(queue, REPO)[1] == 0  # again: nothing new
    with pytest.raises(Conflict, match="already mirrors acme/widgets"):
        mirror_target.configure(queue, "acme/other")


def test_every_mutation_refreshes_one_row_per_issue(queue: Queue, clock: FakeClock) -> None:
    mirror_target.configure(queue, REPO)
    a = issues.create(queue, title="a")
    b = issues.create(queue, title="b")
    issues.update_issue(queue, a.number, title="a2", by=ADMIN)
    claims.claim(queue, a.number, Authority.of({"run-1"}))
    notes.comment(queue, a.number, "hi")
    dependencies.depend(queue, blocker=b.number, blocked=a.number)
    claims.complete(queue, b.number, Authority.overriding("admin", who="admin"))
    rows = _rows(queue)
    assert set(rows) == {a.number, b.number}
    assert rows[a.number].version >= 4
    assert rows[a.number].kind != "created"
    issues.delete_issue(queue, b.number, by=ADMIN)
    assert _rows(queue)[b.number].kind == "deleted"


def test_finish_keeps_a_row_changed_while_it_was_pushed(queue: Queue) -> None:
    mirror_target.configure(queue, REPO)
    made = issues.create(queue, title="a")
    (item,) = outbox_rows.due(queue)
    issues.update_issue(
        queue,
        made.number,
        title="changed meanwhile",
        by=ADMIN,
    )
    assert outbox_rows.finish(queue, item) is False
    (again,) = outbox_rows.due(queue)
    assert again.version == item.version + 1
    assert outbox_rows.finish(queue, again) is True
    assert outbox_rows.due(queue) == []


def test_reschedule_counts_attempts_and_parks_then_a_change_revives(
    queue: Queue, clock: FakeClock
) -> None:
    mirror_target.configure(queue, REPO)
    made = issues.create(queue, title="a")
    later = clock.now + timedelta(minutes=5)
    for n in range(3):
        after = outbox_rows.reschedule(
            queue, made.id, later, f"boom {n}", count_attempt=True, max_attempts=3
        )
    assert after is not None and after.state == outbox_rows.DEAD
    status = sync_status.status(queue)
    assert (status.pending, status.dead) == (0, 1)
    assert status.problems[0].last_error == "boom 2"
    issues.update_issue(queue, made.number, title="b", by=ADMIN)
    (revived,) = outbox_rows.due(queue)
    assert (revived.state, revived.attempts) == (outbox_rows.PENDING, 0)


def test_a_rate_limit_wait_survives_new_changes(queue: Queue, clock: FakeClock) -> None:
    mirror_target.configure(queue, REPO)
    made = issues.create(queue, title="a")
    wait = clock.now + timedelta(seconds=60)
    outbox_rows.reschedule(queue, made.id, wait, "limit", count_attempt=False, max_attempts=3)
    issues.update_issue(queue, made.number, title="b", by=ADMIN)
    assert outbox_rows.due(queue) == []
    assert outbox_rows.next_due_at(queue) == wait
    clock.advance(61)
    assert len(outbox_rows.due(queue)) == 1
    assert outbox_rows.revive(queue, waiting=True) == 0  # due already


def test_queue_all_includes_linked_deleted_issues(queue: Queue) -> None:
    mirror_target.configure(queue, REPO)
    made = issues.create(queue, title="a")
    mirror.save_link(
        queue,
        issue_id=made.id,
        number=made.number,
        repo=REPO,
        gh_number=7,
        url="https://github.com/acme/widgets/issues/7",
        snapshot="{}",
        remote_updated_at=None,
    )
    for item in outbox_rows.due(queue):
        outbox_rows.finish(queue, item)
    issues.delete_issue(queue, made.number, by=ADMIN)
    for item in outbox_rows.due(queue):
        outbox_rows.finish(queue, item)
    issues.create(queue, title="b")
    assert outbox.queue_all(queue) == 2
    link = mirror.github_link(queue, made.number)
    assert link is not None and link.gh_number == 7


def test_the_worker_lease_is_exclusive_until_it_expires(queue: Queue, clock: FakeClock) -> None:
    mirror_target.configure(queue, REPO)
    until = clock.now + timedelta(seconds=30)
    alive = lambda worker: False  # noqa: E731
    assert worker_lease.take(queue, REPO, "a:1", until, holder_is_gone=alive) is None
    assert worker_lease.take(queue, REPO, "b:2", until, holder_is_gone=alive) == "a:1"
    clock.advance(31)
    assert worker_lease.take(queue, REPO, "b:2", until, holder_is_gone=alive) is None


def test_forget_drops_the_mirror_and_stops_the_outbox(queue: Queue) -> None:
    mirror_target.configure(queue, REPO)
    made = issues.create(queue, title="a")
    with pytest.raises(InvalidInput):
        mirror_target.forget(queue, "acme/other")
    mirror_target.forget(queue, REPO)
    issues.update_issue(queue, made.number, title="b", by=ADMIN)
    assert sync_status.status(queue).pending == 0 and mirror_target.mirror(queue) is None
