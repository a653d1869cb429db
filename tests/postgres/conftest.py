"""PostgreSQL-only tests: skipped unless WORKQ_TEST_PG_URL names a server.

Start one with ``eval "$(scripts/pg_start.sh)"`` (``.ci/run`` does). The fault tests start
private servers of their own, so that crashing one never disturbs the shared server.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.conftest import drop_pg_database, fresh_pg_database
from tests.postgres.servers import FaultProxy, PrivateServer
from workq.config import Settings
from workq.services.handle import Queue
from workq.services.runtime import open_queue

PG_URL = os.environ.get("WORKQ_TEST_PG_URL")
SKIP_REASON = (
    "WORKQ_TEST_PG_URL is not set: start a throwaway server with "
    'eval "$(scripts/pg_start.sh)" to run the PostgreSQL tests'
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.path).startswith(here):
            item.add_marker(pytest.mark.postgres)
            if not PG_URL:
                item.add_marker(pytest.mark.skip(reason=SKIP_REASON))


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A new, empty database on the shared test server."""
    assert PG_URL is not None
    url = fresh_pg_database(PG_URL)
    try:
        yield url
    finally:
        drop_pg_database(PG_URL, url)


@pytest.fixture
def pg_queue(pg_url: str) -> Iterator[Queue]:
    queue = open_queue(Settings(database_url=pg_url), migrate=True)
    try:
        yield queue
    finally:
        queue.db.dispose()


@pytest.fixture(scope="session")
def private_server() -> Iterator[PrivateServer]:
    server = PrivateServer()
    try:
        server.start()
        yield server
    finally:
        server.remove()


@pytest.fixture
def private_db(private_server: PrivateServer) -> Iterator[str]:
    """A new database on the private server (started again if a test crashed it)."""
    base = private_server.start()
    url = fresh_pg_database(base)
    try:
        yield url
    finally:
        private_server.start()
        drop_pg_database(base, url)


@pytest.fixture
def proxy(private_server: PrivateServer) -> Iterator[FaultProxy]:
    base = private_server.start()
    port = int(base.rsplit(":", 1)[1].split("/", 1)[0])
    faults = FaultProxy(port)
    try:
        yield faults
    finally:
        faults.close()
