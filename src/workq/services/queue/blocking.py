"""Blocking an issue (it leaves the queue with a reason, its claim dropped) and unblocking
it. Blocking someone else's live claim takes an override (see domain/authority.py)."""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import Connection, update

from workq.db.tables import issues
from workq.domain import fields, readiness
from workq.domain.authority import Authority, as_authority
from workq.errors import NotClaimable
from workq.schemas import Issue, Status
from workq.services.handle import Queue, load, record, to_issue
from workq.services.queue import claims, holding

DONE = Status.DONE.value


def block(
    q: Queue,
    number: int,
    reason: str,
    *,
    by: Authority | Collection[str],
    actor: str | None = None,
) -> Issue:
    """Record why, release any claim, keep it out of ready until unblocked.

    An issue with a live claim of someone else's is refused unless ``by`` overrides (the
    event then records ``forced`` and the reason); an unclaimed issue, or one whose lease
    lapsed, anyone may block. With ``by``'s fence, a claim other than that one is refused
    (StaleClaim).
    """
    auth = as_authority(by)
    fields.number(number)
    fields.fence(auth.fence)
    why = fields.reason(reason)

    def work(conn: Connection) -> Issue:
        row = load(conn, number, for_update=True)
        holding.check_fence(row, auth.fence, number)
        now = q.now()
        if row.status == DONE:
            raise NotClaimable(f"Issue #{number} is done; nothing to block", number=number)
        overridden = readiness.claim_live(row, now) and row.claimed_by not in auth.run_ids
        if overridden:
            holding.check_holder(row, auth, number, "block")
        claims.clear_claim(conn, row.id, now=now, is_blocked=True, blocked_reason=why)
        record(
            q,
            conn,
            kind="blocked",
            issue_id=row.id,
            number=number,
            actor=actor or row.claimed_by,
            now=now,
            before={"claimed_by": row.claimed_by, "status": row.status},
            # Blocking someone else's live claim (an admin's force) says so.
            after={
                "blocked_reason": why,
                **({"forced": True, "override": auth.override} if overridden else {}),
            },
        )
        return to_issue(load(conn, number))

    return q.db.write(work)


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
