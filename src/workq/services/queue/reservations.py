"""File reservations: who holds which paths, and what that does to claims.

A reservation lives exactly as long as the claim it belongs to: while the issue is in
progress under an unexpired lease, held by the same run, under the same fencing token. So
nothing expires on a timer and nothing is left behind by a crash: a lapsed lease, a
completion, a release or a block ends every reservation of that claim at once (the rows of
explicit ones are also deleted then, or by the next reserve of the issue).

Two kinds: a claim reserves its issue's ``touches`` exclusively; the holder may add
explicit ones (``issue_reserve``), exclusive or shared. Two reservations of different
holders conflict when their globs overlap (domain/globs.py) and one of them is exclusive.

Deciding a conflict reads every live reservation and compares globs in Python, which one
SQL statement cannot do; so every write that takes reservations is serialised: on SQLite by
its BEGIN IMMEDIATE, on PostgreSQL by one transaction-scoped advisory lock (:func:`serialise`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

from sqlalchemy import Connection, bindparam, delete, literal_column, select, text

from workq.db.prepared import Prepared
from workq.db.tables import issues, reservations, touches
from workq.domain import dates, fields, globs
from workq.domain.authority import Authority
from workq.domain.decisions import Action
from workq.errors import InvalidInput, PathsReserved
from workq.schemas import Status
from workq.services.handle import Queue, record
from workq.services.queue import door, predicates

_log = logging.getLogger(__name__)
IN_PROGRESS = Status.IN_PROGRESS.value
EXCLUSIVE, SHARED = "exclusive", "shared"
MODES = (EXCLUSIVE, SHARED)
EXPLICIT_MAX = 64  # explicit reservations per claim
# The advisory lock key of reservation writes on PostgreSQL ("wqrv").
_LOCK_KEY = 0x77717276


class Held(NamedTuple):
    """A live reservation."""

    number: int
    holder: str
    glob: str
    mode: str
    until: datetime


_live = predicates.claim_live(bindparam("now"))
_LIVE = (
    Prepared(
        select(
            issues.c.number,
            issues.c.claimed_by.label("holder"),
            touches.c.glob,
            literal_column(f"'{EXCLUSIVE}'").label("mode"),
            issues.c.lease_expires_at.label("until"),
        )
        .join(touches, touches.c.issue_id == issues.c.id)
        .where(_live),
        Held,
    ),
    Prepared(
        select(
            issues.c.number,
            reservations.c.holder,
            reservations.c.glob,
            reservations.c.mode,
            issues.c.lease_expires_at.label("until"),
        )
        .join(reservations, reservations.c.issue_id == issues.c.id)
        .where(
            _live,
            reservations.c.holder == issues.c.claimed_by,
            reservations.c.fence == issues.c.fence,
        ),
        Held,
    ),
)
_TOUCHES = Prepared(
    select(touches.c.glob)
    .where(touches.c.issue_id == bindparam("issue_id"))
    .order_by(touches.c.position)
)


def serialise(conn: Connection) -> None:
    """Take the reservation lock of this transaction (PostgreSQL; SQLite's write
    transaction already excludes every other writer)."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK_KEY})


def live(conn: Connection, now: datetime) -> list[Held]:
    """Every live reservation, by issue number."""
    rows = [h for part in _LIVE for h in part.rows(conn, {"now": now})]
    return sorted(rows, key=lambda h: (h.number, h.glob))


def touches_of(conn: Connection, issue_id: str) -> list[str]:
    return [r.glob for r in _TOUCHES.rows(conn, {"issue_id": issue_id})]


def conflicts(held: Sequence[Held], paths: Sequence[str], holder: str, mode: str) -> list[Held]:
    """The reservations in ``held`` of holders other than ``holder`` that ``paths``, reserved
    in ``mode``, would conflict with."""
    return [
        h
        for h in held
        if h.holder != holder
        and (mode == EXCLUSIVE or h.mode == EXCLUSIVE)
        and any(globs.overlap(p, h.glob) for p in paths)
    ]


def describe(found: Sequence[Held]) -> str:
    """ "src/** by run-a (#3, until 12:00:00Z), ..." for messages."""
    return ", ".join(
        f"{h.glob} by {h.holder} (#{h.number}, {h.mode}, until {dates.stamp(h.until)})"
        for h in found
    )


def facts(found: Sequence[Held]) -> list[dict[str, object]]:
    return [{"number": h.number, "holder": h.holder, "glob": h.glob, "mode": h.mode} for h in found]


