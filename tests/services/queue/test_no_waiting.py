"""Work that must not wait (workq/nowait.py): what the server runs on its event loop stops
before anything is written wherever it would wait, so that it can run again on a worker
thread. Each hostile case: another thread writing, another process writing, a lapsed
claim to take over (its holder's work is saved after), a repository that makes a worktree
per claim, a completion whose ending hooks run git. Each is refused with nothing changed,
and the same call, where it may wait, does what it always did."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import storage
from tests.conftest import FakeClock, migrated_sqlite
from tests.services.workspaces.gitrepo import commit, make_repo
from workq.config import Settings
from workq.domain.authority import Authority
from workq.nowait import WouldWait, before_waiting, no_waiting
from workq.services.handle import Queue
from workq.services.queue import claims, issues
from workq.services.runtime import open_queue
from workq.services.workspaces import claiming, repositories

A, B = Authority.of({"run-a"}), Authority.of({"run-b"})


@pytest.fixture
def q(tmp_path: Path, sqlite_template: Path, clock: FakeClock) -> Iterator[Queue]:
    queue = open_queue(Settings(db_path=migrated_sqlite(sqlite_template, tmp_path / "q.db")))
    queue.clock = clock
    yield queue
    queue.db.dispose()


def _file(q: Queue) -> Path:
    return Path(str(q.db.engine.url.database))


def refused_unchanged(q: Queue, call: object) -> WouldWait:
    """``call()`` inside ``no_waiting`` raises WouldWait and leaves the file as it was."""
    before = storage.dump(_file(q))
    with pytest.raises(WouldWait) as refused, no_waiting():
        call()  # type: ignore[operator]
    assert storage.dump(_file(q)) == before
    return refused.value


def test_another_thread_writing_is_would_wait_and_nothing_changes(q: Queue) -> None:
    number = issues.create(q, title="the parser").number
    claims.claim(q, number, A)
    held, release = threading.Event(), threading.Event()

    def writer() -> None:
        def work(_conn: object) -> None:
            held.set()
            release.wait(30)

        q.db.write(work)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert held.wait(30)
        refused_unchanged(q, lambda: claims.complete(q, number, A))
        refused_unchanged(q, lambda: claiming.claim_next(q, B, None))
    finally:
        release.set()
        thread.join(30)
    with no_waiting():
        assert claims.complete(q, number, A).number == number  # the lock is free again


def test_another_process_writing_is_would_wait_at_once(q: Queue) -> None:
    number = issues.create(q, title="the parser").number
    claims.claim(q, number, A)
    with storage.write_lock(_file(q)):
        # Without no_waiting this would wait out the busy timeout (10 s), then retry.
        refused_unchanged(q, lambda: claims.complete(q, number, A))
        refused_unchanged(q, lambda: claiming.claim_next(q, B, None))
    with no_waiting():
        assert claims.complete(q, number, A).number == number


def test_taking_over_a_lapsed_claim_is_not_done_on_the_loop(q: Queue, clock: FakeClock) -> None:
    number = issues.create(q, title="the parser").number
    claims.claim(q, number, A)
    clock.advance(q.lease_seconds + 1)
    refused = refused_unchanged(q, lambda: claiming.claim_next(q, B, None))
    assert "lapsed claim" in str(refused)
    taken = claiming.claim_next(q, B, None)  # where it may wait: taken over, as always
    assert taken is not None and taken.number == number and taken.previous_holder == "run-a"


@pytest.fixture
def app(q: Queue, tmp_path: Path) -> Path:
    path = make_repo(tmp_path / "app")
    repositories.add(q, "app", path, auto_worktree=True)
    return path


@pytest.mark.usefixtures("app")
def test_a_claim_that_makes_a_worktree_is_not_done_on_the_loop(q: Queue) -> None:
    number = issues.create(q, title="the parser").number
    repositories.assign(q, number, "app", by=Authority.of(()))
    assert "worktree per claim" in str(
        refused_unchanged(q, lambda: claiming.claim_next(q, A, None))
    )
    asked = refused_unchanged(q, lambda: claiming.claim_next(q, A, None, worktree=False))
    assert "in a repository" in str(asked)
    taken = claiming.claim_next(q, A, None)
    assert taken is not None and taken.worktree is not None  # made, on a thread that may wait


@pytest.mark.usefixtures("app")
def test_a_completion_whose_ending_hooks_run_git_is_not_done_on_the_loop(q: Queue) -> None:
    number = issues.create(q, title="the parser").number
    repositories.assign(q, number, "app", by=Authority.of(()))
    taken = claiming.claim_next(q, A, None)
    assert taken is not None and taken.worktree is not None
    commit(Path(taken.worktree.path), {"parser.py": "x = 1\n"}, "the parser")
    refused = refused_unchanged(q, lambda: claims.complete(q, number, A))
    assert "ending hooks" in str(refused)


def test_after_a_commit_a_wait_is_allowed_and_logged(
    q: Queue, caplog: pytest.LogCaptureFixture
) -> None:
    """A second run would repeat what committed: from there on the call may wait (and
    says so, since it should not have been run on the loop)."""
    number = issues.create(q, title="the parser").number
    with no_waiting(), caplog.at_level(logging.WARNING, logger="workq.nowait"):
        claims.claim(q, number, A)
        before_waiting("git")  # does not raise
    assert "git after a commit" in caplog.text
    with pytest.raises(WouldWait), no_waiting():
        before_waiting("git")
