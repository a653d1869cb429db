"""Shared fixtures: a real database per test (a SQLite file, or PostgreSQL when configured).

Set WORKQ_TEST_PG_URL (e.g. postgresql+psycopg://workq:workq@127.0.0.1:5432/workq) to run
every test that takes ``queue`` against both engines. ``.ci/run`` does.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import ProgrammingError

from workq.config import Settings
from workq.services.context import Queue
from workq.services.runtime import open_queue

PG_URL = os.environ.get("WORKQ_TEST_PG_URL")
ENGINES = ["sqlite", "postgresql"] if PG_URL else ["sqlite"]


class FakeClock:
    """A clock the test moves by hand, so lease expiry needs no sleeping."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture(autouse=True)
def _trust_the_tests_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite predates the tests gate (services/gates.py): a test that claims
    testsPassed=true or merges is trusted unless it asks for evidence (WORKQ_TESTS_GATE,
    Settings(tests_gate=...), serve --tests-gate). Servers started through the SDK's
    stdio client do not inherit this environment: they pass --tests-gate."""
    monkeypatch.setenv("WORKQ_TESTS_GATE", "trust")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "workq.db"


@pytest.fixture(scope="session")
def pg_admin_url() -> str | None:
    return PG_URL


def fresh_pg_database(base_url: str) -> str:
    """A new empty database on the test server; returns its URL."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return base_url.rsplit("/", 1)[0] + f"/{name}"


def drop_pg_database(base_url: str, url: str) -> None:
    name = url.rsplit("/", 1)[1]
    admin = create_engine(base_url, isolation_level="AUTOCOMMIT")
    drop = text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    try:
        with admin.connect() as conn:
            # FORCE cannot end an autovacuum worker (not ours): wait for it to finish.
            for _ in range(100):
                try:
                    conn.execute(drop)
                    return
                except ProgrammingError as exc:
                    if "must be a member of the role" not in str(exc):
                        raise
                    time.sleep(0.1)
            conn.execute(drop)
    finally:
        admin.dispose()


@pytest.fixture(params=ENGINES)
def settings(request: pytest.FixtureRequest, db_path: Path) -> Iterator[Settings]:
    if request.param == "sqlite":
        yield Settings(db_path=db_path, lease_seconds=60)
        return
    assert PG_URL is not None
    url = fresh_pg_database(PG_URL)
    try:
        yield Settings(database_url=url, lease_seconds=60)
    finally:
        drop_pg_database(PG_URL, url)


@pytest.fixture
def queue(settings: Settings, clock: FakeClock) -> Iterator[Queue]:
    q = open_queue(settings, migrate=True)
    q.clock = clock
    yield q
    q.db.dispose()
