"""Where a serving process runs the work of its tasks that run long (gates, a merge whose
gates run: gates.py): a bounded pool of ``MAX_RUNNING`` threads, started when first
needed. A task waiting for a free thread waits in the pool's queue (no thread of its own);
one whose work runs holds a thread, as the gates do whatever answers them.

A task run here names its runner in its arguments (``runner``: host, process id, and the
process's start time, so that a reused process id is not taken for it). The task's kind
asks ``watch`` whenever it is advanced (the waker's timer, every poll): the runner's own
process keeps the task's ``lastUpdatedAt`` fresh while it runs (``HEARTBEAT_SECONDS``);
any other process fails a working task whose runner is gone, a ``-32603`` saying the run
was interrupted (the caller calls again: the gates that finished are stored as
evidence). Gone: on the same host, no process with that id and start time; on another host
(PostgreSQL shared between machines), no heartbeat for ``STALE_SECONDS``.

A cancel does not stop work that runs: it ends the task (cancelled), and what the work
answers later is dropped (the compare-and-set on the task's status); work that has not
started yet does not start.
"""

from __future__ import annotations

import logging
import os
import queue
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import update

from workq.db.tables import tasks
from workq.errors import WorkqError
from workq.services.handle import Queue
from workq.services.tasks import store
from workq.services.tasks.store import FAILED, WORKING, TaskRecord

log = logging.getLogger("workq.tasks")

MAX_RUNNING = 2
HEARTBEAT_SECONDS = 10.0
STALE_SECONDS = 60.0
INTERRUPTED = (
    "The run was interrupted: the server running it stopped before it finished; call again"
)
INTERNAL_ERROR = -32603

# What a job returns: the task's answer and its status message; None: the task stays
# working, its kind goes on with it (a merge's landing to follow).
Answer = tuple[dict[str, Any], str] | None


def _start_time(pid: int) -> str | None:
    """Process ``pid``'s start time (Linux: /proc), None where it cannot be read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else None


_ME = {
    "host": socket.gethostname(),
    "pid": os.getpid(),
    "started": _start_time(os.getpid()) or f"token:{uuid.uuid4().hex}",
}


def me() -> dict[str, Any]:
    """This process, as a task's ``runner`` names it."""
    if _ME["pid"] != os.getpid():  # a forked worker process (serve --workers N)
        _ME.update(pid=os.getpid(), started=_start_time(os.getpid()) or uuid.uuid4().hex)
    return dict(_ME)


class _Pool:
    """``MAX_RUNNING`` daemon threads reading one queue of jobs (a stopping server does
    not wait for gates: their tasks are reported interrupted by the next process)."""

    def __init__(self) -> None:
        self.jobs: queue.Queue[Callable[[], None]] = queue.Queue()
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []
        self.mine: set[str] = set()
        self.starting = 0  # tasks being made to run here, not yet submitted

    def submit(self, task_id: str, job: Callable[[], None]) -> None:
        with self.lock:
            self.mine.add(task_id)
            self.threads = [t for t in self.threads if t.is_alive()]
            if len(self.threads) < MAX_RUNNING:
                thread = threading.Thread(target=self._loop, name="workq-task-run", daemon=True)
                self.threads.append(thread)
                thread.start()
        self.jobs.put(job)

    def done(self, task_id: str) -> None:
        with self.lock:
            self.mine.discard(task_id)

    def runs(self, task_id: str) -> bool:
        with self.lock:
            return task_id in self.mine

    def may_run(self, task_id: str) -> bool:
        """Whether this process runs ``task_id``, or may be about to (one being made)."""
        with self.lock:
            return task_id in self.mine or self.starting > 0

    def _loop(self) -> None:
        while True:
            job = self.jobs.get()
            try:
                job()
            except Exception:  # a job answers its own failures; never lose a thread
                log.exception("workq: a task's run failed")


_POOL = _Pool()


@contextmanager
def starting() -> Iterator[None]:
    """Around making a task that is then submitted here: until it is, no advance in this
    process takes it for one whose run ended unanswered."""
    with _POOL.lock:
        _POOL.starting += 1
    try:
        yield
    finally:
        with _POOL.lock:
            _POOL.starting -= 1


def start(
    q: Queue,
    *,
    owner: str,
    kind: str,
    arguments: dict[str, Any],
    longest: float,
    waiting: str,
    running: str,
    work: Callable[[TaskRecord], Answer],
) -> TaskRecord:
    """A task of ``owner`` and ``kind`` run here: made naming this process its runner
    (``arguments`` plus ``runner`` and ``longest_seconds``), its ``work`` submitted to the
    pool at once; the task as it stands."""
    with starting():
        task = store.create(
            q,
            owner=owner,
            kind=kind,
            arguments={**arguments, "runner": me(), "longest_seconds": longest},
            wait_seconds=longest,
            status_message=waiting,
        )
        submit(q, task, lambda: work(task), running=running)
    return store.load(q, task.id) or task


