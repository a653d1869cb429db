"""Quality gate runs on issues (gate_runs): the evidence the tests gate and the merge step
read.

Revision ID: 0010_gates
Revises: 0009_reserve_touches
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_gates"
down_revision = "0009_reserve_touches"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "gate_runs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("issue_id", sa.String(36), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("commit_sha", sa.String(64), nullable=False),
        sa.Column("dirty", sa.Boolean(), nullable=False),
        sa.Column("whole_checkout", sa.Boolean(), nullable=False),
        sa.Column("gate", sa.String(64), nullable=False),
        sa.Column("gate_number", sa.Integer(), nullable=False),
        sa.Column("tests", sa.Boolean(), nullable=False),
        sa.Column("passed", sa.Boolean(), nullable=False),
        sa.Column("score", sa.String(32), nullable=False),
        sa.Column("issues_found", sa.Integer(), nullable=False),
        sa.Column("tests_passed", sa.Integer(), nullable=True),
        sa.Column("tests_failed", sa.Integer(), nullable=True),
        sa.Column("tests_errors", sa.Integer(), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("timed_out", sa.Boolean(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(128), nullable=True),
        sa.ForeignKeyConstraint(
            ["issue_id"],
            ["issues.id"],
            name="fk_gate_runs_issue_id_issues",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_gate_runs"),
    )
    op.create_index(
        "ix_gate_runs_issue_commit", "gate_runs", ["issue_id", "commit_sha"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_gate_runs_issue_commit", table_name="gate_runs")
    op.drop_table("gate_runs")
