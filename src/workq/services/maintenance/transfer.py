"""Moving a whole queue: export to JSON lines, import from them, copy between databases.

All three stream in batches, so memory stays bounded whatever the size of the queue, and
each is all or nothing.

An export is one JSON object per line: a header, then every row of every table (issues,
history, comments, plans, the GitHub mirror's state) with ids, numbers and timestamps kept,
tables parents first and rows in key order, read from one snapshot. An import loads such a
file into an empty queue in one transaction, in the file's order; a bad line anywhere
refuses the whole file.

A copy moves every table row for row (SQLite <-> PostgreSQL), read from one snapshot of the
source and written to the target in one transaction. The target must hold no issues and no
history; it is migrated to the current schema first, and what the migrations seeded there is
replaced by the source's. The source is never written to. Afterwards both databases are read
again and each table must hold the same rows, or the copy is reported as failed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from sqlalchemy import Boolean, Connection, Table, delete, func, insert, select
from sqlalchemy.exc import IntegrityError

from workq.config import Settings
from workq.db import dialect, migrate
from workq.db.engine import Database
from workq.db.models import metadata
from workq.db.tables import events, issues
from workq.db.times import UTCDateTime
from workq.domain import dates, fields
from workq.errors import InvalidInput, SchemaMismatch, StorageError
from workq.schemas import IssueType, Priority, Status
from workq.services.handle import Queue
from workq.services.runtime import open_database

EXPORT_FORMAT = "workq-export"
EXPORT_VERSION = 1
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


# Told the table and the number of rows just copied, as the copy goes.
CopyProgress = Callable[[str, int], None]


def copy_queue(
    settings: Settings, source: str, target: str, progress: CopyProgress | None = None
) -> CopyReport:
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
            return _copy(source_db, target_db, progress)
        finally:
            target_db.dispose()
    finally:
        source_db.dispose()


def _tables() -> list[Table]:
    """The schema's tables, parents before children: the order of an export."""
    return list(metadata.sorted_tables)


# Export and import.


def export_lines(q: Queue) -> Iterator[str]:
    """The whole queue as JSON lines, in a stable order, from one snapshot."""
    with q.db.read() as conn:
        yield json.dumps({"type": EXPORT_FORMAT, "version": EXPORT_VERSION, "schema": migrate.HEAD})
        for table in _tables():
            order = list(table.primary_key.columns)
            rows = conn.execution_options(yield_per=BATCH).execute(select(table).order_by(*order))
            for row in rows:
                data = {c.name: _encode(c, row._mapping[c.name]) for c in table.columns}
                yield json.dumps({"type": table.name, **data}, sort_keys=True)


def _encode(column: Any, value: Any) -> Any:
    if isinstance(value, datetime):
        return dates.iso(value)
    if isinstance(column.type, Boolean) and value is not None:
        return bool(value)
    return value


def import_lines(q: Queue, lines: Iterable[str]) -> dict[str, int]:
    """Load an export into an empty queue, in one transaction, reading ``lines`` once and
    keeping only a batch of rows in memory. Counts rows per table."""
    consumed = False

    def work(conn: Connection) -> dict[str, int]:
        nonlocal consumed
        if consumed:  # the transaction is being retried, but the lines were read already
            raise StorageError(
                "the import was interrupted: the connection to the database was lost",
                hint="nothing was imported; run the import again",
                applied=False,
            )
        consumed = True
        return _load(conn, _numbered(lines))

    return q.db.write(work)


