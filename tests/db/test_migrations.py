"""Migrations: they build exactly the models' schema, and every step keeps the data."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text

from workq.config import Settings
from workq.db import migrate
from workq.db.engine import Database
from workq.db.models import metadata
from workq.domain.authority import Authority
from workq.errors import SchemaMismatch
from workq.services.queue import claims, issues
from workq.services.runtime import open_database, open_queue


def _include(obj: object, name: str | None, type_: str, reflected: bool, other: object) -> bool:
    # The full-text index is a virtual table with shadow tables, managed by migrations only;
    # on PostgreSQL, an index on an expression (0003_pg_search).
    if type_ == "index" and name == "ix_issues_search":
        return False
    return not (type_ == "table" and name is not None and name.startswith("issues_fts"))


def test_revision_list_matches_alembic(settings: Settings) -> None:
    db = open_database(settings)
    try:
        script = ScriptDirectory.from_config(migrate.alembic_config(db))
        ordered = [r.revision for r in reversed(list(script.walk_revisions()))]
        assert tuple(ordered) == migrate.REVISIONS
        assert script.get_current_head() == migrate.HEAD
    finally:
        db.dispose()


def test_migrations_produce_exactly_the_models(settings: Settings) -> None:
    db = open_database(settings)
    try:
        migrate.upgrade(db)
        with db.engine.connect() as conn:
            context = MigrationContext.configure(
                conn, opts={"compare_type": True, "include_object": _include}
            )
            diff = compare_metadata(context, metadata)
        assert diff == []
    finally:
        db.dispose()


SEED = (
    "INSERT INTO issues (id, number, title, description, status, priority, issue_type, agent,"
    " is_blocked, open_blockers, created_at, updated_at) VALUES "
    "('a1', 1, 'kept across migrations', 'body', 'open', 1, 'bug', 'claude', false, 0,"
    " :now, :now)"
)


@pytest.mark.parametrize("step", range(1, len(migrate.REVISIONS)))
def test_each_step_up_and_down_keeps_the_data(settings: Settings, step: int) -> None:
    previous, current = migrate.REVISIONS[step - 1], migrate.REVISIONS[step]
    db = open_database(settings)
    try:
        migrate.upgrade(db, previous)
        with db.engine.begin() as conn:
            conn.execute(text(SEED), {"now": datetime(2026, 1, 1, tzinfo=UTC)})
        migrate.upgrade(db, current)
        assert migrate.status(db).revision == current
        migrate.downgrade(db, previous)
        assert migrate.status(db).revision == previous
        migrate.upgrade(db)
        with db.engine.connect() as conn:
            row = conn.execute(text("SELECT title, description FROM issues")).one()
        assert tuple(row) == ("kept across migrations", "body")
    finally:
        db.dispose()


def test_initial_revision_up_and_down_with_data(settings: Settings) -> None:
    queue = open_queue(settings, migrate=True)
    try:
        issues.create(queue, title="x")
        migrate.downgrade(queue.db, "base")
        assert migrate.status(queue.db).state == "empty"
        migrate.upgrade(queue.db)
        assert migrate.status(queue.db).state == "current"
    finally:
        queue.db.dispose()


def test_embedded_file_is_created_and_migrated_on_first_use(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    queue = open_queue(Settings(db_path=path))
    try:
        assert path.exists()
        assert migrate.status(queue.db).state == "current"
        assert issues.create(queue, title="first").number == 1
    finally:
        queue.db.dispose()


def test_a_database_newer_than_the_code_is_refused(tmp_path: Path) -> None:
    settings = Settings(db_path=tmp_path / "new.db")
    open_queue(settings).db.dispose()
    db = Database(settings.url)
    with db.engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999_future'"))
    db.dispose()
    with pytest.raises(SchemaMismatch, match="newer than this workq"):
        open_queue(settings)


def test_a_foreign_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    db = Database(f"sqlite:///{path}")
    with db.engine.begin() as conn:
        conn.execute(text("CREATE TABLE customers (id INTEGER)"))
    db.dispose()
    with pytest.raises(SchemaMismatch, match="not workq's"):
        open_queue(Settings(db_path=path))


@pytest.mark.skipif(len(migrate.REVISIONS) < 2, reason="needs two revisions")
def test_a_database_behind_is_not_migrated_without_consent(settings: Settings) -> None:
    db = open_database(settings)
    try:
        migrate.upgrade(db, migrate.REVISIONS[-2])
        with pytest.raises(SchemaMismatch, match="behind") as refused:
            migrate.ensure_schema(db, migrate=False)
        assert "workq db upgrade" in (refused.value.hint or "")
        assert migrate.ensure_schema(db, migrate=True).state == "current"
    finally:
        db.dispose()


def test_fence_revision_gives_live_claims_a_token(settings: Settings) -> None:
    db = open_database(settings)
    try:
        script = ScriptDirectory.from_config(migrate.alembic_config(db))
        previous = script.get_revision("0006_wait_fence").down_revision
        assert isinstance(previous, str)
        migrate.upgrade(db, previous)
        now = datetime(2026, 1, 1, tzinfo=UTC)
        with db.engine.begin() as conn:
            conn.execute(text(SEED), {"now": now})
            conn.execute(text(SEED.replace("'a1', 1", "'a2', 2")), {"now": now})
            conn.execute(
                text(
                    "UPDATE issues SET status = 'in_progress', claimed_by = 'run-a',"
                    " claimed_at = :now, lease_expires_at = :until WHERE number = 2"
                ),
                # A live lease: a lapsed one is not renewed (it is claimed again).
                {"now": now, "until": datetime.now(UTC) + timedelta(hours=1)},
            )
        migrate.upgrade(db, "0006_wait_fence")
        with db.engine.connect() as conn:
            fences = conn.execute(text("SELECT number, fence FROM issues ORDER BY number"))
            assert [tuple(r) for r in fences] == [(1, 0), (2, 1)]
        migrate.upgrade(db)
    finally:
        db.dispose()
    queue = open_queue(settings)
    try:
        # The claim from before the upgrade works without a token and with its token 1.
        claims.heartbeat(queue, 2, Authority.of({"run-a"}, fence=1))
        assert claims.claim(queue, 1, Authority.of({"run-b"})).fence == 1
    finally:
        queue.db.dispose()
