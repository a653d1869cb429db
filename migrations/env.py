"""Alembic environment: runs on the connection workq hands it (or the configured URL)."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine

from workq.db.models import metadata

target_metadata = metadata

# Tables that migrations create but the models do not declare: the FTS5 index of
# 0002_search and its shadow tables. Comparisons of migrations with the models skip them.
UNMODELLED_PREFIXES = ("issues_fts",)
# PostgreSQL's text search index of 0003_pg_search (on an expression, which SQLite cannot
# reflect, so the models do not declare it).
UNMODELLED_INDEXES = ("ix_issues_search",)


def include_object(
    obj: object, name: str | None, type_: str, reflected: bool, compare_to: object
) -> bool:
    if type_ == "index" and name in UNMODELLED_INDEXES:
        return False
    return not (type_ == "table" and name is not None and name.startswith(UNMODELLED_PREFIXES))


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        include_object=include_object,
        transaction_per_migration=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = context.config.get_main_option("sqlalchemy.url")
    assert url, "sqlalchemy.url is not set"
    engine = create_engine(url)
    with engine.connect() as conn:
        _run(conn)
    engine.dispose()


if context.is_offline_mode():
    raise SystemExit("workq migrations run online only: use 'workq db upgrade'")
run_migrations_online()
