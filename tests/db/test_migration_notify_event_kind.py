"""0014_notify_event_kind: on PostgreSQL the trigger's NOTIFY carries the event's kind after
the upgrade and nothing after the downgrade; on SQLite nothing changes. Data stays."""

from __future__ import annotations

import psycopg
from sqlalchemy import text

from tests.db import upgrades
from workq.config import Settings
from workq.db import migrate
from workq.db.engine import Database
from workq.services.runtime import open_database

REVISION = "0014_notify_event_kind"
EVENT = (
    "INSERT INTO events (issue_id, number, kind, actor, created_at) "
    "VALUES ('a1', 1, :kind, 'test', :now)"
)


def payloads(db: Database, kind: str) -> list[str]:
    """What a listener is told when an event of ``kind`` is written."""
    url = db.engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(url, autocommit=True) as listener:
        listener.execute("LISTEN workq_changes")
        with db.engine.begin() as conn:
            conn.execute(text(EVENT), {"kind": kind, "now": upgrades.MADE_AT})
        return [n.payload for n in listener.notifies(timeout=5, stop_after=1)]


def test_upgrade_to_notify_event_kind_with_data(settings: Settings) -> None:
    db = open_database(settings)
    try:
        previous = upgrades.before(db, REVISION, "written before the upgrade")
        postgres = db.dialect == "postgresql"
        if postgres:
            assert payloads(db, "created") == [""]
        migrate.upgrade(db, "head")
        if postgres:
            assert payloads(db, "claimed") == ["claimed"]
        migrate.downgrade(db, previous)
        if postgres:
            assert payloads(db, "created") == [""]
        with db.engine.connect() as conn:
            title = conn.execute(text("SELECT title FROM issues WHERE number = 1")).scalar()
        assert title == "written before the upgrade"
    finally:
        db.dispose()
