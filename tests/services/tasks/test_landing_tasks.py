"""A landing through a pull request followed by a task, through the services, against the
fake GitHub (a real bare repository behind it) with the worker's passes run here: the task
completes when the landing lands (the merge commit) or is refused (what to repair), with
what the merge answers for that landing; it says where the landing stands meanwhile; a
landing queued again with another tip ends the task that followed the old one; its wait
ends; a cancel stops the following and nothing else; the waker advances it on its timer."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from tests.github.landing_helpers import AGENT, Landing, landing_on
from tests.github.tools_helpers import git
from tests.github_fake.server import FakeGitHub
from workq.db.tables import tasks
from workq.domain.authority import Authority
from workq.schemas import MergeResult, Status, TaskStatus, TaskView
from workq.services.queue import issues
from workq.services.tasks import catalog, lifecycle, store, waker
from workq.services.tasks import landing as landing_task
from workq.services.workspaces import landings, merges, pr_landings


@pytest.fixture
def landing(tmp_path: Path) -> Iterator[Landing]:
    with FakeGitHub() as fake, landing_on(tmp_path, fake) as found:
        yield found


def follow(landing: Landing, number: int) -> str:
    """Merge issue ``number`` as its holder (the landing is queued) and follow it."""
    done = merges.merge_issue(landing.q, number, by=Authority.of([AGENT]))
    assert done.landing is not None and landing_task.follows(done.landing)
    task = landing_task.start(landing.q, owner=AGENT, landing=done.landing)
    assert task.status == "working" and task.poll_interval_ms == landing_task.POLL_MS
    return task.id


def answer(view: TaskView) -> MergeResult:
    assert view.status is TaskStatus.COMPLETED and view.answer is not None, view
    return MergeResult.model_validate(view.answer["value"])


def poll(landing: Landing, task_id: str) -> TaskView:
    return lifecycle.poll(landing.q, task_id, AGENT)


def test_the_task_completes_with_the_merge_commit_once_the_landing_landed(
    landing: Landing,
) -> None:
    number = landing.issue("Add a feature", "feature.py", "x = 1\n")
    task_id = follow(landing, number)
    working = poll(landing, task_id)
    assert working.status is TaskStatus.WORKING
    assert working.status_message == f"Landing #{number} queued"
    assert working.ttl_ms == (landing_task.WAIT_SECONDS + store.READ_GRACE_SECONDS) * 1000

    assert landing.land_pass().landed == [number]
    done = answer(poll(landing, task_id))
    main = git(landing.bare, "rev-parse", "main")
    assert done.merged and done.commit == main and done.number == number
    assert done.worktree_cleaned and done.note is None
    assert done.landing is not None and done.landing.state == "landed"
    assert done.landing.merge_sha == main and done.landing.failure is None
    # The same answer the merge gives for that landing.
    status = landings.require(landing.q, number)
    assert done == pr_landings.answer(landing.q, status)
    assert issues.get(landing.q, number).status == Status.DONE
    row = store.load(landing.q, task_id)
    assert row is not None and row.status_message == f"Landed #{number} as {main[:12]}"


def test_a_refused_landing_completes_the_task_with_what_to_repair(landing: Landing) -> None:
    landing.fake.protect_branch("main", required_checks=["ci"])
    number = landing.issue("Fix the bug", "bug.py", "broken = True\n")
    task_id = follow(landing, number)
    assert landing.land_pass().waiting == 1
    (pull,) = landing.fake.pulls()
    working = poll(landing, task_id)  # where it stands, said as it moves
    assert working.status is TaskStatus.WORKING
    assert working.status_message is not None
    assert working.status_message.startswith(f"Landing #{number} open, pull request #")

    landing.fake.add_check_run(
        pull["head"]["sha"],
        "ci",
        conclusion="failure",
        title="2 tests failed",
        summary="test_bug: assert broken is False",
    )
    assert landing.land_pass().refused == [number]
    done = answer(poll(landing, task_id))
    assert not done.merged and done.commit is None and not done.worktree_cleaned
    assert done.landing is not None and done.landing.state == "refused"
    failure = done.landing.failure
    assert failure is not None and failure.reason == done.landing.detail
    assert "check ci failed" in failure.reason and failure.round == 1
    assert [c.name for c in failure.checks] == ["ci"]
    assert failure.checks[0].summary == "test_bug: assert broken is False"
    assert failure.pr_number == pull["number"]
    assert done == pr_landings.answer(landing.q, landings.require(landing.q, number))
    # The issue stays its holder's, to repair.
    assert issues.get(landing.q, number).claimed_by == AGENT


def test_a_landing_queued_again_with_another_tip_ends_the_task_that_followed_the_old(
    landing: Landing,
) -> None:
    landing.fake.protect_branch("main", required_checks=["ci"])
    number = landing.issue("Twice", "twice.py", "one\n")
    first = follow(landing, number)
    assert landing.land_pass().waiting == 1
    newer = landing.commit(number, "twice.py", "two\n")
    second = follow(landing, number)
    done = answer(poll(landing, first))
    assert done.landing is not None and done.landing.head_sha == newer
    assert done.landing.state == "queued" and not done.merged
    row = store.load(landing.q, first)
    assert row is not None and "queued again with another tip" in (row.status_message or "")
    assert poll(landing, second).status is TaskStatus.WORKING
    assert landing.land_pass().waiting == 1
    landing.fake.add_check_run(newer, "ci", conclusion="success")
    assert landing.land_pass().landed == [number]
    assert answer(poll(landing, second)).merged


def test_the_wait_ends_with_the_landing_as_it_stands(landing: Landing) -> None:
    number = landing.issue("Slow", "slow.py", "slow\n")
    task_id = follow(landing, number)
    row = store.load(landing.q, task_id)
    assert row is not None and row.deadline is not None
    assert row.deadline - row.created_at == timedelta(seconds=landing_task.WAIT_SECONDS)
    past = landing.q.now() - timedelta(seconds=1)
    landing.q.db.write(
        lambda conn: conn.execute(update(tasks).where(tasks.c.id == task_id).values(deadline=past))
    )
    done = answer(poll(landing, task_id))
    assert done.landing is not None and done.landing.state == "queued" and not done.merged
    assert done == pr_landings.answer(landing.q, landings.require(landing.q, number))
    row = store.load(landing.q, task_id)
    assert row is not None and "no longer followed: merge again" in (row.status_message or "")


def test_a_cancel_stops_following_and_the_landing_goes_on(landing: Landing) -> None:
    number = landing.issue("Go on", "on.py", "on\n")
    task_id = follow(landing, number)
    assert lifecycle.cancel(landing.q, task_id, AGENT).status is TaskStatus.CANCELLED
    assert landing.land_pass().landed == [number]
    row = store.load(landing.q, task_id)
    assert row is not None and row.status == "cancelled" and row.result is None
    assert issues.get(landing.q, number).status == Status.DONE


def test_another_caller_cannot_see_or_cancel_it(landing: Landing) -> None:
    from workq.errors import TaskNotFound

    number = landing.issue("Mine", "mine.py", "mine\n")
    task_id = follow(landing, number)
    with pytest.raises(TaskNotFound):
        lifecycle.poll(landing.q, task_id, "run-b")
    with pytest.raises(TaskNotFound):
        lifecycle.cancel(landing.q, task_id, "run-b")
    assert poll(landing, task_id).status is TaskStatus.WORKING


def test_the_waker_completes_it_on_its_timer_without_a_poll(landing: Landing) -> None:
    assert catalog.of("landing") is landing_task.KIND_OF
    assert landing_task.KIND_OF.every_seconds == landing_task.EVERY_SECONDS
    assert not landing_task.KIND_OF.on_change  # no event of the queue says GitHub merged
    number = landing.issue("Timed", "timed.py", "timed\n")
    task_id = follow(landing, number)
    assert landing.land_pass().landed == [number]
    stop = threading.Event()
    loop = threading.Thread(target=waker.run, args=(landing.q, stop), daemon=True)
    loop.start()
    try:
        row: Any = None
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            row = store.load(landing.q, task_id)
            if row is not None and row.status == "completed":
                break
            time.sleep(0.1)
        assert row is not None and row.status == "completed" and row.read_at is None
    finally:
        stop.set()
        loop.join(timeout=10)
    assert answer(poll(landing, task_id)).merged


def test_a_merge_already_landed_or_a_local_one_has_nothing_to_follow(landing: Landing) -> None:
    number = landing.issue("Done", "done.py", "done\n")
    queued = landing.land(number)
    assert landing_task.follows(queued)
    assert landing.land_pass().landed == [number]
    again = merges.merge_issue(landing.q, number, by=Authority.of([AGENT]))
    assert again.already_merged and again.landing is None
    assert not landing_task.follows(again.landing)
    assert not landing_task.follows(landings.require(landing.q, number))


def test_a_merge_whose_gates_run_long_then_follows_the_landing_it_queued(
    landing: Landing, tmp_path: Path
) -> None:
    from tests.services.tasks.gated import WAIT
    from tests.services.tasks.gated import release as release_flag
    from workq.services.coding import gates
    from workq.services.tasks import merge

    # The owner's gate table on the checkout's main: one gate that runs until released.
    release = tmp_path / "release"
    flag = str(release)
    (landing.work / "checks").mkdir()
    (landing.work / "checks" / "wait.py").write_text(WAIT)
    (landing.work / "workq.toml").write_text(
        f'[gates.wait]\ncommand = ["{sys.executable}", "checks/wait.py", "{flag}"]\ntimeout = 60\n'
    )
    git(landing.work, "add", ".")
    git(landing.work, "commit", "-q", "-m", "gates")
    # On GitHub's main too (where a landing's gates are read): fetched into the bare
    # repository, which no pre-receive hook guards.
    git(landing.bare, "fetch", "-q", str(landing.work), "main:main")
    git(landing.work, "fetch", "-q", "origin")
    landing.q.tests_gate = gates.EVIDENCE
    number = landing.issue("Gated landing", "gated.py", "g = 1\n")
    try:
        made = merge.start_if_long(
            landing.q,
            owner=AGENT,
            number=number,
            by=Authority.of([AGENT]),
            actor=AGENT,
            lease_seconds=60,
            strategy=None,
        )
        assert made is not None and made.kind == "merge"
        release_flag(release, "pass")
        deadline = time.monotonic() + 30
        while landings.get(landing.q, number) is None:  # the gates passed: queued
            assert time.monotonic() < deadline
            time.sleep(0.05)
        # The task takes up the landing in a write of its own, after the one that queued
        # it (services/tasks/merge.py, _follow): poll until it has (CI saw it between).
        following = poll(landing, made.id)
        while following.status_message == merge.RUNNING and time.monotonic() < deadline:
            time.sleep(0.05)
            following = poll(landing, made.id)
        assert following.status is TaskStatus.WORKING
        assert following.status_message == f"Landing #{number} queued"
        assert following.poll_interval_ms == landing_task.POLL_MS
        assert landing.land_pass().landed == [number]
        done = answer(poll(landing, made.id))
        assert done.merged and done.commit == git(landing.bare, "rev-parse", "main")
        assert done.landing is not None and done.landing.state == "landed"
    finally:
        release_flag(release, "stop")
