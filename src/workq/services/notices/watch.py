"""The watch: what no call reports, found by looking. Every serving process sweeps now and
then (``sweep``); each finding is an audit event recorded once, under a lock on the issue's
row (or, for the queue's own events, on a counter row), so that several processes sweeping
one database record it once:

- a commit on a claimed issue's branch (``committed``): progress the agent made in git;
- a live claim with no progress for ``stall_after`` (``stalled``), and, under
  ``stall_policy = release``, its release ``stall_release_after`` later (``stall_released``,
  its work saved: workspaces/handoff.py);
- a lapsed lease (``lease_lapsed``), its work saved the same way;
- a drained queue: nothing ready, nothing claimed, after work was done (``queue_drained``).

The events raise the notices people asked for (outbox.py).
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, func, select, update

from workq.db import dialect
from workq.db.tables import counters, events, issues, repositories, worktrees
from workq.domain import dates
from workq.domain.authority import Authority
from workq.errors import WorkqError
from workq.schemas import Status
from workq.services.handle import Queue, load, record
from workq.services.queue import claims, policies, progress, ready_queue
from workq.services.workspaces import handoff
from workq.vcs import git

log = logging.getLogger("workq.watch")

WATCH = "workq watch"  # who the watch's events name
_IN_PROGRESS = Status.IN_PROGRESS.value
_LOCK = "watch"  # the counters row whose lock serialises the queue's own findings


@dataclass
class Findings:
    committed: list[int] = field(default_factory=list)
    stalled: list[int] = field(default_factory=list)
    released: list[int] = field(default_factory=list)
    lapsed: list[int] = field(default_factory=list)
    drained: bool = False


def sweep(q: Queue) -> Findings:
    """Look once; what was found and recorded now (each thing is recorded once)."""
    found = Findings()
    found.committed = commits(q)
    found.stalled, found.released = stalls(q)
    found.lapsed = lapses(q)
    found.drained = drained(q)
    return found


def _last(conn: Connection, number: int, kinds: tuple[str, ...]) -> Any:
    return conn.execute(
        select(events.c.created_at, events.c.after)
        .where(events.c.number == number, events.c.kind.in_(kinds))
        .order_by(events.c.id.desc())
        .limit(1)
    ).first()


# Commits ---------------------------------------------------------------------------------


def commits(q: Queue) -> list[int]:
    """Record a ``committed`` event for each live claim whose worktree branch has a tip not
    seen before (git is asked outside any transaction)."""
    now = q.now()
    with q.db.read() as conn:
        rows = conn.execute(
            select(
                worktrees.c.number,
                worktrees.c.branch,
                worktrees.c.base_commit,
                repositories.c.path,
                issues.c.claimed_by,
                issues.c.fence,
            )
            .join(repositories, repositories.c.name == worktrees.c.repository)
            .join(issues, issues.c.id == worktrees.c.issue_id)
            .where(
                worktrees.c.state == "active",
                issues.c.status == _IN_PROGRESS,
                issues.c.lease_expires_at > now,
            )
        ).all()
        seen = {r.number: _seen_tip(conn, r.number, r.base_commit) for r in rows}
    moved = []
    for r in rows:
        tip = _tip(Path(r.path), r.branch)
        if tip is None or tip == seen[r.number]:
            continue
        if q.db.write(partial(_record_commit, q, r=r, tip=tip)):
            moved.append(r.number)
    return moved


def _seen_tip(conn: Connection, number: int, base: str) -> str:
    last = _last(conn, number, ("committed",))
    return str(json.loads(last.after or "{}").get("tip") or base) if last else base


def _tip(root: Path, branch: str) -> str | None:
    try:
        return git.branch_tip(root, branch)
    except WorkqError as exc:  # a repository moved or broken: nothing seen, said once a sweep
        log.warning("workq watch: cannot read %s in %s: %s", branch, root, exc.describe())
        return None


def _record_commit(q: Queue, conn: Connection, *, r: Any, tip: str) -> bool:
    row = load(conn, r.number, for_update=True)
    if row.fence != r.fence or _seen_tip(conn, r.number, r.base_commit) == tip:
        return False
    record(
        q,
        conn,
        kind="committed",
        issue_id=row.id,
        number=r.number,
        actor=r.claimed_by,
        now=q.now(),
        after={"branch": r.branch, "tip": tip},
    )
    return True


# Stalls ----------------------------------------------------------------------------------


def stalls(q: Queue) -> tuple[list[int], list[int]]:
    """Record ``stalled`` for each live claim newly stalled; under ``stall_policy =
    release``, release those stalled for ``stall_release_after`` with their work saved.
    The numbers told, and those released."""
    now = q.now()
    with q.db.read() as conn:
        found = [p for p in progress.of_claims(conn, now) if p.stalled(now)]
        plans = {p.number: _policy(conn, p.repository) for p in found}
    told, released = [], []
    for p in found:
        if q.db.write(partial(_tell, q, p=p)):
            told.append(p.number)
        policy, grace = plans[p.number]
        since = p.stalled_since
        due = since is not None and now >= since + timedelta(seconds=grace)
        if policy == "release" and due and _release(q, p):
            released.append(p.number)
    return told, released


def _policy(conn: Connection, repository: str | None) -> tuple[str, int]:
    return (
        policies.value(conn, "stall_policy", repository),
        policies.seconds(conn, "stall_release_after", repository),
    )


def _tell(q: Queue, conn: Connection, *, p: progress.Progress) -> bool:
    """Record the stall of ``p``'s claim unless it was recorded (or it moved on) since."""
    row = load(conn, p.number, for_update=True)
    now = q.now()
    again = progress.of_issue(conn, p.number, now)
    if row.fence != p.fence or again is None or not again.stalled(now):
        return False
    last = _last(conn, p.number, ("stalled",))
    if last is not None and progress.when(last.created_at) > again.progress_at:
        return False
    record(
        q,
        conn,
        kind="stalled",
        issue_id=row.id,
        number=p.number,
        actor=WATCH,
        now=now,
        after={
            "holder": p.holder,
            "since": dates.iso(again.progress_at),
            "for_seconds": int((now - again.progress_at).total_seconds()),
            "stall_after": again.stall_after,
        },
    )
    return True


