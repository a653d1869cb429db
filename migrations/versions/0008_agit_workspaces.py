"""Agent workspaces (contract D, agit): registered repositories, an issue's repository, a git
worktree per claimed issue, and registered agents.

Revision ID: 0008_agit
Revises: 0007_github_pulls
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_agit"
down_revision = "0007_github_pulls"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "repositories",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("default_branch", sa.String(length=255), nullable=False),
        sa.Column("remote_url", sa.Text(), nullable=True),
        sa.Column("worktree_dir", sa.Text(), nullable=False),
        sa.Column("auto_worktree", sa.Boolean(), nullable=False),
        sa.Column("merge_mode", sa.String(length=16), nullable=False),
        sa.Column("merge_holder", sa.String(length=128), nullable=True),
        sa.Column("merge_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_repositories")),
        sa.UniqueConstraint("path", name=op.f("uq_repositories_path")),
    )
    op.create_table(
        "worktrees",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("repository", sa.String(length=64), nullable=False),
        sa.Column("issue_id", sa.String(length=36), nullable=True),
        sa.Column("number", sa.Integer(), nullable=True),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("branch", sa.String(length=255), nullable=False),
        sa.Column("base_commit", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("agent", sa.String(length=128), nullable=True),
        sa.Column("merge_commit", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["repository"],
            ["repositories.name"],
            name=op.f("fk_worktrees_repository_repositories"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_worktrees")),
    )
    with op.batch_alter_table("worktrees", schema=None) as batch_op:
        batch_op.create_index("ix_worktrees_repository", ["repository", "state"], unique=False)
        batch_op.create_index("ix_worktrees_number", ["number"], unique=False)
    op.create_table(
        "agents",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("agent_type", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agents")),
    )
    # A plain ADD COLUMN (no table rebuild): the issues table keeps its triggers.
    op.add_column("issues", sa.Column("repository", sa.String(length=64), nullable=True))
    op.create_index("ix_issues_repository", "issues", ["repository"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_issues_repository", table_name="issues")
    # Native DROP COLUMN (SQLite 3.35+, PostgreSQL): a batch rebuild would drop the
    # full-text triggers of 0002_search.
    op.execute("ALTER TABLE issues DROP COLUMN repository")
    op.drop_table("agents")
    with op.batch_alter_table("worktrees", schema=None) as batch_op:
        batch_op.drop_index("ix_worktrees_number")
        batch_op.drop_index("ix_worktrees_repository")
    op.drop_table("worktrees")
    op.drop_table("repositories")
