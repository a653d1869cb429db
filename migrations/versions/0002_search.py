"""Full-text search over issue titles and descriptions.

On SQLite: an FTS5 table ``issues_fts`` with external content (the ``issues`` table, keyed
by ``number``, which is unique and never reused), kept in step by three triggers and
filled from the existing rows on upgrade. It is not one of the models: the table and its
shadow tables (``issues_fts_data``, ``_idx``, ``_docsize``, ``_config``) are skipped by
``include_object`` in ``migrations/env.py`` when migrations are compared with the models.

A later migration that rebuilds ``issues`` in batch mode drops these triggers with the
old table: it must create them again (copy ``_TRIGGERS``) and rebuild the index.

On PostgreSQL this revision does nothing; search there falls back to ILIKE.

Revision ID: 0002_search
Revises: 0001_initial
Create Date: 2026-11-22
"""

from __future__ import annotations

from alembic import op

revision = "0002_search"
down_revision = "0001_initial"
branch_labels = None
depends_on = None

_TABLE = (
    "CREATE VIRTUAL TABLE issues_fts USING fts5("
    "title, description, content='issues', content_rowid='number', "
    "tokenize='unicode61 remove_diacritics 2')"
)
_TRIGGERS = {
    "issues_fts_insert": (
        "CREATE TRIGGER issues_fts_insert AFTER INSERT ON issues BEGIN "
        "INSERT INTO issues_fts(rowid, title, description) "
        "VALUES (new.number, new.title, new.description); END"
    ),
    "issues_fts_delete": (
        "CREATE TRIGGER issues_fts_delete AFTER DELETE ON issues BEGIN "
        "INSERT INTO issues_fts(issues_fts, rowid, title, description) "
        "VALUES ('delete', old.number, old.title, old.description); END"
    ),
    # Only edits of the indexed columns touch the index: claims and completions do not.
    "issues_fts_update": (
        "CREATE TRIGGER issues_fts_update AFTER UPDATE OF number, title, description "
        "ON issues BEGIN "
        "INSERT INTO issues_fts(issues_fts, rowid, title, description) "
        "VALUES ('delete', old.number, old.title, old.description); "
        "INSERT INTO issues_fts(rowid, title, description) "
        "VALUES (new.number, new.title, new.description); END"
    ),
}


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    op.execute(_TABLE)
    for ddl in _TRIGGERS.values():
        op.execute(ddl)
    op.execute("INSERT INTO issues_fts(issues_fts) VALUES ('rebuild')")


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for name in _TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS {name}")
    op.execute("DROP TABLE IF EXISTS issues_fts")
