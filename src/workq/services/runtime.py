"""Opening a queue from settings: the engine, the schema check, the first migration."""

from __future__ import annotations

from workq.config import Settings
from workq.db import dialect
from workq.db.engine import Database
from workq.db.migrate import ensure_schema
from workq.services.handle import Queue
from workq.services.notices import outbox as notice_outbox
from workq.services.sync import outbox
from workq.services.workspaces import handoff, worktrees


def check_driver(settings: Settings) -> None:
    """Refuse now, not at the first call, a database whose driver is not installed."""
    dialect.require_driver(settings.url)


def open_database(settings: Settings) -> Database:
    """This process's Database for the settings' database (shared with any other part of
    the process that has the same SQLite file open: see ``Database.open``)."""
    return Database.open(
        settings.url,
        busy_timeout_ms=settings.busy_timeout_ms,
        synchronous=settings.synchronous,
        pool_size=settings.pool_size,
        max_overflow=settings.pool_max_overflow,
        pool_timeout_s=settings.pool_timeout_s,
        connect_timeout_s=settings.connect_timeout_s,
    )


def open_queue(settings: Settings, *, migrate: bool | None = None) -> Queue:
    """A ready-to-use queue. An embedded SQLite file is created and migrated on first use;
    a shared server database is migrated only when ``migrate`` says so."""
    db = open_database(settings)
    if migrate is None:
        migrate = settings.auto_migrate and db.is_sqlite
    try:
        ensure_schema(db, migrate=migrate)
    except BaseException:
        db.dispose()
        raise
    queue = Queue(
        db=db,
        lease_seconds=settings.lease_seconds,
        reservations=settings.reservations,
        tests_gate=settings.tests_gate,
        default_gates=settings.default_gates,
    )
    outbox.install(queue)  # feeds the GitHub mirror; writes nothing while none is configured
    worktrees.install(queue)  # a claim does not end leaving unmerged commits behind
    handoff.install(queue)  # a claim that ends unfinished leaves its work saved
    notice_outbox.install(queue)  # the events people asked to be told of queue a notice
    return queue
