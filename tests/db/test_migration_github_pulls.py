"""0007_github_pulls: upgrading a database with issues keeps them, and the new table holds
the pull request submit_pr records; downgrading drops only that table."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import inspect, text

from tests.db import upgrades
from workq.config import Settings
from workq.db import migrate
from workq.services.handle import Queue
from workq.services.runtime import open_database
from workq.services.sync import pulls

REVISION = "0007_github_pulls"


def test_upgrade_to_github_pulls_with_data(settings: Settings) -> None:
    db = open_database(settings)
    try:
        previous = upgrades.before(db, REVISION, "opened before the upgrade", "bug")
        assert "github_pulls" not in inspect(db.engine).get_table_names()

        migrate.upgrade(db, REVISION)
        # The services speak the newest schema: at this revision, plain SQL.
        with db.engine.begin() as conn:
            assert conn.execute(text("SELECT count(*) FROM github_pulls")).scalar() == 0
            conn.execute(
                text(
                    "INSERT INTO github_pulls (issue_id, number, repo, pr_number, url, branch,"
                    " opened_at) VALUES ('a1', 1, 'acme/widgets', 7, 'https://x/7', '1-fix',"
                    " :now)"
                ),
                {"now": datetime(2026, 1, 2, tzinfo=UTC)},
            )

        migrate.upgrade(db, "head")  # and on to the newest, where the services read it
        queue = Queue(db=db, lease_seconds=60)
        link = pulls.of_issue(queue, 1)
        assert link is not None and (link.pr_number, link.branch) == (7, "1-fix")
        assert [p.pr_number for p in pulls.unmerged(queue, "acme/widgets")] == [7]

        migrate.downgrade(db, previous)
        assert "github_pulls" not in inspect(db.engine).get_table_names()
        with db.engine.connect() as conn:
            row = conn.execute(text("SELECT title FROM issues WHERE number = 1")).one()
        assert row.title == "opened before the upgrade"
    finally:
        db.dispose()
