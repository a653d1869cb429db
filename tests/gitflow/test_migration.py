"""Migration 0011_gitflow_issue_branches from the revision before it, with data, and back."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from alembic.script import ScriptDirectory
from sqlalchemy import text

from workq.config import Settings
from workq.db import migrate
from workq.services import checkouts, issues
from workq.services.context import Queue
from workq.services.runtime import open_database

REVISION = "0011_gitflow_issue_branches"


def test_upgrade_from_the_previous_revision_with_data_and_back(settings: Settings) -> None:
    db = open_database(settings)
    try:
        script = ScriptDirectory.from_config(migrate.alembic_config(db))
        previous = script.get_revision(REVISION).down_revision
        assert isinstance(previous, str)
        migrate.upgrade(db, previous)
        now = datetime(2026, 1, 1, tzinfo=UTC)
        with db.engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO issues (id, number, title, description, status, priority,"
                    " issue_type, agent, is_blocked, open_blockers, created_at, updated_at)"
                    " VALUES ('a1', 1, 'parse input', 'body', 'open', 1, 'bug', 'claude',"
                    " false, 0, :now, :now)"
                ),
                {"now": now},
            )
        migrate.upgrade(db, REVISION)
        queue = Queue(db)
        assert issues.get(queue, 1).title == "parse input"
        assert checkouts.of_issue(queue, 1) is None
        assert checkouts.link(queue, 1, "fix/1-parse-input", db_dir(settings), actor="run-a")
        found = checkouts.of_branch(queue, "fix/1-parse-input")
        assert found is not None and found.number == 1
        migrate.downgrade(db, previous)
        with db.engine.begin() as conn:
            assert conn.execute(text("SELECT title FROM issues")).scalar_one() == "parse input"
        migrate.upgrade(db)
        assert migrate.status(db).revision == migrate.HEAD
        assert checkouts.of_issue(Queue(db), 1) is None  # the downgrade dropped the links
    finally:
        db.dispose()


def db_dir(settings: Settings) -> Path:
    return settings.db_path.parent.resolve()
