"""0013_claims_have_leases: upgrading returns a half-made claim (in progress without a
lease) to the queue and keeps a whole one; afterwards the database refuses to hold an issue
in progress without a holder or lease; downgrading lifts only that guard."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from tests.db import upgrades
from workq.config import Settings
from workq.db import migrate
from workq.services.runtime import open_database

REVISION = "0013_claims_have_leases"
LEASE = datetime(2999, 1, 1, tzinfo=UTC)
HALF_MADE = "UPDATE issues SET status = 'in_progress', claimed_by = 'ghost', " + (
    "lease_expires_at = NULL WHERE number = :n"
)


def test_upgrade_to_claims_have_leases_with_data(settings: Settings) -> None:
    db = open_database(settings)
    try:
        previous = upgrades.before(db, REVISION, "half made")
        with db.engine.begin() as conn:
            conn.execute(
                text(upgrades.ISSUE.replace("'a1', 1,", "'a2', 2,")),
                {"title": "whole", "kind": "task", "now": upgrades.MADE_AT},
            )
            conn.execute(text(HALF_MADE), {"n": 1})
            conn.execute(
                text(
                    "UPDATE issues SET status = 'in_progress', claimed_by = 'run-a', "
                    "lease_expires_at = :until WHERE number = 2"
                ),
                {"until": LEASE},
            )

        migrate.upgrade(db, REVISION)
        with db.engine.connect() as conn:
            rows = conn.execute(
                text("SELECT number, status, claimed_by FROM issues ORDER BY number")
            ).all()
        assert [tuple(r) for r in rows] == [(1, "open", None), (2, "in_progress", "run-a")]
        for sql in (HALF_MADE, "UPDATE issues SET claimed_by = NULL WHERE number = :n"):
            with pytest.raises(IntegrityError), db.engine.begin() as conn:
                conn.execute(text(sql), {"n": 1 if sql == HALF_MADE else 2})

        migrate.downgrade(db, previous)
        with db.engine.begin() as conn:
            conn.execute(text(HALF_MADE), {"n": 1})  # no guard below this revision
    finally:
        db.dispose()