class Gate:
    """What reservations do to the claims of one transaction: reads the live ones once,
    when the first candidate with touches needs them."""

    def __init__(self, q: Queue, conn: Connection, now: datetime, *, writes: bool) -> None:
        self.conn, self.now = conn, now
        self.enforce = q.reservations != "warn"
        self._held: list[Held] | None = None
        # A read (ready) takes no lock; a claim does, before it reads.
        self._locked = not writes

    def blocking(self, issue_id: str, touching: bool, holder: str) -> list[Held]:
        """Live reservations of others that claiming this issue would conflict with."""
        if not touching:
            return []
        paths = touches_of(self.conn, issue_id)
        if not paths:
            return []
        if self._held is None:
            if not self._locked:
                serialise(self.conn)
                self._locked = True
            self._held = live(self.conn, self.now)
        return conflicts(self._held, paths, holder, EXCLUSIVE)

    def refuse(self, number: int, found: list[Held]) -> None:
        if found and not self.enforce:
            _log.warning("claiming #%s despite reserved paths: %s", number, describe(found))
        if found and self.enforce:
            raise PathsReserved(
                f"Issue #{number} touches paths reserved by another holder: {describe(found)}",
                number=number,
                reserved=facts(found),
            )


def reserve(
    q: Queue,
    number: int,
    by: Authority,
    glob: str,
    *,
    mode: str = EXCLUSIVE,
) -> list[Held]:
    """Reserve ``glob`` for the live claim ``by`` holds on issue ``number``.
    Returns the claim's live reservations (its touches too). Refused with PathsReserved
    when another holder's live reservation conflicts (in warn mode, reserved anyway)."""

    fields.number(number)
    fields.fence(by.fence)
    path = globs.glob(glob, "glob")
    if mode not in MODES:
        raise InvalidInput("mode must be exclusive or shared", field="mode")

    def work(conn: Connection) -> list[Held]:
        serialise(conn)
        let = door.admit(q, conn, Action.RESERVE, number, by)
        row, now, holder = let.row, let.now, str(let.holder)
        held = live(conn, now)
        found = conflicts(held, [path], holder, mode)
        if found and q.reservations != "warn":
            raise PathsReserved(
                f"{path} overlaps paths reserved by another holder: {describe(found)}",
                number=number,
                glob=path,
                reserved=facts(found),
            )
        # Rows of the issue's earlier claims are dead: drop them here.
        conn.execute(
            delete(reservations).where(
                reservations.c.issue_id == row.id,
                (reservations.c.fence != row.fence) | (reservations.c.glob == path),
            )
        )
        mine = [h for h in held if h.number == number and h.glob != path]
        if sum(1 for h in mine if h.holder == holder) >= EXPLICIT_MAX:
            raise InvalidInput(f"at most {EXPLICIT_MAX} reservations per claim", field="glob")
        conn.execute(
            reservations.insert().values(
                issue_id=row.id,
                glob=path,
                holder=holder,
                fence=row.fence,
                mode=mode,
                created_at=now,
            )
        )
        record(
            q,
            conn,
            kind="reserved",
            issue_id=row.id,
            number=number,
            actor=holder,
            now=now,
            after={"glob": path, "mode": mode},
        )
        assert row.lease_expires_at is not None
        return sorted(
            [*mine, Held(number, holder, path, mode, row.lease_expires_at)],
            key=lambda h: h.glob,
        )

    return q.db.write(work)


def unreserve(q: Queue, number: int, by: Authority, glob: str) -> list[Held]:
    """Drop an explicit reservation of the live claim ``by`` holds on ``number``; not one
    of its touches: those go with the claim. Returns the claim's live reservations."""

    fields.number(number)
    fields.fence(by.fence)
    path = globs.glob(glob, "glob")

    def work(conn: Connection) -> list[Held]:
        let = door.admit(q, conn, Action.UNRESERVE, number, by)
        row, now = let.row, let.now
        gone = conn.execute(
            delete(reservations).where(
                reservations.c.issue_id == row.id,
                reservations.c.glob == path,
                reservations.c.fence == row.fence,
            )
        ).rowcount
        if not gone:
            raise InvalidInput(
                f"#{number} has no explicit reservation of {path}",
                hint="touches are reserved for the whole claim; see issue_reservations",
                field="glob",
            )
        # Not a quiet kind (db/changes.py): the paths it frees may make work claimable.
        record(
            q,
            conn,
            kind="unreserved",
            issue_id=row.id,
            number=number,
            actor=by.who if let.overridden else let.holder,
            now=now,
            before={"glob": path},
            after=by.recorded() or None,
        )
        return [h for h in live(conn, now) if h.number == number]

    return q.db.write(work)


# Run at every completion and release: prepared (db/prepared.py), not compiled per call.
_clear = Prepared(delete(reservations).where(reservations.c.issue_id == bindparam("issue_id")))


def clear(conn: Connection, issue_id: str) -> None:
    """Drop the rows of an issue's explicit reservations (its claim ended)."""
    _clear.count(conn, {"issue_id": issue_id})


def list_live(q: Queue) -> list[Held]:
    with q.db.read() as conn:
        return live(conn, q.now())
