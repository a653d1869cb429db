"""Registered agents: an id from a name and a type, heartbeats, and who holds what, where.
An agent id is a valid run id: claims made with it are the agent's."""

from __future__ import annotations

import uuid

from sqlalchemy import Connection, insert, select, update

from workq.db import dialect
from workq.db.engine import retry_lost_read
from workq.db.tables import agents, issues
from workq.domain import fields
from workq.errors import InvalidInput, NotFound
from workq.schemas import AgentInfo, Status
from workq.services.handle import Queue
from workq.services.queue import claims, overview, progress

TYPE_MAX = 32


def register(q: Queue, name: str, agent_type: str) -> AgentInfo:
    """The agent called ``name`` of ``agent_type``: the id it was registered under before
    (a restarted agent goes on acting on its own claims), or a new one; seen now."""
    fields.name(name, "name", limit=128)
    fields.name(agent_type, "type", limit=TYPE_MAX)

    def work(conn: Connection) -> AgentInfo:
        dialect.lock_agents(conn)
        now = q.now()
        known = conn.execute(
            select(agents.c.id)
            .where(agents.c.name == name, agents.c.agent_type == agent_type)
            .order_by(agents.c.created_at, agents.c.id)
            .limit(1)
        ).scalar()
        if known is not None:
            conn.execute(update(agents).where(agents.c.id == known).values(last_seen_at=now))
            return AgentInfo(agent_id=known, name=name, type=agent_type, last_seen=now)
        agent_id = f"agent-{uuid.uuid4().hex[:12]}"
        conn.execute(
            insert(agents).values(
                id=agent_id, name=name, agent_type=agent_type, created_at=now, last_seen_at=now
            )
        )
        return AgentInfo(agent_id=agent_id, name=name, type=agent_type, last_seen=now)

    return q.db.write(work)


def _check_id(agent_id: str) -> str:
    if not isinstance(agent_id, str) or not agent_id or len(agent_id) > 64:
        raise InvalidInput("agent_id must be 1-64 characters", field="agent_id")
    return agent_id


def exists(q: Queue, agent_id: str) -> bool:
    with q.db.read() as conn:
        return conn.execute(select(agents.c.id).where(agents.c.id == agent_id)).first() is not None


def heartbeat(q: Queue, agent_id: str) -> int:
    """Mark the agent seen now and renew the leases of what it holds; how many."""
    _check_id(agent_id)

    def work(conn: Connection) -> int:
        seen = conn.execute(
            update(agents).where(agents.c.id == agent_id).values(last_seen_at=q.now())
        ).rowcount
        if seen != 1:
            raise NotFound(
                f"agent {agent_id!r} is not registered",
                hint="register it with agit_register_agent",
            )
        return 0

    q.db.write(work)
    return claims.renew_leases(q, [agent_id])


@retry_lost_read
def list_agents(q: Queue) -> list[AgentInfo]:
    now = q.now()
    with q.db.read() as conn:
        stalled = {p.number for p in progress.of_claims(conn, now) if p.stalled(now)}
        rows = conn.execute(select(agents).order_by(agents.c.last_seen_at.desc())).all()
        ids = [r.id for r in rows]
        held: dict[str, list[int]] = {}
        if ids:
            for r in conn.execute(
                select(issues.c.claimed_by, issues.c.number)
                .where(issues.c.claimed_by.in_(ids), issues.c.status == Status.IN_PROGRESS.value)
                .order_by(issues.c.number)
            ):
                held.setdefault(r.claimed_by, []).append(r.number)
    return [
        AgentInfo(
            agent_id=r.id,
            name=r.name,
            type=r.agent_type,
            last_seen=r.last_seen_at,
            claims=held.get(r.id, []),
            stalled=[n for n in held.get(r.id, []) if n in stalled],
        )
        for r in rows
    ]


def roster(q: Queue) -> list[AgentInfo]:
    """Who works on the queue: the registered agents, then the run ids that hold live
    claims without registering (shown with type ``run id``, last seen at their newest
    lease renewal, as the board shows them)."""
    registered = list_agents(q)
    known = {a.agent_id for a in registered}
    plain = [b for b in overview.agents(q) if b.run_id not in known and b.claims]
    return registered + [
        AgentInfo(
            agent_id=b.run_id,
            name=b.run_id,
            type="run id",
            last_seen=b.last_heartbeat or q.now(),
            claims=[c.number for c in b.claims],
            stalled=[c.number for c in b.claims if c.stalled_since is not None],
        )
        for b in plain
    ]
