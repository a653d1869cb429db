"""Migration 0008_agit from the revision before it, with data, and back: issues keep their
rows and their full-text search (the downgrade drops the column natively, so the search
triggers on issues survive)."""

from __future__ import annotations

from datetime import UTC, datetime

from alembic.script import ScriptDirectory
from sqlalchemy import text

from workq.config import Settings
from workq.db import migrate
from workq.services import search
from workq.services.context import Queue
from workq.services.runtime import open_database

REVISION = "0008_agit"


def test_upgrade_from_the_previous_revision_with_data_and_back(settings: Settings) -> None:
    db = open_database(settings)
    try:
        script = ScriptDirectory.from_config(migrate.alembic_config(db))
        previous = script.get_revision(REVISION).down_revision
        assert isinstance(previous, str)
        migrate.upgrade(db, previous)
        now = datetime(2026, 1, 1, tzinfo=UTC)
        with db.engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO issues (id, number, title, description, status, priority,"
                    " issue_type, agent, is_blocked, open_blockers, created_at, updated_at)"
                    " VALUES ('a1', 1, 'parser crash', 'body', 'open', 1, 'bug', 'claude',"
                    " false, 0, :now, :now)"
                ),
                {"now": now},
            )
        migrate.upgrade(db, REVISION)
        with db.engine.begin() as conn:
            assert conn.execute(text("SELECT repository FROM issues")).scalar_one() is None
            conn.execute(
                text(
                    "INSERT INTO repositories (name, path, default_branch, worktree_dir,"
                    " auto_worktree, merge_mode, created_at)"
                    " VALUES ('app', '/r', 'main', '/r/.worktrees', false, 'merge', :now)"
                ),
                {"now": now},
            )
            conn.execute(text("UPDATE issues SET repository = 'app'"))
            conn.execute(
                text(
                    "INSERT INTO worktrees (id, repository, issue_id, number, path, branch,"
                    " base_commit, state, created_at, updated_at) VALUES ('w1', 'app', 'a1', 1,"
                    " '/r/.worktrees/bug-1', 'bug/1-parser-crash', 'abc', 'active', :now, :now)"
                ),
                {"now": now},
            )
            conn.execute(
                text(
                    "INSERT INTO agents (id, name, agent_type, created_at, last_seen_at)"
                    " VALUES ('agent-1', 'claude-1', 'claude', :now, :now)"
                ),
                {"now": now},
            )
        queue = Queue(db)
        assert [h.number for h in search.search(queue, "parser").items] == [1]
        migrate.downgrade(db, previous)
        with db.engine.begin() as conn:
            conn.execute(text("UPDATE issues SET title = 'lexer crash'"))
            row = conn.execute(text("SELECT title, description FROM issues")).one()
        assert tuple(row) == ("lexer crash", "body")
        assert [h.number for h in search.search(queue, "lexer").items] == [1]
        assert search.search(queue, "parser").items == []
        migrate.upgrade(db)
        assert migrate.status(db).revision == migrate.HEAD
    finally:
        db.dispose()
