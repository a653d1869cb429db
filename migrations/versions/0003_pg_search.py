"""PostgreSQL's full-text index over issue titles and descriptions.

A GIN index on the expression ``dialect.SEARCH_DOCUMENT``, which the search query repeats
verbatim. On SQLite this revision does nothing (0002_search built the FTS5 index there).

Revision ID: 0003_pg_search
Revises: 0002_search
Create Date: 2026-11-22
"""

from __future__ import annotations

from alembic import op

revision = "0003_pg_search"
down_revision = "0002_search"
branch_labels = None
depends_on = None

# Kept equal to workq.db.dialect.SEARCH_DOCUMENT (a test checks it): a migration must not
# change when the code does.
_DOCUMENT = "to_tsvector('simple', title || ' ' || description)"


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(f"CREATE INDEX ix_issues_search ON issues USING gin (({_DOCUMENT}))")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP INDEX IF EXISTS ix_issues_search")
