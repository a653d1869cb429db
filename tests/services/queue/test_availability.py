"""Why select_next_issue found nothing: the counts reports.availability gives, on every
engine."""

from __future__ import annotations

from workq.domain.authority import Authority
from workq.schemas import IssueType
from workq.services.handle import Queue
from workq.services.queue import claims, dependencies, issues, reports


def test_counts_locked_blocked_and_filtered(queue: Queue) -> None:
    assert reports.availability(queue) == reports.Availability(0, 0, 0, 0)
    bug = issues.create(queue, title="bug", issue_type="bug").number
    docs = issues.create(queue, title="docs", issue_type="docs").number
    waiting = issues.create(queue, title="waits", issue_type="bug").number
    dependencies.depend(queue, blocker=bug, blocked=waiting)
    claims.claim(queue, bug, Authority.of({"run-a"}))
    done = issues.create(queue, title="done", issue_type="bug").number
    claims.claim(queue, done, Authority.of({"run-a"}))
    claims.complete(queue, done, Authority.of({"run-a"}))
    assert reports.availability(queue) == reports.Availability(3, 3, 1, 1)
    bugs = reports.availability(queue, include_types=[IssueType.BUG])
    assert bugs == reports.Availability(3, 2, 1, 1)
    assert reports.availability(queue, exclude_types=[IssueType.BUG]).matching == 1
    claims.claim(queue, docs, Authority.of({"run-b"}))
    assert reports.availability(queue, exclude_types=[IssueType.BUG]).locked == 1
