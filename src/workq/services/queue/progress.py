"""A claim's progress clock, and whether it is stalled.

Progress is what workq already sees happen to a claimed issue: any audit event on it since
the claim began (a comment or note, a heartbeat with a note, a plan or workflow step, a gate
run, a commit seen on its branch, a landing step), except those that say nothing of the
work (the claim itself, and what the watch records about a claim). No event since the
claim: its progress is the claim's start. A claim whose lease is live and whose progress
is older than the ``stall_after`` policy (of its repository, else the queue's) is stalled.
The server renews its callers' leases while they stay connected, so a stuck agent keeps
its lease: this clock, not the lease, tells that it is stuck.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, and_, func, select

from workq.db.tables import events, issues, policies
from workq.db.times import from_sqlite
from workq.domain import policies as rules
from workq.schemas import Status

# Events on a claimed issue that are not its work going on.
NOT_PROGRESS = frozenset(
    {
        "claimed",
        "claim_takeover",
        "force_claimed",
        "stalled",
        "lease_lapsed",
        "work_saved",
        "stall_released",
    }
)
_IN_PROGRESS = Status.IN_PROGRESS.value


@dataclass(frozen=True)
class Progress:
    number: int
    holder: str
    fence: int
    claimed_at: datetime
    progress_at: datetime  # the newest progress (the claim's start if none since)
    stall_after: int  # seconds; 0: stalls are off for it
    repository: str | None

    @property
    def stalled_since(self) -> datetime | None:
        """When the claim became stalled, if it is (as of the moment it was read)."""
        if not self.stall_after:
            return None
        return self.progress_at + timedelta(seconds=self.stall_after)

    def stalled(self, now: datetime) -> bool:
        since = self.stalled_since
        return since is not None and now >= since


def stall_after(conn: Connection) -> dict[str | None, int]:
    """The ``stall_after`` policy in seconds for each repository that sets one, and for
    issues in none or in a repository without its own (key None)."""
    rows = conn.execute(
        select(policies.c.scope, policies.c.value).where(policies.c.name == "stall_after")
    ).all()
    found: dict[str | None, int] = {None: rules.duration(rules.POLICIES["stall_after"].default)}
    for r in rows:
        found[r.scope or None] = rules.duration(r.value)
    return found


def of_claims(
    conn: Connection, now: datetime, numbers: Iterable[int] | None = None
) -> list[Progress]:
    """The progress of every live claim (of issues ``numbers``, if given), in one read."""
    since = func.max(events.c.created_at)
    stmt = (
        select(
            issues.c.number,
            issues.c.claimed_by,
            issues.c.fence,
            issues.c.claimed_at,
            issues.c.repository,
            since.label("progress_at"),
        )
        .select_from(
            issues.outerjoin(
                events,
                and_(
                    events.c.number == issues.c.number,
                    events.c.created_at >= issues.c.claimed_at,
                    events.c.kind.not_in(NOT_PROGRESS),
                ),
            )
        )
        .where(
            issues.c.status == _IN_PROGRESS,
            issues.c.claimed_by.is_not(None),
            issues.c.lease_expires_at > now,
        )
        .group_by(
            issues.c.number,
            issues.c.claimed_by,
            issues.c.fence,
            issues.c.claimed_at,
            issues.c.repository,
        )
        .order_by(issues.c.number)
    )
    if numbers is not None:
        stmt = stmt.where(issues.c.number.in_(list(numbers)))
    rows = conn.execute(stmt).all()
    if not rows:
        return []
    after = stall_after(conn)
    return [_progress(r, after) for r in rows]


def _progress(r: Any, after: dict[str | None, int]) -> Progress:
    claimed_at = when(r.claimed_at)
    latest = when(r.progress_at) if r.progress_at is not None else claimed_at
    return Progress(
        number=r.number,
        holder=r.claimed_by,
        fence=r.fence,
        claimed_at=claimed_at,
        progress_at=max(latest, claimed_at),
        stall_after=after.get(r.repository, after[None]),
        repository=r.repository,
    )


def when(value: Any) -> datetime:
    """``max()`` over a datetime column comes back as the stored text on SQLite."""
    if isinstance(value, datetime):
        return value
    return from_sqlite(str(value))


def of_issue(conn: Connection, number: int, now: datetime) -> Progress | None:
    """The progress of issue ``number``'s claim, if a live one holds it."""
    found = of_claims(conn, now, [number])
    return found[0] if found else None


def stalled(conn: Connection, now: datetime) -> list[Progress]:
    """The live claims that are stalled at ``now``."""
    return [p for p in of_claims(conn, now) if p.stalled(now)]
