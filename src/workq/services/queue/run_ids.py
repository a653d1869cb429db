"""One live caller per run id.

Claims belong to run ids. Two servers started with the same run id (contract A's literal
``autopilot_main``, a shared WORKQ_RUN_ID), or two HTTP sessions of one server naming the
same run id, would each complete, release and renew what the other claimed. So a caller
binds each run id it claims under (its *binder*: a server's process name, or that name and
the session's run id): the binding is a lease, renewed with its claims. Another caller is
refused RUN_ID_IN_USE while it lives; it ends when its server exits, lapses when its
server stops renewing it (stopped, killed, its machine asleep), and a binding of a process
of this host that no longer runs is taken at once. The CLI acts once, as the person who
names the run id, and binds nothing.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from sqlalchemy import ColumnElement, Connection, delete, select, update

from workq.db import dialect
from workq.db.tables import run_bindings
from workq.domain import dates, fields, leases
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
        if _free(row.server, row.expires_at, now) and _take(
            conn, run_id, server, now, until, run_bindings.c.server == row.server
        ):
            return until
        raise _in_use(run_id, row.server, row.expires_at)

    return q.db.write(work)


def check(q: Queue, run_id: str, binder: str) -> None:
    """RunIdInUse if another live caller bound ``run_id``; reads only (a call that is then
    refused binds nothing: the binding is made once a claim under it is).

    Raises:
        RunIdInUse: another caller's binding of ``run_id`` is live.
    """
    fields.name(run_id, "run_id", limit=128)
    with q.db.read() as conn:
        row = conn.execute(
            select(run_bindings.c.server, run_bindings.c.expires_at).where(
                run_bindings.c.run_id == run_id
            )
        ).first()
        now = q.now()
    if row is None or row.server == binder:
        return
    if _free(row.server, row.expires_at, now):
        return
    raise _in_use(run_id, row.server, row.expires_at)


def _free(server: str, expires_at: datetime, now: datetime) -> bool:
    """Whether another server's binding may be taken: lapsed, or its process gone."""
    return leases.takeable(server, expires_at, now, processes.gone)


def _in_use(run_id: str, server: str, expires_at: datetime) -> RunIdInUse:
    host, pid = processes.parse(server) or (server, "?")
    return RunIdInUse(
        f"run id {run_id!r} is in use by another live caller (pid {pid} "
        f"on {host}) until at least {dates.stamp(expires_at)}",
        run_id=run_id,
        server=server,
        expires_at=dates.iso(expires_at),
    )


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


def renew(
    q: Queue, server: str, bound: Collection[tuple[str, str]]
) -> dict[tuple[str, str], datetime]:
    """Extend the live bindings ``bound`` ((binder, run id) pairs of ``server``'s callers);
    the ones still held, with their new expiry (a binding that lapsed meanwhile is bound
    again on the next claim, if nobody took it)."""
    if not bound:
        return {}

    def work(conn: Connection) -> dict[tuple[str, str], datetime]:
        now = q.now()
        until = q.lease_until(now)
        mine = (
            _of(server),
            run_bindings.c.run_id.in_(sorted({run_id for _, run_id in bound})),
            run_bindings.c.expires_at > now,
        )
        conn.execute(update(run_bindings).where(*mine).values(expires_at=until))
        held = conn.execute(select(run_bindings.c.server, run_bindings.c.run_id).where(*mine))
        return {(b, r): until for b, r in held if (b, r) in bound}

    return q.db.write(work)


def _of(server: str) -> ColumnElement[bool]:
    """The bindings of ``server`` and of its sessions (``server:run-...``)."""
    return (run_bindings.c.server == server) | run_bindings.c.server.startswith(
        f"{server}:", autoescape=True
    )


def unbind(q: Queue, server: str) -> int:
    """End every binding of ``server`` and its sessions (it is exiting); how many."""
    return int(
        q.db.write(lambda conn: conn.execute(delete(run_bindings).where(_of(server))).rowcount)
    )
