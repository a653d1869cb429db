"""On PostgreSQL, each NOTIFY on channel workq_changes carries the kind of event that was
written, so that a listener can tell a change that may make an issue claimable (a creation,
a completion ...) from one that cannot (a claim, a comment): waiting calls wake only for
the first (db/changes.py). SQLite has no trigger to change: its feed reads the kinds.

Revision ID: 0014_notify_event_kind
Revises: 0013_claims_have_leases
Create Date: 2026-11-26
"""

from __future__ import annotations

from alembic import op

revision = "0014_notify_event_kind"
down_revision = "0013_claims_have_leases"
branch_labels = None
depends_on = None

_FUNCTION = (
    "CREATE OR REPLACE FUNCTION workq_notify_changes() RETURNS trigger LANGUAGE plpgsql AS "
    "$$ BEGIN PERFORM pg_notify('workq_changes', {payload}); RETURN NULL; END $$"
)


def upgrade() -> None:
    # PostgreSQL folds the notifications of one transaction with the same payload into one:
    # a transaction that wrote three kinds of event sends three.
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_FUNCTION.format(payload="NEW.kind"))


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_FUNCTION.format(payload="''"))
