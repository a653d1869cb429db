"""Plan mode and workflow phases: plans per run id, the issues a plan launched, and the
workflow state of claimed issues.

Revision ID: 0005_plans
Revises: 0004_outbox
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_plans"
down_revision = "0004_outbox"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "plans",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("run_id", sa.String(length=128), nullable=False),
        sa.Column("slug", sa.String(length=64), nullable=False),
        sa.Column("goal", sa.Text(), nullable=False),
        sa.Column("phase", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("active_run", sa.String(length=128), nullable=True),
        sa.Column("active_slug", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("closed_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_plans")),
        sa.UniqueConstraint("active_run", name=op.f("uq_plans_active_run")),
        sa.UniqueConstraint("active_slug", name=op.f("uq_plans_active_slug")),
    )
    with op.batch_alter_table("plans", schema=None) as batch_op:
        batch_op.create_index("ix_plans_run_id", ["run_id", "created_at"], unique=False)
        batch_op.create_index("ix_plans_slug", ["slug", "created_at"], unique=False)

    op.create_table(
        "plan_issues",
        sa.Column("plan_id", sa.String(length=36), nullable=False),
        sa.Column("task", sa.Integer(), nullable=False),
        sa.Column("issue_id", sa.String(length=36), nullable=False),
        sa.ForeignKeyConstraint(
            ["issue_id"],
            ["issues.id"],
            name=op.f("fk_plan_issues_issue_id_issues"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["plan_id"],
            ["plans.id"],
            name=op.f("fk_plan_issues_plan_id_plans"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("plan_id", "task", name=op.f("pk_plan_issues")),
    )
    with op.batch_alter_table("plan_issues", schema=None) as batch_op:
        batch_op.create_index("ix_plan_issues_issue_id", ["issue_id"], unique=False)

    op.create_table(
        "workflows",
        sa.Column("issue_id", sa.String(length=36), nullable=False),
        sa.Column("phase", sa.String(length=16), nullable=False),
        sa.Column("branch_name", sa.String(length=64), nullable=True),
        sa.Column("tests_passed", sa.Boolean(), nullable=True),
        sa.Column("skip_justification", sa.Text(), nullable=True),
        sa.Column("pr_title", sa.String(length=256), nullable=True),
        sa.Column("pr_body", sa.Text(), nullable=True),
        sa.Column("pr_number", sa.Integer(), nullable=True),
        sa.Column("started_by", sa.String(length=128), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["issue_id"],
            ["issues.id"],
            name=op.f("fk_workflows_issue_id_issues"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("issue_id", name=op.f("pk_workflows")),
    )


def downgrade() -> None:
    op.drop_table("workflows")
    with op.batch_alter_table("plan_issues", schema=None) as batch_op:
        batch_op.drop_index("ix_plan_issues_issue_id")

    op.drop_table("plan_issues")
    with op.batch_alter_table("plans", schema=None) as batch_op:
        batch_op.drop_index("ix_plans_slug")
        batch_op.drop_index("ix_plans_run_id")

    op.drop_table("plans")
