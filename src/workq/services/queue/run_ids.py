"""One live server per run id.

Claims belong to run ids. Two servers started with the same run id (contract A's literal
``autopilot_main``, a shared WORKQ_RUN_ID) would each complete, release and renew what the
other claimed. So a server binds each run id it acts under before acting: the binding is a
lease, renewed with its claims. Another server is refused RUN_ID_IN_USE while it lives; it
ends when its server exits, lapses when its server stops renewing it (stopped, killed, its
machine asleep), and a binding of a process of this host that no longer runs is taken at
once. The CLI acts once, as the person who names the run id, and binds nothing.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from sqlalchemy import ColumnElement, Connection, delete, select, update

from workq.db import dialect
from workq.db.tables import run_bindings
from workq.domain import fields
from workq.errors import RunIdInUse
from workq.services.handle import Queue
from workq.services.queue import processes


def bind(q: Queue, run_id: str, server: str) -> datetime:
    """Bind ``run_id`` to ``server`` for one lease (or renew its binding); when it lapses.

    Raises:
        RunIdInUse: another server's binding of ``run_id`` is live.
    """
    fields.name(run_id, "run_id", limit=128)

    def work(conn: Connection) -> datetime:
        now = q.now()
        until = q.lease_until(now)
        insert = dialect.insert_for(conn.dialect.name)
        conn.execute(
            insert(run_bindings)
            .values(run_id=run_id, server=server, bound_at=now, expires_at=until)
            .on_conflict_do_nothing(index_elements=["run_id"])
        )
        if _take(conn, run_id, server, now, until, run_bindings.c.server == server):
            return until
        row = conn.execute(
            select(run_bindings.c.server, run_bindings.c.expires_at).where(
                run_bindings.c.run_id == run_id
            )
        ).one()
        free = row.expires_at <= now or processes.gone(row.server)
        if free and _take(conn, run_id, server, now, until, run_bindings.c.server == row.server):
            return until
        host, _, rest = row.server.partition(":")
        raise RunIdInUse(
            f"run id {run_id!r} is in use by another live server (pid {rest.partition(':')[0]} "
            f"on {host}) until at least {row.expires_at.isoformat(timespec='seconds')}",
            run_id=run_id,
            server=row.server,
            expires_at=row.expires_at.isoformat(),
        )

    return q.db.write(work)


def _take(
    conn: Connection,
    run_id: str,
    server: str,
    now: datetime,
    until: datetime,
    condition: ColumnElement[bool],
) -> bool:
    taken = conn.execute(
        update(run_bindings)
        .where(run_bindings.c.run_id == run_id, condition)
        .values(server=server, bound_at=now, expires_at=until)
    ).rowcount
    return bool(taken == 1)


def renew(q: Queue, server: str, run_ids: Collection[str]) -> set[str]:
    """Extend ``server``'s live bindings of ``run_ids``; the ones it still holds (a binding
    that lapsed meanwhile is bound again on the next call, if nobody took it)."""
    if not run_ids:
        return set()

    def work(conn: Connection) -> set[str]:
        now = q.now()
        mine = (
            run_bindings.c.server == server,
            run_bindings.c.run_id.in_(list(run_ids)),
            run_bindings.c.expires_at > now,
        )
        conn.execute(update(run_bindings).where(*mine).values(expires_at=q.lease_until(now)))
        return set(conn.execute(select(run_bindings.c.run_id).where(*mine)).scalars())

    return q.db.write(work)


def unbind(q: Queue, server: str) -> int:
    """End every binding of ``server`` (it is exiting); how many."""
    return int(
        q.db.write(
            lambda conn: (
                conn.execute(delete(run_bindings).where(run_bindings.c.server == server)).rowcount
            )
        )
    )