def _release(q: Queue, p: progress.Progress) -> bool:
    """Release ``p``'s claim (that very claim: its fence), its work saved first."""
    reason = f"stalled: no progress since {dates.stamp(p.progress_at)}"
    by = Authority.overriding(reason, who=WATCH, fence=p.fence)
    _save(q, p.number, "stall_released", p.holder)
    try:
        released = claims.release(q, p.number, by, reason=reason, actor=WATCH)
    except WorkqError as exc:  # it moved on meanwhile (progress, a completion, a new claim)
        log.info("workq watch: #%d not released: %s", p.number, exc.describe())
        return False

    def tell(conn: Connection) -> None:
        record(
            q,
            conn,
            kind="stall_released",
            issue_id=released.id,
            number=p.number,
            actor=WATCH,
            now=q.now(),
            before={"claimed_by": p.holder},
            after={"holder": p.holder, "since": dates.iso(p.progress_at), "reason": reason},
        )

    q.db.write(tell)
    return True


def _save(q: Queue, number: int, how: str, holder: str) -> None:
    try:
        handoff.save(q, number, how=how, holder=holder, actor=WATCH)
    except WorkqError as exc:  # the release goes on: its worktree and branch stay as they are
        log.warning("workq watch: could not save #%d's work: %s", number, exc.describe())


# Lapsed leases ---------------------------------------------------------------------------


