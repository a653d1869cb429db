"""Who may act on a stored claim: the caller's Authority (domain/authority.py) against the
issue's row: the holder, the fencing token of its latest claim, and a lease still live.
Every service that changes a claimed issue asks here (claims, reservations, blocking,
worktrees, merges, the git steps)."""

from __future__ import annotations

from datetime import datetime

from workq.db.tables import IssueRecord
from workq.domain import readiness
from workq.domain.authority import Authority
from workq.errors import InvalidInput, LeaseLapsed, NotHolder, StaleClaim, Step
from workq.schemas import Status
from workq.services.handle import Queue, load

IN_PROGRESS, DONE = Status.IN_PROGRESS.value, Status.DONE.value


def check_fence(row: IssueRecord, fence: int | None, number: int) -> None:
    """StaleClaim unless ``fence`` (when given) is the token of the issue's latest claim."""
    if fence is None or fence == row.fence:
        return
    if fence > row.fence:
        raise InvalidInput(
            f"Issue #{number} has had no claim with fencing token {fence} "
            f"(its latest is {row.fence})",
            field="fence",
        )
    if row.claimed_by is not None:
        newer = f"claim {row.fence}, held by {row.claimed_by}"
    else:
        newer = f"claim {row.fence}, since ended ({row.status})"
    raise StaleClaim(
        f"Issue #{number} was claimed again after your claim {fence}: {newer}",
        number=number,
        fence=fence,
        latest_fence=row.fence,
        holder=row.claimed_by,
        status=row.status,
    )


def check_holder(row: IssueRecord, by: Authority, number: int, action: str) -> str:
    """The holder the caller acts as (or overrides), or NotHolder."""
    if row.claimed_by is None or row.status != IN_PROGRESS:
        raise NotHolder(
            f"Issue #{number} is not claimed",
            number=number,
            hint=("claim it with ", Step.CLAIM, f" before you {action} it"),
        )
    if not by.allows(row.claimed_by):
        anyway = {"complete": Step.COMPLETE_ANYWAY, "release": Step.RELEASE_ANYWAY}
        raise NotHolder(
            f"Issue #{number} is held by {row.claimed_by}, not by you ({by.shown()})",
            hint=(
                "ask its holder to release it, or take it over: ",
                anyway.get(action, Step.FORCE_CLAIM),
            ),
            number=number,
            holder=row.claimed_by,
            lease_expires_at=row.lease_expires_at.isoformat() if row.lease_expires_at else None,
        )
    return str(row.claimed_by)


def held_now(row: IssueRecord, by: Authority, number: int, now: datetime, action: str) -> str:
    """The holder (one ``by`` acts for) of the live claim on ``row``, or NotHolder (or
    StaleClaim, LeaseLapsed)."""
    check_fence(row, by.fence, number)
    holder = check_holder(row, by, number, action)
    if readiness.claim_lapsed(row, now):
        until = row.lease_expires_at
        at = f"at {until:%Y-%m-%d %H:%M:%SZ}" if until else "(it had no lease)"
        raise LeaseLapsed(
            f"Your claim on issue #{number} lapsed {at}; its reservations ended with it",
            number=number,
            lease_expires_at=until.isoformat() if until else None,
        )
    return holder


def refuse_unless_held(
    q: Queue, number: int, by: Authority, action: str, *, unclaimed_ok: bool = False
) -> str | None:
    """NotHolder (or StaleClaim) unless ``by`` may act on issue ``number``'s claim: asked
    before a long step (a merge's gates, a commit) that the transaction recording its
    outcome asks again. A done issue has no claim left to guard; ``unclaimed_ok``: nor
    has an issue nobody holds. Returns the holder ``by`` acts as, the name its history
    records (None: no claim, or an override, which records whoever made it)."""
    with q.db.read() as conn:
        row = load(conn, number)
    if row.status == DONE or (unclaimed_ok and row.claimed_by is None):
        return None
    check_fence(row, by.fence, number)
    holder = check_holder(row, by, number, action)
    return None if by.override is not None else holder
