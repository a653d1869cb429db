"""Gates and merges whose gates run longer than a moment, as tasks, through the services: on
real repositories with a real gate process that runs until the test releases it. The task
completes with the synchronous call's answer; at most ``runner.MAX_RUNNING`` run at once
(the others wait, no thread each); a refusal is the answer, worded as the call words it; a
task whose runner is gone fails with -32603 (interrupted); a cancel before the work starts
runs nothing, and a merge cancelled while its gates run does not land."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from tests.services.tasks.gated import Gated
from tests.services.workspaces.gitrepo import commit
from workq.db.tables import tasks
from workq.domain.authority import Authority
from workq.errors import NotHolder
from workq.schemas import GateReport, MergeResult, Status, TaskStatus, TaskView
from workq.services.coding import gates
from workq.services.handle import Queue
from workq.services.queue import claims, issues
from workq.services.tasks import catalog, lifecycle, merge, runner, store
from workq.services.tasks import gates as gate_task
from workq.services.workspaces import claiming, repositories
from workq.vcs import git

AGENT = Authority.of({"agent-a"})
OWNER = "agent-a"
LIMIT = 30.0


@pytest.fixture
def gated(tmp_path: Path) -> Iterator[Gated]:
    found = Gated(tmp_path)
    yield found
    found.release("stop")  # no gate of this test keeps a runner's thread


def issue(q: Queue) -> int:
    number = issues.create(q, title="gated work").number
    claims.claim(q, number, AGENT)
    return number


def start(q: Queue, gated: Gated, number: int, by: Authority = AGENT) -> TaskView | None:
    task = gate_task.start_if_long(
        q,
        owner=OWNER,
        number=number,
        checkout=gated.repo,
        by=by,
        files=[],
        include_tests=True,
        gates=None,
        actor="agent-a",
        said={"prefix": f"Could not run the quality gates of issue #{number}", "verdict": None},
    )
    return task.view() if task is not None else None


def until(check: Callable[[], Any], timeout: float = LIMIT) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def settled(q: Queue, task_id: str) -> TaskView:
    def poll() -> TaskView | None:
        seen = lifecycle.poll(q, task_id, OWNER)
        return seen if seen.status is not TaskStatus.WORKING else None

    found: TaskView = until(poll)
    return found


def message(q: Queue, task_id: str) -> str | None:
    row = store.load(q, task_id)
    assert row is not None
    return row.status_message


def test_gates_that_run_long_are_a_task_completed_with_the_calls_answer(
    queue: Queue, gated: Gated
) -> None:
    assert catalog.of("gates") is gate_task.KIND_OF
    number = issue(queue)
    made = start(queue, gated, number)
    assert made is not None and made.status is TaskStatus.WORKING
    assert made.ttl_ms == (60 + store.READ_GRACE_SECONDS) * 1000  # its longest run, and more
    until(lambda: message(queue, made.id) == gate_task.RUNNING)
    assert lifecycle.poll(queue, made.id, OWNER).status is TaskStatus.WORKING
    gated.release()
    done = settled(queue, made.id)
    assert done.status is TaskStatus.COMPLETED and done.answer is not None
    value = done.answer["value"]
    report = GateReport.model_validate(value["report"])
    assert report.overall_pass and [g.name for g in report.gates] == ["wait"]
    assert value["prefix"] == f"Could not run the quality gates of issue #{number}"
    # The synchronous call's answer, asked now: the same report.
    assert gates.run(queue, number, gated.repo, by=AGENT, actor="agent-a") == report
    assert message(queue, made.id) == f"Gates passed on {report.commit[:12]}"
    # Stored as evidence, as the synchronous call stores it.
    assert [r.gate for r in gates.evidence(queue, number)] == ["wait", "wait"]


def test_gates_that_take_a_moment_run_in_the_call(queue: Queue, gated: Gated) -> None:
    number = issue(queue)
    gated.release()
    gates.run(queue, number, gated.repo, by=AGENT)  # a quick run, recorded
    assert start(queue, gated, number) is None


def test_no_more_than_max_running_run_at_once(queue: Queue, gated: Gated) -> None:
    assert runner.MAX_RUNNING == 2
    made = [start(queue, gated, issue(queue)) for _ in range(3)]
    ids = [m.id for m in made if m is not None]
    assert len(ids) == 3

    def running() -> list[str]:
        return [i for i in ids if message(queue, i) == gate_task.RUNNING]

    until(lambda: len(running()) == 2)
    time.sleep(0.5)
    assert len(running()) == 2  # the third waits for a thread
    (waiting,) = [i for i in ids if i not in running()]
    assert message(queue, waiting) == gate_task.WAITING
    gated.release()
    for task_id in ids:
        assert settled(queue, task_id).status is TaskStatus.COMPLETED


def test_a_refusal_is_the_answer_worded_as_the_call_words_it(queue: Queue, gated: Gated) -> None:
    number = issue(queue)
    made = start(queue, gated, number, by=Authority.of({"agent-b"}))  # not its holder
    assert made is not None
    done = settled(queue, made.id)
    assert done.status is TaskStatus.COMPLETED and done.answer is not None
    refused = done.answer["value"]
    assert refused["refused"]["code"] == NotHolder.code
    assert refused["prefix"] == f"Could not run the quality gates of issue #{number}"
    assert gates.evidence(queue, number) == []


def _dead_pid() -> int:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    return gone.pid


def _runner_of(q: Queue, task_id: str, who: dict[str, Any], *, ago: float = 0) -> None:
    row = store.load(q, task_id)
    assert row is not None
    args = {**row.args(), "runner": who}
    q.db.write(
        lambda conn: conn.execute(
            update(tasks)
            .where(tasks.c.id == task_id)
            .values(arguments=store.dump(args), updated_at=q.now() - timedelta(seconds=ago))
        )
    )


def test_a_task_whose_runner_is_gone_fails_as_interrupted(queue: Queue, gated: Gated) -> None:
    made = start(queue, gated, issue(queue))
    assert made is not None
    until(lambda: message(queue, made.id) == gate_task.RUNNING)
    # Running here: polled, it stays working (and keeps its heartbeat).
    _runner_of(queue, made.id, runner.me(), ago=runner.STALE_SECONDS + 1)
    assert lifecycle.poll(queue, made.id, OWNER).status is TaskStatus.WORKING
    row = store.load(queue, made.id)
    assert row is not None and queue.now() - row.updated_at < timedelta(seconds=5)
    # A task run by a process of this host that is gone (a server killed while its gates
    # ran), and one this process made but no longer runs: both interrupted.
    dead = {**runner.me(), "pid": _dead_pid()}
    for who in (dead, runner.me()):
        lost = store.create(
            queue, owner=OWNER, kind=gate_task.KIND, arguments={"runner": who}, wait_seconds=60
        )
        failed = lifecycle.poll(queue, lost.id, OWNER)
        assert failed.status is TaskStatus.FAILED
        assert failed.error == {"code": -32603, "message": runner.INTERRUPTED}
        assert failed.status_message == runner.INTERRUPTED
    gated.release()
    assert settled(queue, made.id).status is TaskStatus.COMPLETED


def test_a_runner_on_another_host_is_gone_once_its_heartbeat_is_stale(
    queue: Queue, gated: Gated
) -> None:
    gated.release()
    elsewhere = {"host": "elsewhere.invalid", "pid": 1, "started": "1"}
    fresh = store.create(
        queue, owner=OWNER, kind=gate_task.KIND, arguments={"runner": elsewhere}, wait_seconds=60
    )
    assert lifecycle.poll(queue, fresh.id, OWNER).status is TaskStatus.WORKING
    _runner_of(queue, fresh.id, elsewhere, ago=runner.STALE_SECONDS + 1)
    assert lifecycle.poll(queue, fresh.id, OWNER).status is TaskStatus.FAILED


def test_a_cancel_before_the_run_starts_runs_nothing(queue: Queue, gated: Gated) -> None:
    first, second = issue(queue), issue(queue)
    busy = [start(queue, gated, first), start(queue, gated, first)]  # both threads busy
    assert all(b is not None for b in busy)
    waiting = start(queue, gated, second)
    assert waiting is not None
    until(lambda: all(message(queue, b.id) == gate_task.RUNNING for b in busy if b))
    assert lifecycle.cancel(queue, waiting.id, OWNER).status is TaskStatus.CANCELLED
    gated.release()
    for b in busy:
        assert b is not None and settled(queue, b.id).status is TaskStatus.COMPLETED
    time.sleep(0.5)
    assert gates.evidence(queue, second) == []  # never ran
    assert lifecycle.poll(queue, waiting.id, OWNER).status is TaskStatus.CANCELLED


# --- a merge whose gates run long -------------------------------------------------------


def spawned(q: Queue) -> tuple[int, Path]:
    number = issues.create(q, title="merge me").number
    repositories.assign(q, number, "app", by=AGENT)
    taken = claiming.claim(q, number, AGENT, worktree=True)
    assert taken.worktree is not None
    path = Path(taken.worktree.path)
    commit(path, {"src/feature.py": "y = 1\n"}, "feature")
    return number, path


def start_merge(q: Queue, number: int) -> TaskView | None:
    task = merge.start_if_long(
        q, owner=OWNER, number=number, by=AGENT, actor="agent-a", lease_seconds=60, strategy=None
    )
    return task.view() if task is not None else None


def test_a_merge_whose_gates_run_long_is_a_task_completed_with_the_merge(
    queue: Queue, gated: Gated
) -> None:
    queue.tests_gate = gates.EVIDENCE
    repositories.add(queue, "app", gated.repo)
    number, path = spawned(queue)
    made = start_merge(queue, number)
    assert made is not None and made.kind == "merge"
    until(lambda: message(queue, made.id) == merge.RUNNING)
    assert git.head(gated.repo) != git.head(path)
    gated.release()
    done = settled(queue, made.id)
    assert done.status is TaskStatus.COMPLETED and done.answer is not None
    merged = MergeResult.model_validate(done.answer["value"])
    assert merged.merged and merged.commit == git.head(gated.repo) and merged.number == number
    assert issues.get(queue, number).status == Status.DONE
    assert message(queue, made.id) == f"Merged issue #{number} at {merged.commit[:12]}"


def test_a_merge_with_its_gates_passed_already_runs_in_the_call(queue: Queue, gated: Gated) -> None:
    queue.tests_gate = gates.EVIDENCE
    repositories.add(queue, "app", gated.repo)
    number, path = spawned(queue)
    gated.release()
    gates.run(queue, number, path, by=AGENT)  # evidence for the tip
    assert start_merge(queue, number) is None
    queue.tests_gate = gates.TRUST
    assert start_merge(queue, number) is None


def test_a_merge_cancelled_while_its_gates_run_does_not_land(queue: Queue, gated: Gated) -> None:
    queue.tests_gate = gates.EVIDENCE
    repositories.add(queue, "app", gated.repo)
    number, path = spawned(queue)
    before = git.head(gated.repo)
    made = start_merge(queue, number)
    assert made is not None
    until(lambda: message(queue, made.id) == merge.RUNNING)
    assert lifecycle.cancel(queue, made.id, OWNER).status is TaskStatus.CANCELLED
    gated.release()
    until(lambda: len(gates.evidence(queue, number)) == 1)  # its gates finished, stored
    time.sleep(0.5)
    assert git.head(gated.repo) == before and path.is_dir()
    assert issues.get(queue, number).status == Status.IN_PROGRESS
    assert lifecycle.poll(queue, made.id, OWNER).status is TaskStatus.CANCELLED
