"""File reservations: the path globs an issue declares (issue_touches) and the globs a
claim's holder reserves explicitly (reservations).

Revision ID: 0009_reserve_touches
Revises: 0008_agit
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_reserve_touches"
down_revision = "0008_agit"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "issue_touches",
        sa.Column("issue_id", sa.String(36), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("glob", sa.String(256), nullable=False),
        sa.ForeignKeyConstraint(
            ["issue_id"],
            ["issues.id"],
            name="fk_issue_touches_issue_id_issues",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("issue_id", "position", name="pk_issue_touches"),
    )
    op.create_table(
        "reservations",
        sa.Column("issue_id", sa.String(36), nullable=False),
        sa.Column("glob", sa.String(256), nullable=False),
        sa.Column("holder", sa.String(128), nullable=False),
        sa.Column("fence", sa.Integer(), nullable=False),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["issue_id"],
            ["issues.id"],
            name="fk_reservations_issue_id_issues",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("issue_id", "glob", name="pk_reservations"),
    )


def downgrade() -> None:
    op.drop_table("reservations")
    op.drop_table("issue_touches")
