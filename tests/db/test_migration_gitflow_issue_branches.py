"""Migration 0011_gitflow_issue_branches from the revision before it, with data, and back."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text

from tests.db import upgrades
from workq.config import Settings
from workq.db import migrate
from workq.domain.authority import Authority
from workq.domain.decisions import Action
from workq.services.handle import Queue
from workq.services.queue import issues
from workq.services.runtime import open_database
from workq.services.workspaces import checkouts

REVISION = "0011_gitflow_issue_branches"


def test_upgrade_from_the_previous_revision_with_data_and_back(settings: Settings) -> None:
    db = open_database(settings)
    try:
        previous = upgrades.before(db, REVISION, "parse input", "bug")
        migrate.upgrade(db, REVISION)
        with db.engine.begin() as conn:  # at this revision, plain SQL
            assert conn.execute(text("SELECT count(*) FROM issue_branches")).scalar() == 0
        migrate.upgrade(db)  # the services speak the newest schema
        queue = Queue(db)
        assert issues.get(queue, 1).title == "parse input"
        assert checkouts.of_issue(queue, 1) is None
        nobody = Authority.of(())  # issue 1 is not claimed: anyone may link it
        where = db_dir(settings)
        linked = checkouts.link(
            queue, 1, "fix/1-parse-input", where, by=nobody, action=Action.RESHAPE, actor="run-a"
        )
        assert linked
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
