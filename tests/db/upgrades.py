"""The first step of every migration's upgrade test: a database at the revision just before
the one under test, holding issue #1 (id ``a1``), written in plain SQL because the services
speak only the newest schema."""

from __future__ import annotations

from datetime import UTC, datetime

from alembic.script import ScriptDirectory
from sqlalchemy import text

from workq.db import migrate
from workq.db.engine import Database

MADE_AT = datetime(2026, 1, 1, tzinfo=UTC)
ISSUE = (
    "INSERT INTO issues (id, number, title, description, status, priority, issue_type, agent,"
    " is_blocked, open_blockers, created_at, updated_at) VALUES "
    "('a1', 1, :title, 'body', 'open', 1, :kind, 'claude', false, 0, :now, :now)"
)


def previous_of(db: Database, revision: str) -> str:
    script = ScriptDirectory.from_config(migrate.alembic_config(db))
    previous = script.get_revision(revision).down_revision
    assert isinstance(previous, str)
    return previous


def add_issue(db: Database, title: str, kind: str = "task") -> None:
    with db.engine.begin() as conn:
        conn.execute(text(ISSUE), {"title": title, "kind": kind, "now": MADE_AT})


def before(db: Database, revision: str, title: str, kind: str = "task") -> str:
    """Bring ``db`` to the revision before ``revision`` and add issue #1 titled ``title``;
    that previous revision."""
    previous = previous_of(db, revision)
    migrate.upgrade(db, previous)
    add_issue(db, title, kind)
    return previous
