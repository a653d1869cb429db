"""Migration 0009 (an issue's path globs) upgrades a database that has issues."""

from __future__ import annotations

from tests.conftest import ADMIN
from tests.db import upgrades
from workq.config import Settings
from workq.db import migrate
from workq.services.queue import issues
from workq.services.runtime import open_database, open_queue

REVISION = "0009_reserve_touches"


def test_touch_revision_upgrades_a_database_with_issues(settings: Settings) -> None:
    db = open_database(settings)
    try:
        upgrades.before(db, REVISION, "old")
        migrate.upgrade(db, REVISION)
        migrate.upgrade(db)
    finally:
        db.dispose()
    queue = open_queue(settings)
    try:
        assert issues.get(queue, 1).touches == []
        issues.update_issue(queue, 1, touches=["src/**"], by=ADMIN)
        assert issues.get(queue, 1).touches == ["src/**"]
    finally:
        queue.db.dispose()
