"""The GitHub mirror: configured repositories, the transactional outbox, links between local
and GitHub issues, and mirrored comments.

Revision ID: 0004_outbox
Revises: 0003_pg_search
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_outbox"
down_revision = "0003_pg_search"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "github_mirror",
        sa.Column("repo", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("import_since", sa.DateTime(timezone=True), nullable=True),
        sa.Column("import_etag", sa.String(length=256), nullable=True),
        sa.Column("last_push_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_import_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("worker", sa.String(length=128), nullable=True),
        sa.Column("worker_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("repo", name=op.f("pk_github_mirror")),
    )
    op.create_table(
        "github_outbox",
        sa.Column("issue_id", sa.String(length=36), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("changed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("create_started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("issue_id", name=op.f("pk_github_outbox")),
    )
    with op.batch_alter_table("github_outbox", schema=None) as batch_op:
        batch_op.create_index("ix_github_outbox_due", ["state", "next_attempt_at"], unique=False)

    op.create_table(
        "github_links",
        sa.Column("issue_id", sa.String(length=36), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("repo", sa.String(length=200), nullable=False),
        sa.Column("gh_number", sa.Integer(), nullable=False),
        sa.Column("url", sa.String(length=500), nullable=False),
        sa.Column("snapshot", sa.Text(), nullable=False),
        sa.Column("remote_updated_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("linked_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("issue_id", name=op.f("pk_github_links")),
    )
    with op.batch_alter_table("github_links", schema=None) as batch_op:
        batch_op.create_index("ix_github_links_repo", ["repo", "gh_number"], unique=True)
        batch_op.create_index("ix_github_links_number", ["number"], unique=False)

    op.create_table(
        "github_comments",
        sa.Column("comment_id", sa.Integer(), nullable=False),
        sa.Column("gh_comment_id", sa.BigInteger(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["comment_id"],
            ["comments.id"],
            name=op.f("fk_github_comments_comment_id_comments"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("comment_id", name=op.f("pk_github_comments")),
    )


def downgrade() -> None:
    op.drop_table("github_comments")
    with op.batch_alter_table("github_links", schema=None) as batch_op:
        batch_op.drop_index("ix_github_links_number")
        batch_op.drop_index("ix_github_links_repo")

    op.drop_table("github_links")
    with op.batch_alter_table("github_outbox", schema=None) as batch_op:
        batch_op.drop_index("ix_github_outbox_due")

    op.drop_table("github_outbox")
    op.drop_table("github_mirror")