def lapses(q: Queue) -> list[int]:
    """Record ``lease_lapsed`` for each claim whose lease ran out (once per claim) and save
    its work."""
    now = q.now()
    with q.db.read() as conn:
        rows = conn.execute(
            select(issues.c.number, issues.c.claimed_by, issues.c.fence, issues.c.claimed_at)
            .where(
                issues.c.status == _IN_PROGRESS,
                issues.c.claimed_by.is_not(None),
                issues.c.lease_expires_at <= now,
            )
            .order_by(issues.c.number)
        ).all()
    lapsed = []
    for r in rows:
        if q.db.write(partial(_record_lapse, q, r=r)):
            lapsed.append(r.number)
            _save(q, r.number, "lapsed", r.claimed_by)
    return lapsed


def _record_lapse(q: Queue, conn: Connection, *, r: Any) -> bool:
    row = load(conn, r.number, for_update=True)
    now = q.now()
    ended = row.lease_expires_at
    if row.fence != r.fence or row.claimed_by is None or ended is None or ended > now:
        return False
    last = _last(conn, r.number, ("lease_lapsed",))
    if last is not None and json.loads(last.after or "{}").get("fence") == r.fence:
        return False
    record(
        q,
        conn,
        kind="lease_lapsed",
        issue_id=row.id,
        number=r.number,
        actor=WATCH,
        now=now,
        before={"claimed_by": r.claimed_by},
        after={
            "holder": r.claimed_by,
            "fence": r.fence,
            "since": dates.iso(ended),
            "claimed_at": dates.iso(r.claimed_at),
        },
    )
    return True


# A drained queue -------------------------------------------------------------------------


def drained(q: Queue) -> bool:
    """Record ``queue_drained`` when nothing is ready and nothing claimed, and an issue was
    completed since the queue last drained (an empty new queue has drained nothing)."""
    if ready_queue.any_ready(q):
        return False
    return bool(q.db.write(lambda conn: _record_drained(q, conn)))


def _record_drained(q: Queue, conn: Connection) -> bool:
    _lock(q, conn)
    claimed = conn.execute(
        select(issues.c.number).where(issues.c.status == _IN_PROGRESS).limit(1)
    ).first()
    if claimed is not None:
        return False
    last_drained = conn.execute(
        select(func.max(events.c.id)).where(events.c.kind == "queue_drained")
    ).scalar()
    completed = conn.execute(
        select(func.max(events.c.id)).where(events.c.kind == "completed")
    ).scalar()
    if completed is None or (last_drained is not None and last_drained > completed):
        return False
    if not _nothing_ready(conn, q.now()):
        return False
    done = conn.execute(
        select(func.count()).select_from(issues).where(issues.c.status == Status.DONE.value)
    ).scalar_one()
    record(
        q,
        conn,
        kind="queue_drained",
        issue_id=None,
        number=None,
        actor=WATCH,
        now=q.now(),
        after={"done": done},
    )
    return True


def _nothing_ready(conn: Connection, now: datetime) -> bool:
    return not ready_queue.ready_rows(conn, None, 1, now)


def _lock(q: Queue, conn: Connection) -> None:
    """Hold the watch's counter row for the rest of the transaction (PostgreSQL: a row
    lock; SQLite: the write lock this transaction already holds)."""
    stmt = dialect.insert_for(q.db.dialect)(counters).values(name=_LOCK, value=0)
    conn.execute(stmt.on_conflict_do_nothing(index_elements=[counters.c.name]))
    conn.execute(
        update(counters).where(counters.c.name == _LOCK).values(value=counters.c.value + 1)
    )


def run(q: Queue, stop: threading.Event, every: float) -> None:
    """Sweep every ``every`` seconds until ``stop`` is set. A failed sweep (a busy or lost
    database) is logged and tried again at the next; it never ends the loop."""
    while not stop.wait(every):
        try:
            found = sweep(q)
        except WorkqError as exc:
            log.warning("workq watch: sweep failed (will retry): %s", exc.describe())
        except Exception:  # a bug must not end the watch of a long-running server
            log.exception("workq watch: sweep failed")
        else:
            log.debug("workq watch: %s", found)
