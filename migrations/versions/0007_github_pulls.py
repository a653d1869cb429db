"""Pull requests opened for issues by submit_pr: number, URL and branch, and when a sync
saw it merged.

Revision ID: 0007_github_pulls
Revises: 0006_wait_fence
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_github_pulls"
down_revision = "0006_wait_fence"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "github_pulls",
        sa.Column("issue_id", sa.String(length=36), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("repo", sa.String(length=200), nullable=False),
        sa.Column("pr_number", sa.Integer(), nullable=False),
        sa.Column("url", sa.String(length=500), nullable=False),
        sa.Column("branch", sa.String(length=255), nullable=False),
        sa.Column("opened_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("merged_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["issue_id"],
            ["issues.id"],
            name=op.f("fk_github_pulls_issue_id_issues"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("issue_id", name=op.f("pk_github_pulls")),
    )
    with op.batch_alter_table("github_pulls", schema=None) as batch_op:
        batch_op.create_index("ix_github_pulls_number", ["number"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("github_pulls", schema=None) as batch_op:
        batch_op.drop_index("ix_github_pulls_number")
    op.drop_table("github_pulls")
