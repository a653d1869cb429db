"""Which live server acts under a run id: one row per run id a server acts under, a lease
it renews with its claims (see services/run_ids.py).

Revision ID: 0012_run_bindings
Revises: 0011_gitflow_issue_branches
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012_run_bindings"
down_revision = "0011_gitflow_issue_branches"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "run_bindings",
        sa.Column("run_id", sa.String(128), nullable=False),
        sa.Column("server", sa.String(200), nullable=False),
        sa.Column("bound_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("run_id", name="pk_run_bindings"),
    )
    op.create_index("ix_run_bindings_server", "run_bindings", ["server"])


def downgrade() -> None:
    op.drop_index("ix_run_bindings_server", table_name="run_bindings")
    op.drop_table("run_bindings")
