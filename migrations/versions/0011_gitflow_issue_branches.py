"""The branch an issue's work is on (contract E's link_issue_to_branch), where it is checked
out, and the commit a merge of it moves the default branch to (recorded before it moves).

Revision ID: 0011_gitflow_issue_branches
Revises: 0010_gates
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011_gitflow_issue_branches"
down_revision = "0010_gates"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "issue_branches",
        sa.Column("issue_id", sa.String(36), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("branch", sa.String(255), nullable=False),
        sa.Column("checkout", sa.Text(), nullable=False),
        sa.Column("base_commit", sa.String(64), nullable=True),
        sa.Column("merge_commit", sa.String(64), nullable=True),
        sa.Column("linked_by", sa.String(128), nullable=True),
        sa.Column("linked_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["issue_id"],
            ["issues.id"],
            name="fk_issue_branches_issue_id_issues",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("issue_id", name="pk_issue_branches"),
    )
    op.create_index("ix_issue_branches_branch", "issue_branches", ["branch"])


def downgrade() -> None:
    op.drop_index("ix_issue_branches_branch", table_name="issue_branches")
    op.drop_table("issue_branches")
