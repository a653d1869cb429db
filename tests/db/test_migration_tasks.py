"""0017_tasks: the tasks table comes with the upgrade (a task can be written and read back,
its big ttl and its flags too) and goes with the downgrade; the issues stay."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.exc import DBAPIError

from tests.db import upgrades
from workq.config import Settings
from workq.db import migrate
from workq.services.runtime import open_database

REVISION = "0017_tasks"
TASK = (
    "INSERT INTO tasks (id, owner, kind, arguments, status, created_at, updated_at, ttl_ms,"
    " poll_interval_ms, number, fence) VALUES ('t1', 'run-a', 'claim_next', '{}', 'completed',"
    " :now, :now, :ttl, 1000, 1, 1)"
)


def test_upgrade_to_tasks_with_data(settings: Settings) -> None:
    db = open_database(settings)
    try:
        previous = upgrades.before(db, REVISION, "written before the upgrade")
        assert "tasks" not in inspect(db.engine).get_table_names()
        migrate.upgrade(db, "head")
        with db.engine.begin() as conn:
            conn.execute(text(TASK), {"now": upgrades.MADE_AT, "ttl": 2**40})
            found = conn.execute(
                text("SELECT owner, ttl_ms, released, read_at, number FROM tasks")
            ).one()
        assert tuple(found) == ("run-a", 2**40, False, None, 1)
        with pytest.raises(DBAPIError), db.engine.begin() as conn:  # one row per task id
            conn.execute(text(TASK), {"now": upgrades.MADE_AT, "ttl": 1})
        migrate.downgrade(db, previous)
        assert "tasks" not in inspect(db.engine).get_table_names()
        with db.engine.connect() as conn:
            title = conn.execute(text("SELECT title FROM issues WHERE number = 1")).scalar()
        assert title == "written before the upgrade"
    finally:
        db.dispose()
