"""Copying a whole queue from one database to another (SQLite <-> PostgreSQL), losslessly.

Every table of the schema is copied row for row (ids, numbers, counters, history,
comments, the GitHub mirror's links and outbox, plans and workflows), read from one
snapshot of the source and written to the target in one transaction. The target must hold
no issues and no history; it is migrated to the current schema first, and what the
migrations seeded there is replaced by the source's. The source is never written to.
Afterwards both databases are read again and each table must hold the same rows, or the
copy is reported as failed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from sqlalchemy import Connection, Table, delete, func, insert, select

from workq.config import Settings
from workq.db import dialect, migrate
from workq.db.engine import Database
from workq.db.models import Base
from workq.db.tables import events, issues
from workq.errors import InvalidInput, SchemaMismatch, StorageError
from workq.services.runtime import open_database

BATCH = 2000
_MODULUS = 2**256


class CopyReport(BaseModel):
    source: str
    target: str
    counts: dict[str, int]  # rows per table
    digest: str  # of every row of every table, whatever their order


def locate(where: str) -> str:
    """A database URL for ``where``: a URL as it is, a path as a SQLite file."""
    if "://" in where:
        return dialect.normalize_url(where)
    return f"sqlite:///{Path(where).expanduser().resolve()}"


def copy_queue(settings: Settings, source: str, target: str) -> CopyReport:
    """Copy the queue at ``source`` into the empty database at ``target`` (paths or URLs)."""
    source_url, target_url = locate(source), locate(target)
    if source_url == target_url:
        raise InvalidInput("the source and the target are the same database", field="to")
    _must_exist(source_url)
    source_db = _open(settings, source_url)
    try:
        _check_source(source_db)
        target_db = _open(settings, target_url)
        try:
            _check_target(target_db)
            migrate.upgrade(target_db)
            return _copy(source_db, target_db)
        finally:
            target_db.dispose()
    finally:
        source_db.dispose()


def _tables() -> list[Table]:
    """The schema's tables, parents before children."""
    return list(Base.metadata.sorted_tables)


def _copy(source: Database, target: Database) -> CopyReport:
    tables = _tables()
    with source.read() as reading:

        def work(conn: Connection) -> dict[str, int]:
            for table in reversed(tables):
                conn.execute(delete(table))  # what the migrations seeded
            counts = {}
            for table in tables:
                counts[table.name] = 0
                for batch in _batches(reading, table):
                    conn.execute(insert(table), batch)
                    counts[table.name] += len(batch)
            dialect.reset_sequences(conn, tables)
            return counts

        counts = target.write(work)
    sent, received = _digests(source), _digests(target)
    differ = sorted(name for name in sent if sent[name] != received.get(name))
    if differ:
        raise StorageError(
            "the copy does not match its source",
            hint="empty the target and copy again; compare 'workq export' of both",
            tables=differ,
            target=dialect.describe_url(target.url),
        )
    whole = hashlib.sha256("".join(f"{n}:{d}" for n, d in sorted(sent.items())).encode())
    return CopyReport(
        source=dialect.describe_url(source.url),
        target=dialect.describe_url(target.url),
        counts=counts,
        digest=whole.hexdigest(),
    )


def _batches(conn: Connection, table: Table) -> Iterator[list[dict[str, Any]]]:
    result = conn.execution_options(yield_per=BATCH).execute(select(table))
    for rows in result.partitions():
        yield [dict(row._mapping) for row in rows]


def _digests(db: Database) -> dict[str, str]:
    """Per table, a digest of its rows that does not depend on their order (the engines
    sort text differently)."""
    found = {}
    with db.read() as conn:
        for table in _tables():
            total = 0
            for batch in _batches(conn, table):
                for row in batch:
                    line = json.dumps(row, sort_keys=True, default=_plain).encode()
                    total += int.from_bytes(hashlib.sha256(line).digest(), "big")
            found[table.name] = f"{total % _MODULUS:064x}"
    return found


def _plain(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else str(value)


def _open(settings: Settings, url: str) -> Database:
    return open_database(settings.model_copy(update={"database_url": url}))


def _must_exist(url: str) -> None:
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        if not path.is_file():
            raise InvalidInput(f"no SQLite database at {path}", field="from")


def _check_source(db: Database) -> None:
    found = migrate.status(db)
    if found.state != "current":
        where = dialect.describe_url(db.url)
        raise SchemaMismatch(
            f"the source schema is {found.describe()}; the copy reads it unchanged",
            hint=f'bring it to head first: WORKQ_DATABASE_URL="{where}" workq db upgrade'
            if found.state in ("behind", "empty")
            else "copy with the workq version that made it",
            revision=found.revision,
        )


def _check_target(db: Database) -> None:
    found = migrate.status(db)
    where = dialect.describe_url(db.url)
    if found.state in ("ahead", "foreign"):
        raise SchemaMismatch(
            f"the target {found.describe()}",
            hint="copy into a new, empty database",
            target=where,
        )
    if found.state == "empty":
        return
    with db.read() as conn:
        rows = conn.execute(select(func.count()).select_from(issues)).scalar_one()
        rows += conn.execute(select(func.count()).select_from(events)).scalar_one()
    if rows:
        raise InvalidInput(
            f"the target already holds a queue ({rows} issue and history rows)",
            hint="copy into a new, empty database",
            field="to",
            target=where,
        )
