"""0010_gates from the revision before it, with data: issues keep their rows, the new table
holds gate runs the services read as evidence, and the downgrade drops only that table."""

from __future__ import annotations

import json

from sqlalchemy import inspect, text

from tests.db import upgrades
from workq.config import Settings
from workq.db import migrate
from workq.services.coding import gates
from workq.services.handle import Queue
from workq.services.runtime import open_database

REVISION = "0010_gates"
RUN = (
    "INSERT INTO gate_runs (issue_id, number, commit_sha, dirty, whole_checkout, gate, gate_number,"
    " tests, passed, score, issues_found, tests_passed, tests_failed, tests_errors, exit_code,"
    " timed_out, summary, started_at, finished_at, actor) VALUES ('a1', 1, :sha, false, true,"
    " 'tests', 1, true, true, '10/10', 0, 3, 0, 0, 0, false, :summary, :now, :now, 'agent-a')"
)


def test_upgrade_to_gates_with_data_and_back(settings: Settings) -> None:
    db = open_database(settings)
    try:
        previous = upgrades.before(db, REVISION, "made before the gates")
        now = upgrades.MADE_AT
        assert "gate_runs" not in inspect(db.engine).get_table_names()

        migrate.upgrade(db, REVISION)
        with db.engine.begin() as conn:
            summary = json.dumps({"issues": [], "error": None, "output": ""})
            conn.execute(text(RUN), {"sha": "c" * 40, "summary": summary, "now": now})

        migrate.upgrade(db, "head")
        queue = Queue(db=db, lease_seconds=60)
        (run,) = gates.evidence(queue, 1)
        assert (run.commit, run.gate, run.passed, run.tests_passed) == ("c" * 40, "tests", True, 3)

        migrate.downgrade(db, previous)
        assert "gate_runs" not in inspect(db.engine).get_table_names()
        with db.engine.connect() as conn:
            row = conn.execute(text("SELECT title FROM issues WHERE number = 1")).one()
        assert row.title == "made before the gates"
    finally:
        db.dispose()
