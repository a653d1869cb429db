"""Migration 0008_agit from the revision before it, with data, and back: issues keep their
rows and their full-text search (the downgrade drops the column natively, so the search
triggers on issues survive)."""

from __future__ import annotations

from sqlalchemy import text

from tests.db import upgrades
from workq.config import Settings
from workq.db import migrate
from workq.services.handle import Queue
from workq.services.queue import search
from workq.services.runtime import open_database

REVISION = "0008_agit"


def test_upgrade_from_the_previous_revision_with_data_and_back(settings: Settings) -> None:
    db = open_database(settings)
    try:
        previous = upgrades.before(db, REVISION, "parser crash", "bug")
        now = upgrades.MADE_AT
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
