"""0012_run_bindings: upgrading a database with a live claim keeps it, and a server can
bind run ids afterwards; downgrading drops only the new table."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text

from tests.db import upgrades
from workq.config import Settings
from workq.db import migrate
from workq.domain.authority import Authority
from workq.errors import RunIdInUse
from workq.services.handle import Queue
from workq.services.queue import claims, run_ids
from workq.services.runtime import open_database

REVISION = "0012_run_bindings"


def test_upgrade_to_run_bindings_with_data(settings: Settings) -> None:
    db = open_database(settings)
    try:
        previous = upgrades.before(db, REVISION, "claimed before the upgrade")
        assert "run_bindings" not in inspect(db.engine).get_table_names()

        migrate.upgrade(db, "head")
        queue = Queue(db=db, lease_seconds=60)
        claims.claim(queue, 1, Authority.of({"autopilot_main"}))
        run_ids.bind(queue, "autopilot_main", "host-a:1:aa")
        with pytest.raises(RunIdInUse):
            run_ids.bind(queue, "autopilot_main", "host-b:2:bb")

        migrate.downgrade(db, previous)
        assert "run_bindings" not in inspect(db.engine).get_table_names()
        with db.engine.connect() as conn:
            row = conn.execute(text("SELECT title, claimed_by FROM issues WHERE number = 1")).one()
        assert tuple(row) == ("claimed before the upgrade", "autopilot_main")
    finally:
        db.dispose()