def _numbered(lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    for n, line in enumerate(lines, 1):
        if line.strip():
            yield n, line


def _load(conn: Connection, lines: Iterator[tuple[int, str]]) -> dict[str, int]:
    tables = {table.name: table for table in _tables()}
    rank = {name: i for i, name in enumerate(tables)}
    _check_header(next(lines, None))
    _empty_target(conn, list(tables.values()))
    counts: dict[str, int] = {}
    kind: str | None = None
    batch: list[dict[str, Any]] = []
    since = last = 0  # the lines of the batch's first and last rows

    def flush() -> None:
        if not batch:
            return
        assert kind is not None
        try:
            conn.execute(insert(tables[kind]), batch)
        except IntegrityError:
            raise InvalidInput(
                f"lines {since}-{last}: a {kind} row refers to a row the file does not hold "
                "before it, or repeats one",
                hint="import the file as 'workq export' wrote it",
                line=since,
            ) from None
        counts[kind] = counts.get(kind, 0) + len(batch)
        batch.clear()

    for n, line in lines:
        data = _parse(line, n)
        found = data.pop("type", None)
        if found not in tables:
            raise InvalidInput(f"line {n} has an unknown type {found!r}", line=n)
        if found != kind:
            flush()
            if kind is not None and (rank[found] < rank[kind] or found in counts):
                raise InvalidInput(
                    f"line {n}: {found} rows after {kind} rows; an export lists each table "
                    "once, parents first",
                    hint="import the file as 'workq export' wrote it",
                    line=n,
                )
            kind = found
        if not batch:
            since = n
        batch.append(_row(tables[found], data, n))
        last = n
        if len(batch) == BATCH:
            flush()
    flush()
    dialect.reset_sequences(conn, list(tables.values()))
    return counts


def _check_header(first: tuple[int, str] | None) -> None:
    header = _parse(first[1], first[0]) if first else None
    if header is None or header.get("type") != EXPORT_FORMAT:
        raise InvalidInput("not a workq export: the header line is missing")
    if header.get("version") != EXPORT_VERSION:
        raise InvalidInput(f"export version {header.get('version')} is not supported")


def _empty_target(conn: Connection, tables: list[Table]) -> None:
    """Refuse a queue with issues or history; clear what the migrations seeded there (the
    counter row). ``tables``: parents first."""
    present = conn.execute(select(func.count()).select_from(issues)).scalar_one()
    present += conn.execute(select(func.count()).select_from(events)).scalar_one()
    if present:
        raise InvalidInput(
            "the target queue is not empty",
            hint="import into a new database file (--db NEW.db)",
        )
    for table in reversed(tables):
        conn.execute(delete(table))


def _row(table: Table, data: dict[str, Any], n: int) -> dict[str, Any]:
    """Line ``n``'s row of ``table``, decoded and checked."""
    try:
        row = _decode(table, data)
        _valid(table.name, row)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"line {n}: {exc}", line=n) from None
    except InvalidInput as exc:
        raise InvalidInput(f"line {n}: {exc.message}", line=n) from None
    return row


def _parse(line: str, n: int) -> dict[str, Any]:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"line {n} is not JSON: {exc.msg}", line=n) from None
    if not isinstance(data, dict):
        raise InvalidInput(f"line {n} is not a JSON object", line=n)
    return data


def _decode(table: Table, data: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for column in table.columns:
        if column.name not in data:
            if column.nullable or column.default is not None or column.autoincrement is True:
                continue
            raise InvalidInput(f"{table.name} row without {column.name}")
        value = data[column.name]
        if value is not None and isinstance(column.type, UTCDateTime):
            value = datetime.fromisoformat(value)
        row[column.name] = value
    return row


_STATUSES = tuple(s.value for s in Status)
_TYPES = tuple(t.value for t in IssueType)
_RANKS = tuple(p.rank for p in Priority)


def _valid(kind: str, row: dict[str, Any]) -> None:
    """What the commands would refuse, an import refuses too: an edited or foreign file
    must not bring in text or values no command could have stored."""
    if kind == "issues":
        fields.number(row.get("number"))  # type: ignore[arg-type]
        fields.title(row.get("title"))  # type: ignore[arg-type]
        fields.description(row.get("description"))
        if row.get("status") not in _STATUSES:
            raise InvalidInput(f"status {row.get('status')!r} is not valid")
        if row.get("priority") not in _RANKS:
            raise InvalidInput(f"priority {row.get('priority')!r} is not valid")
        if row.get("issue_type") not in _TYPES:
            raise InvalidInput(f"issue_type {row.get('issue_type')!r} is not valid")
    elif kind == "comments":
        fields.comment(row.get("body"))  # type: ignore[arg-type]
    elif kind == "labels":
        fields.labels([row.get("name")])  # type: ignore[list-item]


# Copy.


def _copy(source: Database, target: Database, progress: CopyProgress | None) -> CopyReport:
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
                    if progress is not None:
                        progress(table.name, len(batch))
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
    return dates.iso(value) if isinstance(value, datetime) else str(value)


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
