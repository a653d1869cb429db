"""The schema of a database, for the admin commands: where it stands, and moving it."""

from __future__ import annotations

from workq.config import Settings
from workq.db import migrate
from workq.db.migrate import SchemaStatus
from workq.services.runtime import open_database

HEAD = migrate.HEAD

__all__ = ["HEAD", "SchemaStatus", "downgrade", "status", "upgrade"]


def status(settings: Settings) -> SchemaStatus:
    """Where the schema of the database stands against this code's migrations."""
    db = open_database(settings)
    try:
        return migrate.status(db)
    finally:
        db.dispose()


def upgrade(settings: Settings, revision: str = "head") -> SchemaStatus:
    """Migrate up to ``revision``; where the schema stands afterwards."""
    db = open_database(settings)
    try:
        migrate.upgrade(db, revision)
        return migrate.status(db)
    finally:
        db.dispose()


def downgrade(settings: Settings, revision: str) -> SchemaStatus:
    """Migrate down to ``revision`` ('base' removes every table); where it stands afterwards."""
    db = open_database(settings)
    try:
        migrate.downgrade(db, revision)
        return migrate.status(db)
    finally:
        db.dispose()
