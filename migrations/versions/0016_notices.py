"""Telling people: notice sinks (``notify_sinks``), the notice outbox (``notices``),
queue-wide and per-repository policies (``policies``: when a claim is stalled, what
follows, how many landing rounds an issue gets), and on ``landings`` what the last refusal
found (``failure``) and how many refusals the issue has had (``rounds``).

Revision ID: 0016_notices
Revises: 0015_landings
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016_notices"
down_revision = "0015_landings"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("landings", schema=None) as batch_op:
        batch_op.add_column(sa.Column("failure", sa.Text(), nullable=True))
        batch_op.add_column(
            sa.Column("rounds", sa.Integer(), nullable=False, server_default=sa.text("0"))
        )
    op.create_table(
        "notify_sinks",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("secret_env", sa.String(length=128), nullable=True),
        sa.Column("events", sa.Text(), nullable=False),
        sa.Column("created_by", sa.String(length=128), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_notify_sinks")),
        sa.UniqueConstraint("name", name=op.f("uq_notify_sinks_name")),
    )
    op.create_table(
        "notices",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("sink_id", sa.String(length=36), nullable=False),
        sa.Column("event_id", sa.Integer(), nullable=False),
        sa.Column("event", sa.String(length=32), nullable=False),
        sa.Column("number", sa.Integer(), nullable=True),
        sa.Column("delivery_id", sa.String(length=36), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("holder", sa.String(length=200), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["sink_id"],
            ["notify_sinks.id"],
            name=op.f("fk_notices_sink_id_notify_sinks"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_notices")),
        sa.UniqueConstraint("delivery_id", name=op.f("uq_notices_delivery_id")),
        sa.UniqueConstraint("sink_id", "event_id", name=op.f("uq_notices_sink_id_event_id")),
    )
    op.create_index("ix_notices_state", "notices", ["state", "next_attempt_at"])
    op.create_table(
        "policies",
        sa.Column("scope", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("value", sa.String(length=64), nullable=False),
        sa.Column("set_by", sa.String(length=128), nullable=True),
        sa.Column("set_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("scope", "name", name=op.f("pk_policies")),
    )


def downgrade() -> None:
    op.drop_table("policies")
    op.drop_index("ix_notices_state", table_name="notices")
    op.drop_table("notices")
    op.drop_table("notify_sinks")
    with op.batch_alter_table("landings", schema=None) as batch_op:
        batch_op.drop_column("rounds")
        batch_op.drop_column("failure")
