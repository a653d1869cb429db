"""When a claim is live, and when an issue is free to be worked on: the rules every
service and report asks, here for rows already read and in services/queue/predicates.py as the
SQL that asks the same of the database.

- A claim is **live** while its issue is in progress and its lease has not run out. An
  issue in progress always has a holder and a lease: the database refuses a row without
  (migration 0013_claims_have_leases), so there is no claim that nothing would end.
- A claim that is in progress but not live has **lapsed**: the issue is claimable again.
- An issue is **unblocked** when nobody blocked it and every issue it depends on is done.
- An issue is **ready** when it is unblocked and open, or in progress under a lapsed claim
  (the reservations of live claims may still keep it from a caller: services/reservations).
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from workq.domain import leases
from workq.schemas import Status

OPEN, IN_PROGRESS = Status.OPEN.value, Status.IN_PROGRESS.value


class ClaimRow(Protocol):
    @property
    def status(self) -> str: ...
    @property
    def lease_expires_at(self) -> datetime | None: ...


class BlockRow(Protocol):
    @property
    def is_blocked(self) -> bool: ...
    @property
    def open_blockers(self) -> int: ...


def claim_live(row: ClaimRow, now: datetime) -> bool:
    """The issue is held: in progress, with a lease that runs past ``now``."""
    return row.status == IN_PROGRESS and leases.live(row.lease_expires_at, now)


def claim_lapsed(row: ClaimRow, now: datetime) -> bool:
    """In progress, but no longer held: anyone may claim it (its holder under a new fence)."""
    return row.status == IN_PROGRESS and not claim_live(row, now)


def unblocked(row: BlockRow) -> bool:
    """Not blocked by anyone, and waiting on no unfinished issue."""
    return not row.is_blocked and row.open_blockers == 0


class ReadyRow(ClaimRow, BlockRow, Protocol):
    pass


def ready(row: ReadyRow, now: datetime) -> bool:
    """Open, or in progress under a lapsed claim; and unblocked (reservations aside)."""
    return unblocked(row) and (row.status == OPEN or claim_lapsed(row, now))
