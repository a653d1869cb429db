"""The rooms above the queue act through hooks on the Queue handle: a change hook inside
every change (and, when it can, inside PostgreSQL's one-statement claim), an ending hook
before a claim is completed or released."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import Connection, Select, select
from sqlalchemy.sql.dml import Insert

from tests.conftest import ADMIN
from workq.domain.authority import Authority
from workq.errors import Conflict, NotHolder
from workq.schemas import Status
from workq.services.handle import Ending, Queue
from workq.services.queue import claims, issues
from workq.services.sync import outbox
from workq.services.workspaces import worktrees

ME, OTHER = Authority.of({"me"}), Authority.of({"other"})


class Recorder:
    """A change hook with no statement form: claims take the general path."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, str]] = []

    def __call__(self, conn: Connection, issue_id: str, number: int, kind: str) -> None:
        self.seen.append((number, kind))

    def chained(self, changes: Select[Any]) -> Insert | None:
        return None


def test_the_rooms_hooks_are_on_every_opened_queue(queue: Queue) -> None:
    assert outbox.hook_of(queue) is not None
    assert worktrees.UNMERGED in queue.ending


def test_a_change_hook_sees_every_change_even_without_a_statement_form(queue: Queue) -> None:
    hook = Recorder()
    queue.on_change.append(hook)
    n = issues.create(queue, title="hooked").number
    taken = claims.claim_next(queue, ME)
    assert taken is not None and taken.number == n
    claims.complete(queue, n, ME)
    assert hook.seen == [(n, "created"), (n, "claimed"), (n, "completed")]


def _refusing(calls: list[str]) -> Ending:
    def ask(q: Queue, number: int, doing: str, first: Callable[[], None]) -> None:
        calls.append(doing)
        first()
        raise Conflict(f"not {doing} #{number}: kept by the test's room")

    return Ending(concerns=lambda conn, number: True, ask=ask)


@pytest.mark.parametrize("end", ["complete", "release"])
def test_an_ending_hook_refuses_and_nothing_changes(queue: Queue, end: str) -> None:
    calls: list[str] = []
    queue.ending.append(_refusing(calls))
    n = issues.create(queue, title="kept").number
    claims.claim(queue, n, ME)
    with pytest.raises(Conflict, match="kept by the test's room"):
        getattr(claims, end)(queue, n, ME)
    assert calls == [f"{end[:-1]}ing"]
    after = issues.get(queue, n)
    assert after.status == Status.IN_PROGRESS and after.claimed_by == "me"


def test_another_callers_refusal_wins_over_an_ending_hook(queue: Queue) -> None:
    queue.ending.append(_refusing([]))
    n = issues.create(queue, title="held").number
    claims.claim(queue, n, ME)
    with pytest.raises(NotHolder):
        claims.complete(queue, n, OTHER)
    assert issues.get(queue, n).claimed_by == "me"


def test_an_override_is_not_asked_by_the_ending_hooks(queue: Queue) -> None:
    calls: list[str] = []
    queue.ending.append(_refusing(calls))
    n = issues.create(queue, title="forced").number
    claims.claim(queue, n, ME)
    claims.complete(queue, n, ADMIN)
    assert calls == [] and issues.get(queue, n).status == Status.DONE


def test_the_claim_statement_feeds_the_outbox_as_a_part(queue: Queue) -> None:
    """On PostgreSQL the one-statement claim carries the outbox's row; on SQLite the general
    path writes it. Either way a mirror sees the claim."""
    from workq.db.tables import github_outbox
    from workq.services.sync import mirror_target

    mirror_target.configure(queue, "octo/repo")
    n = issues.create(queue, title="mirrored").number
    with queue.db.read() as conn:
        before = conn.execute(
            select(github_outbox.c.version).where(github_outbox.c.number == n)
        ).scalar()
    assert claims.claim_next(queue, ME) is not None
    with queue.db.read() as conn:
        after = conn.execute(
            select(github_outbox.c.version, github_outbox.c.kind).where(github_outbox.c.number == n)
        ).one()
    assert after.kind == "claimed" and after.version == (before or 0) + 1


def test_an_ending_hook_that_does_not_concern_the_issue_is_not_asked(queue: Queue) -> None:
    asked: list[str] = []

    def ask(q: Queue, number: int, doing: str, first: Callable[[], None]) -> None:
        asked.append(doing)

    looked: list[int] = []

    def concerns(conn: Connection, number: int) -> bool:
        looked.append(number)
        return False

    queue.ending.append(Ending(concerns=concerns, ask=ask))
    n = issues.create(queue, title="nothing to keep").number
    claims.claim(queue, n, ME)
    claims.complete(queue, n, ME)
    assert looked == [n] and asked == []
    assert issues.get(queue, n).status == Status.DONE


@pytest.mark.parametrize("end", ["complete", "release"])
def test_an_ending_hook_is_asked_outside_the_transaction_then_the_change_runs(
    queue: Queue, end: str
) -> None:
    """The hook may take its time (git) and even write: the change's transaction was left
    before it was asked, and the change runs again (asking the door again) after it."""
    asked: list[str] = []

    def ask(q: Queue, number: int, doing: str, first: Callable[[], None]) -> None:
        first()
        assert issues.get(q, number).claimed_by == "me"  # a read of its own
        issues.update_issue(q, number, title="looked at by the room", by=ADMIN)  # a write
        asked.append(doing)

    queue.ending.append(Ending(concerns=lambda conn, number: True, ask=ask))
    n = issues.create(queue, title="kept").number
    claims.claim(queue, n, ME)
    getattr(claims, end)(queue, n, ME)
    after = issues.get(queue, n)
    assert asked == [f"{end[:-1]}ing"] and after.title == "looked at by the room"
    assert after.status == (Status.DONE if end == "complete" else Status.OPEN)


@pytest.mark.parametrize("end", ["complete", "release"])
def test_the_doors_refusal_comes_before_the_ending_hook_even_with_no_holder(
    queue: Queue, end: str
) -> None:
    """An issue nobody holds: the door refuses the caller before any hook is asked (a hook
    may run git, and would say something about work the caller cannot end anyway)."""
    calls: list[str] = []
    queue.ending.append(_refusing(calls))
    n = issues.create(queue, title="unheld").number
    with pytest.raises(NotHolder):
        getattr(claims, end)(queue, n, ME)
    assert calls == []
