"""Shared fixtures: a real database per test (a SQLite file, or PostgreSQL when configured).

Set WORKQ_TEST_PG_URL (e.g. postgresql+psycopg://workq:workq@127.0.0.1:5432/workq) to run
every test that takes ``queue`` against both engines. ``.ci/run`` does.

Each test process migrates one template database per engine, once; a test gets a copy of it
(the SQLite file copied, ``CREATE DATABASE ... TEMPLATE`` on PostgreSQL), a few milliseconds
where migrating costs tens. The migrations themselves are tested in tests/db.
"""

from __future__ import annotations

import functools
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import ProgrammingError

from workq.config import Settings
from workq.domain.authority import Authority
from workq.services.handle import Queue
from workq.services.runtime import open_queue

# Hypothesis's per-example deadline (200 ms by default) is a timing assertion: on 2 busy
# cores a pure function's example took 263 ms in CI. Time is measured by benchmarks.
hypothesis_settings.register_profile("workq", deadline=None)
hypothesis_settings.load_profile("workq")

PG_URL = os.environ.get("WORKQ_TEST_PG_URL")
# An admin's override, for tests whose subject is not who may act.
ADMIN = Authority.overriding("tests", who="tester")
ENGINES = ["sqlite", "postgresql"] if PG_URL else ["sqlite"]


def pytest_report_header() -> str:
    """Said before the first dot: the first minutes are the slow tests'."""
    return (
        "workq: the tests marked slow (benchmarks at toy size, storms, races, kill -9, the "
        "package build) run first, so the first minutes' dots come slowly; -m 'not slow' "
        "leaves them out"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests marked slow (storms, races, many processes) go first, shared out among the
    workers, so that none of them is left running alone at the end. pytest-xdist's
    worksteal gives each of its N workers one contiguous block of the collection to start
    with: each block here begins with every Nth slow test."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    slow = [item for item in items if item.get_closest_marker("slow")]
    rest = iter([item for item in items if not item.get_closest_marker("slow")])
    ordered: list[pytest.Item] = []
    for block in range(workers):
        size = len(items) // workers + (block < len(items) % workers)
        mine = slow[block::workers]
        ordered += mine + [item for _, item in zip(range(size - len(mine)), rest, strict=False)]
    ordered += rest
    items[:] = ordered


class FakeClock:
    """A clock the test moves by hand, so lease expiry needs no sleeping."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture(autouse=True)
def _in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test starts in its own folder: the CLI run in-process, an in-process server and
    anything else that uses the working directory (plan files, the server's checkout) work
    there, never in this repository."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def trusted_tests_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    """For tests whose subject is not the tests gate (services/coding/gates.py): a claim of
    testsPassed=true, or a merge, is trusted instead of asking for gate evidence. Reaches
    what reads the environment (Settings, the in-process CLI, servers started with this
    environment); servers started through the SDK's stdio client pass --tests-gate."""
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


@functools.cache
def _admin(base_url: str) -> Engine:
    """One engine per test process for creating and dropping databases: its connection is
    kept between tests (a new one costs a connection start and password exchange)."""
    return create_engine(base_url, isolation_level="AUTOCOMMIT", pool_size=1, pool_pre_ping=True)


@functools.cache
def _copy_strategy(base_url: str) -> str:
    # FILE_COPY copies the template's few megabytes of files where the default (WAL_LOG,
    # PostgreSQL 15 and later) writes them through the WAL: ~30% less per test database.
    with _admin(base_url).connect() as conn:
        version = conn.execute(text("SHOW server_version_num")).scalar_one()
    return " STRATEGY = FILE_COPY" if int(version) >= 150000 else ""


def fresh_pg_database(base_url: str, *, template: str | None = None) -> str:
    """A new database on the test server, empty or a copy of ``template`` (a database
    name); returns its URL."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    copy = f' TEMPLATE "{template}"{_copy_strategy(base_url)}' if template else ""
    with _admin(base_url).connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"{copy}'))
    return base_url.rsplit("/", 1)[0] + f"/{name}"


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated to head, made once per test process; copy it, never open it."""
    path = tmp_path_factory.mktemp("template") / "template.db"
    open_queue(Settings(db_path=path), migrate=True).db.dispose()
    return path


def migrated_sqlite(template: Path, path: Path) -> Path:
    """``path``, a copy of the migrated template (a new, empty queue at head)."""
    shutil.copyfile(template, path)
    return path


@pytest.fixture(scope="session")
def pg_template() -> Iterator[str | None]:
    """The name of a database migrated to head on the test server, made once per test
    process (None without PostgreSQL); ``fresh_pg_database(..., template=...)`` copies it."""
    if PG_URL is None:
        yield None
        return
    url = fresh_pg_database(PG_URL)
    open_queue(Settings(database_url=url), migrate=True).db.dispose()
    try:
        yield url.rsplit("/", 1)[1]
    finally:
        drop_pg_database(PG_URL, url)


def drop_pg_database(base_url: str, url: str) -> None:
    name = url.rsplit("/", 1)[1]
    drop = text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    with _admin(base_url).connect() as conn:
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


@contextmanager
def database(engine: str, path: Path, *, template: Path | str | None) -> Iterator[Settings]:
    """Settings (lease 60 s) for a new database on ``engine``: a SQLite file at ``path`` or
    a database on the PostgreSQL test server, a copy of ``template`` or else empty."""
    if engine == "sqlite":
        if template is not None:
            migrated_sqlite(Path(template), path)
        yield Settings(db_path=path, lease_seconds=60)
        return
    assert PG_URL is not None
    url = fresh_pg_database(PG_URL, template=None if template is None else str(template))
    try:
        yield Settings(database_url=url, lease_seconds=60)
    finally:
        drop_pg_database(PG_URL, url)


@pytest.fixture(params=ENGINES)
def settings(
    request: pytest.FixtureRequest, db_path: Path, sqlite_template: Path, pg_template: str | None
) -> Iterator[Settings]:
    """A queue's settings, lease 60 s, on a new database already at head."""
    template = sqlite_template if request.param == "sqlite" else pg_template
    with database(request.param, db_path, template=template) as found:
        yield found


@pytest.fixture
def queue(settings: Settings, clock: FakeClock) -> Iterator[Queue]:
    q = open_queue(settings, migrate=True)
    q.clock = clock
    yield q
    q.db.dispose()
