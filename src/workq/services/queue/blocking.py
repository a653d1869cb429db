"""Blocking an issue (it leaves the queue with a reason, its claim dropped) and unblocking
it. Who may: domain/decisions.py (``block``: anyone, unless another caller's claim is live)."""

from __future__ import annotations

from sqlalchemy import Connection, update

from workq.db.tables import issues
from workq.domain import fields, readiness
from workq.domain.authority import Authority
from workq.domain.decisions import Action
from workq.schemas import Issue
from workq.services.handle import Queue, claim_ended, load, record, to_issue
from workq.services.queue import claims, door


def block(
    q: Queue,
    number: int,
    reason: str,
    *,
    by: Authority,
    actor: str | None = None,
) -> Issue:
    """Record why, release any claim, keep it out of ready until unblocked. Anyone may
    block an issue nobody holds a live claim on; a live claim only its holder, or an
    override (the event then records who and why). With ``by``'s fence, a claim other than
    that one is refused (StaleClaim)."""
    fields.number(number)
    fields.fence(by.fence)
    why = fields.reason(reason)

    held: list[str | None] = []

    def work(conn: Connection) -> Issue:
        held[:] = [block_in(q, conn, number, why, by=by, actor=actor)]
        return to_issue(load(conn, number))

    blocked = q.db.write(work)
    if held and held[0] is not None:  # a claim (live or lapsed) ended with it
        claim_ended(q, number, "blocked", held[0])
    return blocked


def block_in(
    q: Queue, conn: Connection, number: int, why: str, *, by: Authority, actor: str | None
) -> str | None:
    """``block`` in the caller's transaction (``why`` already checked with
    ``fields.reason``): a refusal of the door is raised before anything is written. The
    holder of the claim it ended (live or lapsed), if any: the caller tells the ``ended``
    hooks once its transaction committed (``handle.claim_ended``)."""
    let = door.admit(q, conn, Action.BLOCK, number, by)
    row, now = let.row, let.now
    overridden = let.overridden and readiness.claim_live(row, now)
    claims.clear_claim(conn, row.id, now=now, is_blocked=True, blocked_reason=why)
    record(
        q,
        conn,
        kind="blocked",
        issue_id=row.id,
        number=number,
        actor=actor or (by.who if overridden else row.claimed_by),
        now=now,
        before={"claimed_by": row.claimed_by, "status": row.status},
        after={"blocked_reason": why, **(by.recorded() if overridden else {})},
    )
    return row.claimed_by


def unblock(q: Queue, number: int, *, actor: str | None = None) -> Issue:
    fields.number(number)

    def work(conn: Connection) -> Issue:
        row = load(conn, number, for_update=True)
        if row.is_blocked:
            now = q.now()
            conn.execute(
                update(issues)
                .where(issues.c.id == row.id)
                .values(is_blocked=False, blocked_reason=None, updated_at=now)
            )
            record(
                q,
                conn,
                kind="unblocked",
                issue_id=row.id,
                number=number,
                actor=actor,
                now=now,
                before={"blocked_reason": row.blocked_reason},
            )
        return to_issue(load(conn, number))

    return q.db.write(work)
