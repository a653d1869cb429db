"""A repository's merge lease: merges into one repository run one at a time.

The lease is a row's holder and end (``repositories.merge_holder``, ``merge_expires_at``),
so it holds across processes and machines. Its holder renews it while the merge runs; a
killed merger's lease lapses, and a merger of the same host takes it at once when the
holder's process is gone (recorded as ``merge_lease_taken_over``).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

from sqlalchemy import Connection, select, update

from workq.db.tables import repositories
from workq.domain import leases
from workq.errors import MergeBusy, WorkqError
from workq.services.handle import Queue, record
from workq.services.queue import processes
from workq.services.workspaces.repositories import row as repository_row

DEFAULT_LEASE_SECONDS = 120
DEFAULT_WAIT_SECONDS = 300.0


def take(q: Queue, repo: str, holder: str, seconds: int) -> bool:
    """Take ``repo``'s merge lease: free, lapsed, already ours, or held by a process of this
    host that is gone (a merger killed mid-way: taken at once, recorded as
    ``merge_lease_taken_over``, instead of waiting out its lease)."""

    def work(conn: Connection) -> bool:
        now = q.now()
        current = conn.execute(
            select(repositories.c.merge_holder).where(repositories.c.name == repo)
        ).scalar()
        dead = current is not None and current != holder and processes.gone(current)
        free = (
            repositories.c.merge_holder.is_(None)
            | (repositories.c.merge_expires_at <= now)
            | (repositories.c.merge_holder == holder)
        )
        taken = conn.execute(
            update(repositories)
            .where(
                repositories.c.name == repo,
                (repositories.c.merge_holder == current) if dead else free,
            )
            .values(merge_holder=holder, merge_expires_at=leases.until(now, seconds))
        ).rowcount
        if taken == 1 and dead:
            record(
                q,
                conn,
                kind="merge_lease_taken_over",
                issue_id=None,
                number=None,
                actor=holder,
                now=now,
                before={"repository": repo, "holder": current},
                after={"repository": repo, "holder": holder},
            )
        return bool(taken == 1)

    return q.db.write(work)


def give_back(q: Queue, repo: str, holder: str) -> None:
    q.db.write(
        lambda conn: conn.execute(
            update(repositories)
            .where(repositories.c.name == repo, repositories.c.merge_holder == holder)
            .values(merge_holder=None, merge_expires_at=None)
        )
    )


@contextlib.contextmanager
def merge_lease(
    q: Queue,
    repo: str | None,
    *,
    lease_seconds: int = DEFAULT_LEASE_SECONDS,
    wait_seconds: float = DEFAULT_WAIT_SECONDS,
) -> Iterator[None]:
    """Hold ``repo``'s merge lease (waiting for it up to ``wait_seconds``). A repository
    that is not registered has no lease: its merges rely on the default branch's
    compare-and-swap alone."""
    if repo is None:
        yield
        return
    holder = processes.token()
    deadline = time.monotonic() + wait_seconds
    pause = 0.02
    while not take(q, repo, holder, lease_seconds):
        if time.monotonic() >= deadline:
            raise MergeBusy(f"another merge into {repo!r} holds the merge lease", repo=repo)
        time.sleep(pause)
        pause = min(pause * 1.5, 0.25)
    stop = threading.Event()
    keeper = threading.Thread(
        target=_keep_lease,
        args=(q, repo, holder, lease_seconds, stop),
        name=f"workq-merge-lease-{repo}",
        daemon=True,
    )
    keeper.start()
    try:
        yield
    finally:
        stop.set()
        keeper.join()
        give_back(q, repo, holder)


def _keep_lease(q: Queue, repo: str, holder: str, seconds: int, stop: threading.Event) -> None:
    """Renew the lease every third of its length while the merge runs: its gates and git
    steps may take longer than the lease, which lapses only once its holder stops renewing
    it (killed: then a merger of this host takes it at once, see ``take``)."""

    def renew(conn: Connection) -> int:
        return conn.execute(
            update(repositories)
            .where(repositories.c.name == repo, repositories.c.merge_holder == holder)
            .values(merge_expires_at=leases.until(q.now(), seconds))
        ).rowcount

    while not stop.wait(leases.renewal_period(seconds)):
        try:
            if not q.db.write(renew):
                return  # taken over; the default branch's compare-and-swap guards the rest
        except WorkqError:
            continue  # a busy or lost database: the next turn tries again


def holder_of(q: Queue, repo: str) -> tuple[str | None, Any]:
    with q.db.read() as conn:
        r = repository_row(conn, repo)
        return r.merge_holder, r.merge_expires_at
