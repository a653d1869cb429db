"""``issue_merge`` as a task, when the gates the merge must run (those without a passing
run on the branch tip: coding/gate_estimates.py) run longer than a moment.

The merge itself runs in this process's bounded pool (runner.py), on the caller's
authority, exactly as the synchronous call runs it (``merges.merge_issue``); the task
completes with that call's answer (merged at a commit, or the refusal: failing gates,
conflicts). In a repository that lands through pull requests the merge queues the
landing, and the task then follows it as landing.py does, completing when it landed or was
refused. A cancel before the default branch moves (or the landing is queued) stops the
merge there (the gates that ran are stored as evidence); after, the merge stands and the
task stays cancelled. A server stopped while the merge runs leaves a task the next process
reports ``failed`` (-32603, interrupted): merged or not, ``issue_merge`` called again
finishes or reports it (merges never land twice).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import update

from workq.db.tables import tasks
from workq.domain.authority import Authority
from workq.errors import Conflict, Spelling, StorageError, WorkqError, tool_call
from workq.schemas import LandingStatus, MergeResult
from workq.services.coding import gate_estimates
from workq.services.handle import Queue
from workq.services.tasks import kinds, landing, runner, store
from workq.services.tasks.gates import authority, kept, revived
from workq.services.tasks.store import CANCELLED, WORKING, TaskRecord
from workq.services.workspaces import merges
from workq.services.workspaces.repositories import row as repository_row
from workq.services.workspaces.worktrees import by_id, latest_for_issue
from workq.vcs import git

KIND = "merge"
WAITING = "Waiting for a free runner"
RUNNING = "Merging: running the quality gates"


def start_if_long(
    q: Queue,
    *,
    owner: str,
    number: int,
    by: Authority,
    actor: str | None,
    lease_seconds: int,
    strategy: str | None,
    spell: Spelling = tool_call,
) -> TaskRecord | None:
    """A task of ``owner`` merging issue ``number`` (as ``merges.merge_issue`` with these
    arguments) when the gates its merge must run take longer than a moment; None when
    they do not, or when nothing is to run (the caller merges in its call: it is refused
    or done at once)."""
    specs = _gates_to_run(q, number)
    if not gate_estimates.longer_than_a_moment(q, number, specs):
        return None
    return runner.start(
        q,
        owner=owner,
        kind=KIND,
        arguments={
            "number": number,
            "by": authority(by),
            "actor": actor,
            "lease_seconds": lease_seconds,
            "strategy": strategy,
        },
        longest=gate_estimates.longest_seconds(specs),
        waiting=WAITING,
        running=RUNNING,
        work=lambda task: run(q, task, spell),
    )


def _gates_to_run(q: Queue, number: int) -> list[Any]:
    """The gates a merge of issue ``number``'s active worktree would run now."""
    info = latest_for_issue(q, number)
    if info is None:
        return []
    with q.db.read() as conn:
        r = repository_row(conn, info.repository)
        w = by_id(conn, info.worktree_id, info.repository)
    checkout = Path(w.path)
    if w.state != "active" or w.number is None or not checkout.is_dir():
        return []
    tip = git.branch_tip(Path(r.path), w.branch)
    if tip is None:
        return []
    return gate_estimates.to_run_for_merge(q, number, checkout, tip)


def run(q: Queue, task: TaskRecord, spell: Spelling = tool_call) -> runner.Answer:
    """The merge of ``task``, run now: its answer, or None when it queued a landing the
    task now follows."""
    args = task.args()
    number = int(args["number"])

    def proceed() -> None:
        found = store.load(q, task.id)
        if found is None or found.status == CANCELLED:
            raise Conflict(f"the merge of issue #{number} was cancelled", number=number)

    try:
        done = merges.merge_issue(
            q,
            number,
            by=revived(args["by"]),
            actor=args.get("actor"),
            lease_seconds=int(args["lease_seconds"]),
            strategy=args.get("strategy"),
            proceed=proceed,
        )
    except StorageError:
        raise
    except WorkqError as exc:
        return landing.refusal(exc, number, kept(exc, spell)), f"Refused: {exc.code}"
    if done.landing is not None and landing.follows(done.landing):
        _follow(q, task, done.landing)
        return None
    return {"value": done.model_dump(mode="json")}, _said(done)


def _said(done: MergeResult) -> str:
    if done.landing is not None:
        return landing.said(done.landing)
    return f"Merged issue #{done.number} at {(done.commit or '')[:12]}"


def _follow(q: Queue, task: TaskRecord, queued: LandingStatus) -> None:
    """From now on ``task`` follows the landing its merge queued, for as long as a
    landing task would (landing.WAIT_SECONDS)."""
    args = {**task.args(), "landing": {"number": queued.number, "head_sha": queued.head_sha}}
    now = q.now()
    waited = (now - task.created_at).total_seconds()
    ttl = int((waited + landing.WAIT_SECONDS + store.READ_GRACE_SECONDS) * 1000)
    deadline = now + timedelta(seconds=landing.WAIT_SECONDS)
    q.db.write(
        lambda conn: conn.execute(
            update(tasks)
            .where(tasks.c.id == task.id, tasks.c.status == WORKING)
            .values(
                arguments=store.dump(args),
                status_message=landing.said(queued),
                updated_at=now,
                deadline=deadline,
                ttl_ms=ttl,
                poll_interval_ms=landing.POLL_MS,
            )
        )
    )


def advance(q: Queue, task: TaskRecord) -> None:
    """Follow the landing the merge queued; else watch the merge's run."""
    queued = task.args().get("landing")
    if queued:
        landing.follow(q, task, int(queued["number"]), str(queued["head_sha"]))
    else:
        runner.watch(q, task)


KIND_OF = kinds.Kind(KIND, advance=advance, on_change=False, every_seconds=landing.EVERY_SECONDS)
