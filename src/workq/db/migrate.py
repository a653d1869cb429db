"""Schema versions: check cheaply at start, migrate with Alembic (imported only when needed)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from sqlalchemy import inspect, text

from workq.db import dialect
from workq.db.engine import DRIVER_ERRORS, Database
from workq.db.failures import translate
from workq.errors import InvalidInput, SchemaMismatch, WorkqError

if TYPE_CHECKING:
    from alembic.config import Config

# Every revision in migrations/versions, oldest first. A test keeps this equal to Alembic's
# own view, so a start can tell "behind", "current" and "newer than this code" without
# importing Alembic.
REVISIONS: tuple[str, ...] = (
    "0001_initial",
    "0002_search",
    "0003_pg_search",
    "0004_outbox",
    "0005_plans",
    "0006_wait_fence",
    "0007_github_pulls",
    "0008_agit",
    "0009_reserve_touches",
    "0010_gates",
    "0011_gitflow_issue_branches",
    "0012_run_bindings",
    "0013_claims_have_leases",
    "0014_notify_event_kind",
    "0015_landings",
    "0016_notices",
    "0017_tasks",
)
HEAD = REVISIONS[-1]

State = Literal["empty", "behind", "current", "ahead", "foreign"]


@dataclass(frozen=True)
class SchemaStatus:
    state: State
    revision: str | None

    def describe(self) -> str:
        return {
            "empty": "no workq schema yet",
            "behind": f"at {self.revision}, behind the code's {HEAD}",
            "current": f"at {self.revision} (head)",
            "ahead": f"at {self.revision}, which this version of workq does not know",
            "foreign": "holds tables that are not workq's",
        }[self.state]


def migrations_dir() -> Path:
    here = Path(__file__).resolve()
    for candidate in (here.parents[3] / "migrations", here.parents[1] / "_migrations"):
        if (candidate / "env.py").is_file():
            return candidate
    raise WorkqError("the migrations folder is missing from this installation")


def status(db: Database) -> SchemaStatus:
    try:
        with db.engine.connect() as conn:
            tables = set(inspect(conn).get_table_names())
            if "alembic_version" not in tables:
                return SchemaStatus("foreign" if tables else "empty", None)
            row = conn.execute(text("SELECT version_num FROM alembic_version")).first()
    except DRIVER_ERRORS as exc:
        raise translate(exc) from exc
    if row is None:
        return SchemaStatus("empty", None)
    revision = str(row[0])
    if revision == HEAD:
        return SchemaStatus("current", revision)
    if revision in REVISIONS:
        return SchemaStatus("behind", revision)
    return SchemaStatus("ahead", revision)


def alembic_config(db: Database) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.set_main_option("sqlalchemy.url", db.url.replace("%", "%%"))
    return config


def upgrade(db: Database, revision: str = "head") -> None:
    from alembic import command
    from alembic.util import CommandError

    config = alembic_config(db)
    try:
        # A write transaction from the start (BEGIN IMMEDIATE on SQLite): processes that
        # start together on a new file wait their turn, then find the schema at head.
        with db.engine.connect().execution_options(workq_write=True) as conn, conn.begin():
            config.attributes["connection"] = conn
            dialect.lock_schema(conn)
            command.upgrade(config, revision)
    except DRIVER_ERRORS as exc:
        raise translate(exc) from exc
    except CommandError as exc:
        raise _refused(revision, exc) from exc


def downgrade(db: Database, revision: str) -> None:
    from alembic import command
    from alembic.util import CommandError

    config = alembic_config(db)
    try:
        with db.engine.begin() as conn:
            config.attributes["connection"] = conn
            dialect.lock_schema(conn)
            command.downgrade(config, revision)
    except DRIVER_ERRORS as exc:
        raise translate(exc) from exc
    except CommandError as exc:
        raise _refused(revision, exc) from exc


def _refused(revision: str, exc: Exception) -> InvalidInput:
    """Alembic's refusal of a target revision (unknown, or on the wrong side of the current
    one) as a workq error, not a traceback."""
    return InvalidInput(
        f"cannot migrate to {revision!r}: {exc}",
        hint=f"run 'workq db current'; revisions, oldest first: {', '.join(REVISIONS)}",
        field="revision",
    )


def ensure_schema(db: Database, *, migrate: bool) -> SchemaStatus:
    """Make sure the database can be served: migrate if allowed, else refuse clearly."""
    current = status(db)
    if current.state == "current":
        return current
    if current.state == "ahead":
        raise SchemaMismatch(
            f"the database is at schema {current.revision}, newer than this workq ({HEAD})",
            hint="upgrade workq, or use a database made by this version",
            revision=current.revision,
        )
    if current.state == "foreign":
        raise SchemaMismatch(
            "the database holds tables that are not workq's",
            hint="point ISSUES_DB / --db at a new file or an existing workq database",
        )
    if not migrate:
        command = "workq db upgrade"
        if not db.is_sqlite:  # a shared server is migrated on purpose, by URL
            command = f'WORKQ_DATABASE_URL="{dialect.describe_url(db.url)}" workq db upgrade'
        raise SchemaMismatch(
            f"the database schema is {current.describe()}",
            hint=f"run '{command}' (or start with --migrate)",
            revision=current.revision,
        )
    upgrade(db)
    return status(db)
