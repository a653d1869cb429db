"""Landing through pull requests: how a repository lands its issues' work (``land``: a
local merge, or a pull request on GitHub repository ``github_repo``), what a refused
landing does to its issue (``on_refused``), whether a branch behind its base is brought up
to date on GitHub (``update_branch``); and one row per issue whose work is on its way
through a pull request (``landings``).

Revision ID: 0015_landings
Revises: 0014_notify_event_kind
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015_landings"
down_revision = "0014_notify_event_kind"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("repositories", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("land", sa.String(length=8), nullable=False, server_default="local")
        )
        batch_op.add_column(sa.Column("github_repo", sa.String(length=200), nullable=True))
        batch_op.add_column(
            sa.Column("on_refused", sa.String(length=8), nullable=False, server_default="return")
        )
        batch_op.add_column(
            sa.Column("update_branch", sa.Boolean(), nullable=False, server_default=sa.true())
        )
    op.create_table(
        "landings",
        sa.Column("issue_id", sa.String(length=36), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("repository", sa.String(length=64), nullable=False),
        sa.Column("worktree_id", sa.String(length=36), nullable=True),
        sa.Column("branch", sa.String(length=255), nullable=False),
        sa.Column("requested_by", sa.String(length=128), nullable=True),
        sa.Column("fence", sa.Integer(), nullable=False),
        sa.Column("head_sha", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("pr_number", sa.Integer(), nullable=True),
        sa.Column("pr_url", sa.String(length=500), nullable=True),
        sa.Column("merge_sha", sa.String(length=64), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["issue_id"],
            ["issues.id"],
            name=op.f("fk_landings_issue_id_issues"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["repository"],
            ["repositories.name"],
            name=op.f("fk_landings_repository_repositories"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("issue_id", name=op.f("pk_landings")),
    )
    with op.batch_alter_table("landings", schema=None) as batch_op:
        batch_op.create_index("ix_landings_state", ["state", "next_attempt_at"], unique=False)
        batch_op.create_index("ix_landings_number", ["number"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("landings", schema=None) as batch_op:
        batch_op.drop_index("ix_landings_number")
        batch_op.drop_index("ix_landings_state")
    op.drop_table("landings")
    with op.batch_alter_table("repositories", schema=None) as batch_op:
        batch_op.drop_column("update_branch")
        batch_op.drop_column("on_refused")
        batch_op.drop_column("github_repo")
        batch_op.drop_column("land")
