"""Copying a whole queue from one database to another (SQLite <-> PostgreSQL), losslessly.

The copy is the engine-neutral export (every table, ids, numbers, counters and history kept)
read from one snapshot of the source and loaded into the target in one transaction. The
target must hold no issues and no history; it is migrated to the current schema first. The
source is never written to. Afterwards the target is exported again and must match the
source's export line for line, or the copy is reported as failed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from pydantic import BaseModel
from sqlalchemy import func, select

from workq.config import Settings
from workq.db import dialect, migrate
from workq.db.engine import Database
from workq.db.tables import events, issues
from workq.errors import InvalidInput, SchemaMismatch, StorageError
from workq.services.context import Queue
from workq.services.maintenance import export_lines, import_lines
from workq.services.runtime import open_database


class CopyReport(BaseModel):
    source: str
    target: str
    counts: dict[str, int]
    digest: str


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
            return _copy(Queue(db=source_db), Queue(db=target_db))
        finally:
            target_db.dispose()
    finally:
        source_db.dispose()


def _copy(source: Queue, target: Queue) -> CopyReport:
    sent = hashlib.sha256()
    counts = import_lines(target, _hashing(export_lines(source), sent.update))
    received = hashlib.sha256()
    for _ in _hashing(export_lines(target), received.update):
        pass
    if received.hexdigest() != sent.hexdigest():
        raise StorageError(
            "the copy does not match its source",
            hint="compare 'workq export' of both; empty the target and copy again",
            target=dialect.describe_url(target.db.url),
        )
    return CopyReport(
        source=dialect.describe_url(source.db.url),
        target=dialect.describe_url(target.db.url),
        counts=counts,
        digest=sent.hexdigest(),
    )


def _hashing(lines: Iterable[str], update: Callable[[bytes], None]) -> Iterator[str]:
    for line in lines:
        update(line.encode() + b"\n")
        yield line


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
            hint=f"bring it to head first: workq --database-url '{where}' db upgrade"
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
