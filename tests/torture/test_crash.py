"""kill -9 at random moments of a mixed workload, through every door: after each kill the
database is intact, blocked counts equal the graph, no issue has two holders, every
acknowledged write is present; at the end every claim a dead worker left is taken again."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import PG_URL, drop_pg_database, fresh_pg_database
from tests.storage import assert_intact_at
from tests.torture.conftest import env_float, env_int, record, seed
from tests.torture.harness import Torture

# At least 100 kills in all, as issue 7 asks; each budget can be set by env var. Killing
# a `workq serve` costs ~4 s (its client notices, a new server starts and must write
# before it is a target again) against ~0.7 s for the others, so most kills are of the
# cheaper kinds; scripts/soak.py runs every kind for as long as it is asked to.
KILLS = {
    "service": env_int("WORKQ_TORTURE_SERVICE_KILLS", 78),
    "serve": env_int("WORKQ_TORTURE_SERVE_KILLS", 6),
    "client": env_int("WORKQ_TORTURE_CLIENT_KILLS", 4),
    "cli": env_int("WORKQ_TORTURE_CLI_KILLS", 12),
}
TIME_LIMIT = env_float("WORKQ_TORTURE_TIME_LIMIT", 300)
# On PostgreSQL (when WORKQ_TEST_PG_URL is set): the same torture, a smaller budget.
PG_KILLS = {
    "service": env_int("WORKQ_TORTURE_PG_SERVICE_KILLS", 22),
    "serve": env_int("WORKQ_TORTURE_PG_SERVE_KILLS", 2),
    "client": env_int("WORKQ_TORTURE_PG_CLIENT_KILLS", 2),
    "cli": env_int("WORKQ_TORTURE_PG_CLI_KILLS", 4),
}


@pytest.mark.slow
@pytest.mark.timeout(TIME_LIMIT + 120)
def test_kill_nine_at_random_moments_loses_nothing_and_hands_nothing_out_twice(
    tmp_path: Path,
) -> None:
    _torture(tmp_path, "crash", KILLS)


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.timeout(TIME_LIMIT + 120)
@pytest.mark.skipif(PG_URL is None, reason="WORKQ_TEST_PG_URL is not set: no PostgreSQL")
def test_kill_nine_on_postgresql(tmp_path: Path) -> None:
    assert PG_URL is not None
    url = fresh_pg_database(PG_URL)
    try:
        _torture(tmp_path, "crash-postgresql", PG_KILLS, url=url)
    finally:
        drop_pg_database(PG_URL, url)


def _torture(tmp_path: Path, section: str, kills: dict[str, int], url: str | None = None) -> None:
    chosen = seed()
    torture = Torture(tmp_path, seed=chosen, url=url)
    try:
        report = torture.run(kills, time_limit=TIME_LIMIT)
    finally:
        torture.checker.close()
    tally = report.tally
    record(section, [f"seed {chosen}", *report.lines()], report.figures())
    assert_intact_at(torture.url)  # everything stopped: the file, from a new connection
    assert not tally.crashes, tally.crashes[0]
    assert not tally.violations, "\n".join(tally.violations[:20])
    assert dict(report.kills) == {k: n for k, n in kills.items() if n}, "budget not spent"
    assert tally.lost_writes == 0 and tally.double_claims == 0
    assert tally.checks >= sum(kills.values())
    if url is None:
        assert tally.integrity_checks == tally.checks and not tally.damaged
    assert sum(tally.acked.values()) > 0
