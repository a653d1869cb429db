"""The initial schema: issues, labels, dependencies, comments, events, counters.

Revision ID: 0001_initial
Revises: none
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001_initial"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table(
        "counters",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("value", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_counters")),
    )
    op.create_table(
        "events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("issue_id", sa.String(length=36), nullable=True),
        sa.Column("number", sa.Integer(), nullable=True),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("actor", sa.String(length=128), nullable=True),
        sa.Column("before", sa.Text(), nullable=True),
        sa.Column("after", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
    )
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.create_index("ix_events_number", ["number", "id"], unique=False)

    op.create_table(
        "issues",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("title", sa.String(length=256), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("priority", sa.SmallInteger(), nullable=False),
        sa.Column("issue_type", sa.String(length=16), nullable=False),
        sa.Column("agent", sa.String(length=64), nullable=False),
        sa.Column("is_blocked", sa.Boolean(), nullable=False),
        sa.Column("blocked_reason", sa.Text(), nullable=True),
        sa.Column("open_blockers", sa.Integer(), nullable=False),
        sa.Column("claimed_by", sa.String(length=128), nullable=True),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("closed_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_issues")),
        sa.UniqueConstraint("number", name=op.f("uq_issues_number")),
    )
    with op.batch_alter_table("issues", schema=None) as batch_op:
        batch_op.create_index("ix_issues_claimed_by", ["claimed_by"], unique=False)
        batch_op.create_index("ix_issues_lease", ["status", "lease_expires_at"], unique=False)
        batch_op.create_index(
            "ix_issues_ready",
            ["status", "is_blocked", "open_blockers", "priority", "created_at", "number"],
            unique=False,
        )

    op.create_table(
        "comments",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("issue_id", sa.String(length=36), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("author", sa.String(length=128), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["issue_id"],
            ["issues.id"],
            name=op.f("fk_comments_issue_id_issues"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_comments")),
    )
    with op.batch_alter_table("comments", schema=None) as batch_op:
        batch_op.create_index("ix_comments_issue_id", ["issue_id"], unique=False)

    op.create_table(
        "dependencies",
        sa.Column("blocker_id", sa.String(length=36), nullable=False),
        sa.Column("blocked_id", sa.String(length=36), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["blocked_id"],
            ["issues.id"],
            name=op.f("fk_dependencies_blocked_id_issues"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["blocker_id"],
            ["issues.id"],
            name=op.f("fk_dependencies_blocker_id_issues"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("blocker_id", "blocked_id", name=op.f("pk_dependencies")),
    )
    with op.batch_alter_table("dependencies", schema=None) as batch_op:
        batch_op.create_index("ix_dependencies_blocked_id", ["blocked_id"], unique=False)

    op.create_table(
        "labels",
        sa.Column("issue_id", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(
            ["issue_id"], ["issues.id"], name=op.f("fk_labels_issue_id_issues"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("issue_id", "name", name=op.f("pk_labels")),
    )
    with op.batch_alter_table("labels", schema=None) as batch_op:
        batch_op.create_index("ix_labels_name", ["name"], unique=False)

    counters = sa.table("counters", sa.column("name", sa.String), sa.column("value", sa.Integer))
    op.bulk_insert(counters, [{"name": "issue_number", "value": 0}])


def downgrade() -> None:

    with op.batch_alter_table("labels", schema=None) as batch_op:
        batch_op.drop_index("ix_labels_name")

    op.drop_table("labels")
    with op.batch_alter_table("dependencies", schema=None) as batch_op:
        batch_op.drop_index("ix_dependencies_blocked_id")

    op.drop_table("dependencies")
    with op.batch_alter_table("comments", schema=None) as batch_op:
        batch_op.drop_index("ix_comments_issue_id")

    op.drop_table("comments")
    with op.batch_alter_table("issues", schema=None) as batch_op:
        batch_op.drop_index("ix_issues_ready")
        batch_op.drop_index("ix_issues_lease")
        batch_op.drop_index("ix_issues_claimed_by")

    op.drop_table("issues")
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.drop_index("ix_events_number")

    op.drop_table("events")
    op.drop_table("counters")
