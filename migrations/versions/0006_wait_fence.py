"""Fencing tokens: a number per issue that grows with every claim of it. On PostgreSQL,
a NOTIFY on channel workq_changes at each commit that wrote events (waiting calls listen).

Claims live at the upgrade get token 1, so every claim has one.

Revision ID: 0006_wait_fence
Revises: 0005_plans
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_wait_fence"
down_revision = "0005_plans"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A plain ADD COLUMN: a batch (copy and move) would drop the search triggers on SQLite.
    op.add_column(
        "issues",
        sa.Column("fence", sa.Integer(), server_default=sa.text("0"), nullable=False),
    )
    op.execute("UPDATE issues SET fence = 1 WHERE claimed_by IS NOT NULL")
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE FUNCTION workq_notify_changes() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN PERFORM pg_notify('workq_changes', ''); RETURN NULL; END $$"
        )
        op.execute(
            # Per row: a statement that inserted no event (a claim attempt that found
            # nothing) must not wake anyone. PostgreSQL folds the notifications of one
            # transaction into one.
            "CREATE TRIGGER events_notify_changes AFTER INSERT ON events "
            "FOR EACH ROW EXECUTE FUNCTION workq_notify_changes()"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER events_notify_changes ON events")
        op.execute("DROP FUNCTION workq_notify_changes()")
    op.drop_column("issues", "fence")
