"""An issue in progress always has a holder and a lease: the database refuses a row that
lacks either (a claim nothing would ever end, or nobody holds), so "lapsed" is exactly
"in progress with a lease that ran out" (domain/readiness.py). Rows that lack one now are
returned to the queue first, as ``workq doctor --repair`` does.

On PostgreSQL a CHECK constraint; on SQLite, where adding one means rebuilding the table
(and its search triggers), two triggers that abort such a write.

Revision ID: 0013_claims_have_leases
Revises: 0012_run_bindings
Create Date: 2026-11-26
"""

from __future__ import annotations

from alembic import op

revision = "0013_claims_have_leases"
down_revision = "0012_run_bindings"
branch_labels = None
depends_on = None

_HALF_MADE = "status = 'in_progress' AND (claimed_by IS NULL OR lease_expires_at IS NULL)"
_CHECK = "ck_issues_claim_has_lease"
_MESSAGE = "an issue in progress needs a holder and a lease"
_TRIGGERS = {
    f"{_CHECK}_insert": "BEFORE INSERT ON issues",
    f"{_CHECK}_update": "BEFORE UPDATE OF status, claimed_by, lease_expires_at ON issues",
}


def upgrade() -> None:
    op.execute(
        "UPDATE issues SET status = 'open', claimed_by = NULL, claimed_at = NULL, "
        f"lease_expires_at = NULL WHERE {_HALF_MADE}"
    )
    if op.get_bind().dialect.name == "sqlite":
        for name, when in _TRIGGERS.items():
            op.execute(
                f"CREATE TRIGGER {name} {when} FOR EACH ROW WHEN NEW.status = 'in_progress' "
                "AND (NEW.claimed_by IS NULL OR NEW.lease_expires_at IS NULL) "
                f"BEGIN SELECT RAISE(ABORT, '{_MESSAGE}'); END"
            )
    else:
        op.execute(
            f"ALTER TABLE issues ADD CONSTRAINT {_CHECK} CHECK (status <> 'in_progress' "
            "OR (claimed_by IS NOT NULL AND lease_expires_at IS NOT NULL))"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for name in _TRIGGERS:
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
    else:
        op.execute(f"ALTER TABLE issues DROP CONSTRAINT IF EXISTS {_CHECK}")
