"""The sync worker's lease on the mirror: one worker per mirror, so that one request at a
time goes out to GitHub."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sqlalchemy import Connection, select, update

from workq.db.tables import github_mirror
from workq.domain import leases
from workq.errors import InvalidInput
from workq.services.handle import Queue
from workq.services.queue import processes
from workq.services.sync.mirror_target import mirror


def live(q: Queue, repo: str) -> bool:
    """Whether a worker holds the mirror of GitHub repository ``repo`` now."""
    found = mirror(q)
    return (
        found is not None
        and found.repo.lower() == repo.lower()
        and found.worker is not None
        and leases.live(found.worker_expires_at, q.now())
    )


def take(
    q: Queue,
    repo: str,
    worker: str,
    until: datetime,
    *,
    holder_is_gone: Callable[[str], bool] = processes.gone,
) -> str | None:
    """Hold the mirror for ``worker`` until ``until``. Returns None when held, else the other
    live worker. A lease that expired, or whose holder ``holder_is_gone`` says died, is
    taken over."""

    def work(conn: Connection) -> str | None:
        row = conn.execute(select(github_mirror).where(github_mirror.c.repo == repo)).first()
        if row is None:
            raise InvalidInput(f"this database does not mirror {repo}", field="repo")
        if row.worker != worker and not leases.takeable(
            row.worker, row.worker_expires_at, q.now(), holder_is_gone
        ):
            return str(row.worker)
        conn.execute(
            update(github_mirror)
            .where(github_mirror.c.repo == repo)
            .values(worker=worker, worker_expires_at=until)
        )
        return None

    return q.db.write(work)


def release(q: Queue, repo: str, worker: str) -> None:
    def work(conn: Connection) -> None:
        conn.execute(
            update(github_mirror)
            .where(github_mirror.c.repo == repo, github_mirror.c.worker == worker)
            .values(worker=None, worker_expires_at=None)
        )

    q.db.write(work)
