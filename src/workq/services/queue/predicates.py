"""The rules of domain/readiness.py as SQL, for statements that ask the database: one
expression per rule, used by every service and report. Constants are written into the
SQL, not bound, so that PostgreSQL's prepared statements keep one generic plan."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnClause, ColumnElement, and_, false, literal_column, or_

from workq.db.tables import issues
from workq.domain.readiness import IN_PROGRESS, OPEN

_IN_PROGRESS: ColumnClause[str] = literal_column(f"'{IN_PROGRESS}'")
_OPEN: ColumnClause[str] = literal_column(f"'{OPEN}'")


def claim_live(now: Any) -> ColumnElement[bool]:
    """In progress with a lease past ``now`` (a value, bind parameter or subquery)."""
    return and_(issues.c.status == _IN_PROGRESS, issues.c.lease_expires_at > now)


def claim_lapsed(now: Any) -> ColumnElement[bool]:
    """In progress with a lease that ran out by ``now`` (the database holds no claim
    without a lease: migration 0013), a range of the lease index."""
    return and_(issues.c.status == _IN_PROGRESS, issues.c.lease_expires_at <= now)


# Not blocked by anyone, and waiting on no unfinished issue.
unblocked = and_(issues.c.is_blocked == false(), issues.c.open_blockers == literal_column("0"))


def ready(now: Any) -> ColumnElement[bool]:
    """Open, or in progress under a lapsed claim; and unblocked (reservations aside)."""
    return and_(unblocked, or_(issues.c.status == _OPEN, claim_lapsed(now)))


def held_by(run_ids: Any, now: Any) -> ColumnElement[bool]:
    """A live claim of one of ``run_ids`` (a list, or an expanding bind parameter): the
    claims a caller holds, as every "my claims" read asks (domain/decisions.py decides what
    a caller may do to one)."""
    return and_(issues.c.claimed_by.in_(run_ids), claim_live(now))
