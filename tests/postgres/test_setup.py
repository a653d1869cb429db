"""Choosing PostgreSQL by URL, migrating it on purpose only, and its own text search."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client
from sqlalchemy import text

from tests.server.conftest import text as result_text
from workq.config import Settings
from workq.db import dialect, migrate
from workq.db.engine import Database
from workq.errors import ConnectionLost, InvalidInput, SchemaMismatch, StorageError
from workq.server.app import build_server
from workq.services.handle import Queue
from workq.services.queue import issues, search
from workq.services.runtime import open_database, open_queue

MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations" / "versions"


def _state(settings: Settings) -> str:
    db = open_database(settings)
    try:
        return migrate.status(db).state
    finally:
        db.dispose()


def _workq(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "workq.cli.main", *args],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_plain_postgresql_urls_mean_psycopg_3(pg_url: str) -> None:
    plain = pg_url.replace("postgresql+psycopg://", "postgresql://")
    db = Database(plain)
    try:
        assert db.url.startswith("postgresql+psycopg://") and not db.is_sqlite
        assert migrate.status(db).state == "empty"
    finally:
        db.dispose()
    assert dialect.normalize_url("postgres://u:p@h/d") == "postgresql+psycopg://u:p@h/d"
    with pytest.raises(InvalidInput, match="SQLite or PostgreSQL, not mysql"):
        Database("mysql://u:p@h/d")


def test_wrong_password_and_unreachable_server_are_clear(pg_url: str) -> None:
    wrong = Database(pg_url.replace("workq:workq@", "workq:nope@"))
    with pytest.raises(StorageError, match="refused the connection") as refused:
        migrate.status(wrong)
    assert "password" in (refused.value.hint or "")
    wrong.dispose()
    nobody = Database("postgresql+psycopg://workq:workq@127.0.0.1:1/workq", connect_timeout_s=2)
    with pytest.raises(ConnectionLost):
        migrate.status(nobody)
    nobody.dispose()


def test_a_server_database_is_never_migrated_without_being_asked(pg_url: str) -> None:
    settings = Settings(database_url=pg_url, auto_migrate=True)
    with pytest.raises(SchemaMismatch) as refused:
        open_queue(settings)
    hint = refused.value.hint or ""
    assert "workq db upgrade" in hint and "WORKQ_DATABASE_URL=" in hint
    assert "workq:***@" in hint and "workq:workq@" not in hint
    assert _state(settings) == "empty"
    open_queue(settings, migrate=True).db.dispose()
    assert _state(settings) == "current"


def test_a_schema_ahead_of_the_code_is_refused(pg_queue: Queue, pg_url: str) -> None:
    with pg_queue.db.engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999_future'"))
    with pytest.raises(SchemaMismatch, match="newer than this workq"):
        open_queue(Settings(database_url=pg_url), migrate=True)


@pytest.mark.anyio
async def test_the_mcp_server_refuses_an_unmigrated_database_with_the_command(
    pg_url: str,
) -> None:
    async with Client(build_server(Settings(database_url=pg_url))) as client:
        result = await client.call_tool("issue_list", {})
    assert result.is_error
    assert "SCHEMA_MISMATCH" in result_text(result)
    assert "workq db upgrade" in result_text(result)
    async with Client(build_server(Settings(database_url=pg_url), migrate=True)) as client:
        result = await client.call_tool("issue_create", {"title": "served from PostgreSQL"})
    assert not result.is_error, result_text(result)


def test_db_upgrade_by_url_and_by_environment(pg_url: str) -> None:
    done = _workq("--database-url", pg_url, "db", "upgrade")
    assert done.returncode == 0, done.stderr
    assert f"({migrate.HEAD})" in done.stdout or migrate.HEAD in done.stdout
    down = _workq("db", "downgrade", migrate.REVISIONS[0], env={"WORKQ_DATABASE_URL": pg_url})
    assert down.returncode == 0, down.stderr
    check = _workq("db", "check", env={"WORKQ_DATABASE_URL": pg_url})
    assert check.returncode == 1 and "behind" in check.stderr
    again = _workq("db", "upgrade", env={"WORKQ_DATABASE_URL": pg_url})
    assert again.returncode == 0, again.stderr
    wrong = _workq("--database-url", pg_url, "db", "downgrade", "no_such_revision")
    assert wrong.returncode == 1 and "INVALID_INPUT" in wrong.stderr
    assert "Traceback" not in wrong.stderr and "0001_initial" in wrong.stderr


@pytest.mark.slow
def test_servers_migrating_at_once_take_turns(pg_url: str) -> None:
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "workq.cli.main", "--database-url", pg_url, "db", "upgrade"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    assert _state(Settings(database_url=pg_url)) == "current"


def test_search_uses_postgresql_text_search_and_its_index(pg_queue: Queue) -> None:
    issues.create(pg_queue, title="Fix the login page", description="users cannot sign in")
    issues.create(pg_queue, title="Login audit", description="log every attempt")
    issues.create(pg_queue, title="Unrelated")
    hits = search.search(pg_queue, "log")
    assert sorted(h.number for h in hits.items) == [1, 2]
    assert "[" in hits.items[0].snippet  # matches are marked, as FTS5 does
    assert [h.number for h in search.search(pg_queue, "sign login").items] == [1]
    with pg_queue.db.engine.begin() as conn:
        conn.execute(text("SET LOCAL enable_seqscan = off"))
        plan = "\n".join(
            row[0]
            for row in conn.execute(
                text(
                    f"EXPLAIN SELECT number FROM issues WHERE {dialect.SEARCH_DOCUMENT} @@ "
                    "to_tsquery('simple', 'log:*')"
                )
            )
        )
    assert "ix_issues_search" in plan


def test_the_migration_indexes_exactly_what_search_queries() -> None:
    source = (MIGRATIONS / "0003_pg_search.py").read_text()
    assert f'_DOCUMENT = "{dialect.SEARCH_DOCUMENT}"' in source


def test_pool_bounds_come_from_settings(pg_url: str) -> None:
    db = open_database(
        Settings(database_url=pg_url, pool_size=3, pool_max_overflow=1, pool_timeout_s=2.5)
    )
    try:
        pool = db.engine.pool
        assert pool.size() == 3  # type: ignore[attr-defined]
        assert pool._max_overflow == 1  # type: ignore[attr-defined]
        assert pool._timeout == 2.5  # type: ignore[attr-defined]
        with db.engine.connect() as conn:
            name = conn.execute(text("SHOW application_name")).scalar()
            lock_timeout = conn.execute(text("SHOW lock_timeout")).scalar()
        assert name == "workq" and lock_timeout == "10s"
    finally:
        db.dispose()
