"""Keeping a queue healthy: doctor (check and repair) and backup."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from sqlalchemy import Connection, and_, delete, func, insert, or_, select, update

from workq.db import dialect, sqlite
from workq.db.engine import DRIVER_ERRORS
from workq.db.tables import (
    comments,
    counters,
    dependencies,
    github_comments,
    issues,
    labels,
    plan_issues,
    workflows,
)
from workq.errors import CorruptDatabase, InvalidInput, StorageError
from workq.schemas import IssueType, Priority, Status
from workq.services.handle import Queue, record
from workq.services.queue import blockers
from workq.services.queue.claims import clear_claim
from workq.services.queue.issues import COUNTER


class Finding(BaseModel):
    check: str
    number: int | None = None
    detail: str
    repaired: bool = False
    repairable: bool = True  # whether --repair fixes it (not damage, not a long cycle)


class DoctorReport(BaseModel):
    ok: bool
    findings: list[Finding]
    repaired: int
    storage: str | None = None  # the SQLite library serving a SQLite file
    warnings: list[str] = []  # risks that are not faults of the database


def blocked_oracle(conn: Connection) -> dict[str, int]:
    """Open blockers per issue id, counted from the graph at query time (the slow truth)."""
    blocker = issues.alias("blocker")
    rows = conn.execute(
        select(dependencies.c.blocked_id, func.count())
        .join(blocker, blocker.c.id == dependencies.c.blocker_id)
        .where(blocker.c.status != Status.DONE.value)
        .group_by(dependencies.c.blocked_id)
    )
    return {str(issue_id): int(count) for issue_id, count in rows}


def doctor(q: Queue, *, repair: bool = False) -> DoctorReport:
    """Check integrity, stored values, dependency cycles, blocked counts, claims (expired,
    half-made, without a lease), orphan rows and the number counter; fix with repair."""
    storage = sqlite.describe() if q.db.is_sqlite else None
    warnings = [w for w in [sqlite.wal_reset_warning()] if w] if q.db.is_sqlite else []
    findings = _integrity(q) if q.db.is_sqlite else []
    if findings:
        return DoctorReport(
            ok=False, findings=findings, repaired=0, storage=storage, warnings=warnings
        )

    def work(conn: Connection) -> list[Finding]:
        if repair:
            dialect.hold_writers(conn)  # the counts are compared across several statements
        now = q.now()
        # Values and cycles first: what they repair changes the counts checked next.
        found = list(_values(q, conn, now, repair))
        found.extend(_cycles(conn, repair))
        truth = blocked_oracle(conn)
        for issue_id, number, stored in conn.execute(
            select(issues.c.id, issues.c.number, issues.c.open_blockers)
        ):
            expected = truth.get(issue_id, 0)
            if stored != expected:
                found.append(
                    Finding(
                        check="blocked_count",
                        number=number,
                        detail=f"open_blockers is {stored}, the graph says {expected}",
                        repaired=repair,
                    )
                )
                if repair:
                    blockers.recount(conn, issue_id, expected)
        found.extend(_claims(q, conn, now, repair))
        found.extend(_orphans(conn, repair))
        highest = conn.execute(select(func.max(issues.c.number))).scalar() or 0
        counter = conn.execute(select(counters.c.value).where(counters.c.name == COUNTER)).scalar()
        if counter is None or counter < highest:
            found.append(
                Finding(
                    check="counter",
                    detail=f"the number counter is {counter}, below the highest number {highest}",
                    repaired=repair,
                )
            )
            if repair:
                conn.execute(delete(counters).where(counters.c.name == COUNTER))
                conn.execute(insert(counters).values(name=COUNTER, value=highest))
        return found

    found = q.db.write(work) if repair else _read_only(q, work)
    findings.extend(found)
    return DoctorReport(
        ok=not findings or all(f.repaired for f in findings),
        findings=findings,
        repaired=sum(f.repaired for f in findings),
        storage=storage,
        warnings=warnings,
    )


def integrity_check(q: Queue) -> list[str]:
    """What SQLite's ``PRAGMA integrity_check`` says of the file, on a connection of its own
    (SQLite 3.44 and later also check the full-text index; a connection that has not read
    it since another process changed it reports a damage that is not there).

    Raises:
        CorruptDatabase: the file is too damaged for the check to finish.
    """
    try:
        raw = q.db.own_connection()
        try:
            return [str(line) for (line,) in raw.cursor().execute("PRAGMA integrity_check")]
        finally:
            raw.close()
    except DRIVER_ERRORS as exc:
        raise q.db.translate(exc) from exc


def _integrity(q: Queue) -> list[Finding]:
    hint = "restore from a backup ('workq backup' makes one while agents work)"
    try:
        lines = integrity_check(q)
    except CorruptDatabase as exc:  # too damaged for the check to finish
        cause = exc.facts.get("cause")
        detail = f"{exc.message} ({cause}); {hint}"
        return [Finding(check="integrity", detail=detail, repairable=False)]
    return [
        Finding(check="integrity", detail=f"{line}; {hint}", repairable=False)
        for line in lines
        if line != "ok"
    ]


_STATUSES = tuple(s.value for s in Status)
_TYPES = tuple(t.value for t in IssueType)
_RANKS = tuple(p.rank for p in Priority)


def _values(q: Queue, conn: Connection, now: datetime, repair: bool) -> Iterator[Finding]:
    """Values no command writes (a hand edit): every read of the issue would fail."""
    bad = select(issues).where(
        or_(
            issues.c.status.not_in(_STATUSES),
            issues.c.priority.not_in(_RANKS),
            issues.c.issue_type.not_in(_TYPES),
        )
    )
    for row in conn.execute(bad).all():
        changes: dict[str, Any] = {}
        if row.status not in _STATUSES:
            done = row.closed_at is not None
            changes["status"] = Status.DONE.value if done else Status.OPEN.value
            changes.update(claimed_by=None, claimed_at=None, lease_expires_at=None)
        if row.priority not in _RANKS:
            changes["priority"] = Priority.MEDIUM.rank
        if row.issue_type not in _TYPES:
            changes["issue_type"] = IssueType.TASK.value
        shown = {**changes, "priority": Priority.MEDIUM.value}
        said = [
            f"{name} {getattr(row, name)!r} is not valid, "
            f"{'set' if repair else 'would be set'} to {shown[name]!r}"
            for name in ("status", "priority", "issue_type")
            if name in changes
        ]
        yield Finding(check="values", number=row.number, detail="; ".join(said), repaired=repair)
        if repair:
            conn.execute(
                update(issues).where(issues.c.id == row.id).values(**changes, updated_at=now)
            )
            record(
                q,
                conn,
                kind="repaired",
                issue_id=row.id,
                number=row.number,
                actor="workq doctor",
                now=now,
                before={k: getattr(row, k) for k in changes},
                after={**changes, "check": "values"},
            )


def _cycles(conn: Connection, repair: bool) -> Iterator[Finding]:
    """Issues that wait on each other (a hand edit; the commands refuse cycles): none of
    them can ever be ready. An issue waiting on itself is repaired; longer cycles are
    reported, for a person to choose which dependency goes."""
    blocker, blocked = issues.alias("blocker"), issues.alias("blocked")
    edges = conn.execute(
        select(blocker.c.number, blocked.c.number)
        .join(dependencies, dependencies.c.blocker_id == blocker.c.id)
        .join(blocked, dependencies.c.blocked_id == blocked.c.id)
        .where(blocker.c.status != Status.DONE.value, blocked.c.status != Status.DONE.value)
    ).all()
    waits_on: dict[int, list[int]] = {}
    for first, second in edges:
        if first == second:
            yield Finding(
                check="dependency_cycle",
                number=first,
                detail=f"#{first} waits on itself; "
                + ("dependency removed" if repair else "remove it"),
                repaired=repair,
            )
            if repair:
                gone = select(issues.c.id).where(issues.c.number == first).scalar_subquery()
                conn.execute(
                    delete(dependencies).where(
                        dependencies.c.blocker_id == gone, dependencies.c.blocked_id == gone
                    )
                )
            continue
        waits_on.setdefault(second, []).append(first)
    for cycle in _find_cycles(waits_on):
        path = " -> ".join(f"#{n}" for n in [*cycle, cycle[0]])
        yield Finding(
            check="dependency_cycle",
            number=cycle[0],
            detail=f"{path} wait on each other and can never be ready; "
            f"remove one with 'workq undepend'",
            repairable=False,
        )


def _find_cycles(waits_on: dict[int, list[int]]) -> list[list[int]]:
    """One cycle per strongly connected group of the graph (iterative DFS)."""
    state: dict[int, int] = {}  # 1 on the current path, 2 finished
    cycles: list[list[int]] = []
    for start in sorted(waits_on):
        if start in state:
            continue
        path: list[int] = []
        stack: list[tuple[int, Iterator[int]]] = [(start, iter(waits_on.get(start, ())))]
        state[start] = 1
        path.append(start)
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                path.pop()
                state[node] = 2
            elif state.get(child) == 1:
                cycles.append(path[path.index(child) :])
            elif child not in state:
                state[child] = 1
                path.append(child)
                stack.append((child, iter(waits_on.get(child, ()))))
    return cycles


def _read_only(q: Queue, work: Any) -> list[Finding]:
    with q.db.read() as conn:
        result: list[Finding] = work(conn)
        return result


def _claims(q: Queue, conn: Connection, now: datetime, repair: bool) -> Iterator[Finding]:
    in_progress = issues.c.status == Status.IN_PROGRESS.value
    cases = (
        (
            "stale_claim",
            and_(in_progress, issues.c.lease_expires_at <= now),
            "claimed by {holder}, lease expired; returned to the queue",
        ),
        (
            "claim_state",
            and_(in_progress, issues.c.claimed_by.is_(None)),
            "in progress without a holder; returned to the queue",
        ),
        (
            "claim_state",
            and_(
                in_progress,
                issues.c.claimed_by.is_not(None),
                issues.c.lease_expires_at.is_(None),
            ),
            "claimed by {holder} without a lease, so it would never expire; returned to the queue",
        ),
        (
            "claim_state",
            and_(~in_progress, issues.c.claimed_by.is_not(None)),
            "not in progress but claimed by {holder}; claim cleared",
        ),
    )
    for check, where, text in cases:
        for row in conn.execute(select(issues).where(where)).all():
            yield Finding(
                check=check,
                number=row.number,
                detail=text.format(holder=row.claimed_by),
                repaired=repair,
            )
            if repair:
                status = Status.OPEN.value if row.status == Status.IN_PROGRESS.value else row.status
                clear_claim(conn, row.id, now=now, status=status)
                record(
                    q,
                    conn,
                    kind="repaired",
                    issue_id=row.id,
                    number=row.number,
                    actor="workq doctor",
                    now=now,
                    before={"claimed_by": row.claimed_by, "status": row.status},
                    after={"status": status, "check": check},
                )


def _orphans(conn: Connection, repair: bool) -> Iterator[Finding]:
    """Rows whose issue (or comment) is gone: a delete made by hand with foreign keys off
    (the sqlite3 shell's default)."""
    for table, column, parent in (
        (labels, labels.c.issue_id, issues.c.id),
        (comments, comments.c.issue_id, issues.c.id),
        (dependencies, dependencies.c.blocker_id, issues.c.id),
        (dependencies, dependencies.c.blocked_id, issues.c.id),
        (workflows, workflows.c.issue_id, issues.c.id),
        (plan_issues, plan_issues.c.issue_id, issues.c.id),
        (github_comments, github_comments.c.comment_id, comments.c.id),
    ):
        known = select(parent)
        count = conn.execute(
            select(func.count()).select_from(table).where(column.not_in(known))
        ).scalar_one()
        if count:
            what = "comment" if parent.table is comments else "issue"
            yield Finding(
                check="orphans",
                detail=f"{count} row(s) of {table.name} point at a missing {what}",
                repaired=repair,
            )
            if repair:
                conn.execute(delete(table).where(column.not_in(known)))


def backup(q: Queue, target: Path) -> int:
    """Copy the live SQLite database to ``target`` with SQLite's online backup. Pages copied."""
    if not q.db.is_sqlite:
        raise InvalidInput(
            "backup copies SQLite files; for PostgreSQL use pg_dump",
            hint="or 'workq export > queue.jsonl' for an engine-neutral copy",
        )
    if target.exists():
        raise InvalidInput(f"{target} exists already", hint="choose a new path")
    folder = target.parent
    if not folder.is_dir():
        raise InvalidInput(
            f"the backup's folder {folder} does not exist",
            hint="create it, or name a file in an existing folder",
        )
    if not os.access(folder, os.W_OK):
        raise InvalidInput(
            f"the backup's folder {folder} cannot be written",
            hint="choose a folder this user can write",
        )
    raw = q.db.engine.raw_connection()
    try:
        destination = sqlite.connect(target)
        try:
            source = raw.driver_connection
            assert sqlite.is_connection(source)
            source.backup(destination)  # type: ignore[union-attr]
            pages = destination.execute("PRAGMA page_count").fetchone()[0]
        finally:
            destination.close()
    except sqlite.Error as exc:
        target.unlink(missing_ok=True)
        raise StorageError(f"backup failed: {exc}") from exc
    finally:
        raw.close()
    return int(pages)