def submit(q: Queue, task: TaskRecord, work: Callable[[], Answer], *, running: str) -> None:
    """Run ``work`` for ``task`` (made with ``runner=me()``) in the pool; complete the task
    with what it answers (a job turns the call's refusals into the answer itself)."""

    def job() -> None:
        try:
            _run(q, task, work, running)
        finally:
            _POOL.done(task.id)

    _POOL.submit(task.id, job)


def _run(q: Queue, task: TaskRecord, work: Callable[[], Answer], running: str) -> None:
    found = store.load(q, task.id)
    if found is None or found.status != WORKING:
        return  # cancelled (or gone) while it waited for a thread
    _started(q, found, running)
    try:
        answer = work()
    except WorkqError as exc:  # the database, say: the answer cannot be made
        log.warning("workq: a task's run failed: %s", exc.describe())
        fail(q, task.id, f"Internal error: {exc.describe()}")
        return
    except Exception as exc:
        log.exception("workq: a task's run failed")
        fail(q, task.id, f"Internal error: {type(exc).__name__}")
        return
    if answer is not None:
        store.complete_now(q, task.id, answer[0], message=answer[1])


def _started(q: Queue, task: TaskRecord, running: str) -> None:
    """``task``'s work starts now: say so, and give it its ttl from now (it may have waited
    for a thread): its longest run and the time to read its answer."""
    longest = float(task.args().get("longest_seconds") or 0)
    now = q.now()
    waited = max(0.0, (now - task.created_at).total_seconds())
    ttl = int((waited + longest + store.READ_GRACE_SECONDS) * 1000)
    q.db.write(
        lambda conn: conn.execute(
            update(tasks)
            .where(tasks.c.id == task.id, tasks.c.status == WORKING)
            .values(status_message=running, updated_at=now, ttl_ms=max(ttl, task.ttl_ms or 0))
        )
    )


def fail(q: Queue, task_id: str, message: str, *, as_read: datetime | None = None) -> bool:
    """Working task ``task_id`` failed with a JSON-RPC internal error saying ``message``;
    with ``as_read``, only if it was not updated since (its ``updated_at`` then)."""
    error = {"code": INTERNAL_ERROR, "message": message}
    unchanged = [tasks.c.updated_at == as_read] if as_read is not None else []

    def work(conn: Any) -> bool:
        done = conn.execute(
            update(tasks)
            .where(tasks.c.id == task_id, tasks.c.status == WORKING, *unchanged)
            .values(
                status=FAILED, status_message=message, error=store.dump(error), updated_at=q.now()
            )
        )
        return bool(done.rowcount == 1)

    return q.db.write(work)


def watch(q: Queue, task: TaskRecord) -> None:
    """Keep ``task``'s heartbeat while this process runs it; fail it as interrupted when
    the process that ran it is gone."""
    if task.status != WORKING:
        return
    runner = task.args().get("runner") or {}
    if _POOL.runs(task.id):
        if q.now() - task.updated_at >= timedelta(seconds=HEARTBEAT_SECONDS):
            q.db.write(
                lambda conn: conn.execute(
                    update(tasks)
                    .where(tasks.c.id == task.id, tasks.c.status == WORKING)
                    .values(updated_at=q.now())
                )
            )
        return
    if not _gone(q, task, runner):
        return
    if fail(q, task.id, INTERRUPTED, as_read=task.updated_at):
        log.info("workq: task %s (%s) was interrupted: its runner is gone", task.id, task.kind)


def _gone(q: Queue, task: TaskRecord, runner: dict[str, Any]) -> bool:
    """Whether the process that runs ``task`` is gone."""
    if runner == me():  # this very process: gone unless it runs it (or is making it)
        return not _POOL.may_run(task.id)
    if runner.get("host") == _ME["host"] and isinstance(runner.get("pid"), int):
        return not _alive(runner["pid"], runner.get("started"))
    return q.now() - task.updated_at >= timedelta(seconds=STALE_SECONDS)


def _alive(pid: int, started: Any) -> bool:
    """Whether process ``pid`` of this host, started at ``started``, still runs."""
    now = _start_time(pid)
    if now is not None:
        return bool(now == started)
    if Path("/proc").is_dir():
        return False  # no such process
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's: it exists
    return True
