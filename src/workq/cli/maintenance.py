"""Admin commands: init, db (upgrade/downgrade/current/check), doctor, export, import, backup."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Annotated, BinaryIO

import typer

from workq.cli import copy, output, progress
from workq.cli.state import state
from workq.config import Settings
from workq.errors import InvalidInput, SchemaMismatch
from workq.services import preflight
from workq.services.maintenance import maintenance, transfer
from workq.services.maintenance import schema_version as schema

db_app = typer.Typer(help="Schema migrations.", no_args_is_help=True)
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]


def init(ctx: typer.Context) -> None:
    """Create the database (if needed) and bring it to the latest schema."""
    s = state(ctx)
    s.queue(migrate=True)
    output.line(f"Ready: {s.settings().url} at schema {schema.HEAD}")


@db_app.command()
def upgrade(
    ctx: typer.Context,
    revision: Annotated[str, typer.Argument()] = "head",
) -> None:
    """Migrate the schema up (to head by default)."""
    found = schema.upgrade(state(ctx).settings(), revision)
    output.line(f"Schema {found.describe()}")


@db_app.command()
def downgrade(
    ctx: typer.Context,
    revision: Annotated[str, typer.Argument()],
) -> None:
    """Migrate the schema down to REVISION ('base' removes every table)."""
    found = schema.downgrade(state(ctx).settings(), revision)
    output.line(f"Schema {found.describe()}")


@db_app.command()
def current(ctx: typer.Context, json_: JsonFlag = False) -> None:
    """Print the schema revision of the database."""
    found = schema.status(state(ctx).for_reading())
    if json_:
        output.emit_json({"state": found.state, "revision": found.revision, "head": schema.HEAD})
    else:
        output.line(found.revision or "none")


@db_app.command()
def check(ctx: typer.Context) -> None:
    """Exit 0 if the schema is at head, else say what to run (exit 1)."""
    found = schema.status(state(ctx).for_reading())
    if found.state != "current":
        raise SchemaMismatch(f"the schema is {found.describe()}", hint="run 'workq db upgrade'")
    output.line(f"Schema {found.describe()}")


def where(ctx: typer.Context, json_: JsonFlag = False) -> None:
    """Say which database the commands here use, what named it, and whether it exists (and
    its schema), without creating it."""
    import os

    from workq.config import variables
    from workq.services.preflight import describe_database, sqlite_path

    s = state(ctx)
    settings = s.settings()
    if s.database_url is not None:
        source = "--database-url"
    elif os.environ.get("WORKQ_DATABASE_URL"):
        source = "WORKQ_DATABASE_URL"
    elif s.db is not None:
        source = "--db"
    else:
        named = [v for v in variables("db_path") if os.environ.get(v)]
        source = named[0] if named else "the default: autopilot.db in the working folder"
    path = sqlite_path(settings)
    exists = path.exists() if path is not None else None
    found = schema.status(settings) if exists is not False else None
    data = {
        "database": describe_database(settings),
        "source": source,
        "exists": exists,
        "schema": found.describe() if found is not None else None,
    }
    if json_:
        output.emit_json(data)
        return
    output.line(f"database: {data['database']}")
    output.line(f"named by: {source}")
    if exists is False:
        output.line("exists:   no ('workq init' creates it; reading commands refuse it)")
    elif found is not None:
        output.line(f"schema:   {found.describe()}")


def doctor(
    ctx: typer.Context,
    repair: Annotated[bool, typer.Option(help="Fix what is found.")] = False,
    json_: JsonFlag = False,
) -> None:
    """Check integrity, blocked counts against the graph, stale claims and orphans."""
    report = maintenance.doctor(state(ctx).queue(existing=True), repair=repair)
    if json_:
        output.emit_json(report)
        if not report.ok:
            raise typer.Exit(1)
        return
    if report.storage:
        output.line(f"Storage: {report.storage}")
    for warning in report.warnings:
        output.errors().print(f"warning: {warning}")
    if not report.findings:
        output.line("All checks passed")
    else:
        output.table(
            ["check", "#", "finding", "repaired"],
            [(f.check, f.number, f.detail, "yes" if f.repaired else "no") for f in report.findings],
        )
        if not repair and any(f.repairable for f in report.findings):
            output.line("Run 'workq doctor --repair' to fix these.")
    if not report.ok:
        raise typer.Exit(1)


def export(
    ctx: typer.Context,
    path: Annotated[Path | None, typer.Argument(help="Output file ('-' or none: stdout).")] = None,
) -> None:
    """Write the whole queue as JSON lines (lossless: ids, numbers, history)."""
    lines = transfer.export_lines(state(ctx).queue(existing=True))
    if path is None or str(path) == "-":
        for text in lines:
            sys.stdout.write(text + "\n")
        return
    count = 0
    with path.open("x", encoding="utf-8") as out, progress.counting("Exporting rows") as advance:
        for text in lines:
            out.write(text + "\n")
            count += 1
            advance(1)
    output.errors().print(f"Wrote {count} lines to {path}")


def import_(
    ctx: typer.Context,
    path: Annotated[Path, typer.Argument(help="An export file ('-' for stdin).")],
) -> None:
    """Load an export into an empty database: all of it, or nothing on a bad line (a new
    SQLite file is removed then)."""
    s = state(ctx)
    settings = s.settings()
    if str(path) != "-" and preflight.names_database(settings, path):
        raise InvalidInput(
            f"{path} is the database itself (or SQLite's file beside it)",
            hint="import an export file: 'workq export FILE' writes one",
        )
    new_file = _new_sqlite_file(settings)
    with ExitStack() as stack:
        # The input is opened before the database, so a missing file creates nothing.
        if str(path) == "-":
            handle, size = sys.stdin.buffer, None
        else:
            handle, size = stack.enter_context(path.open("rb")), path.stat().st_size
        advance = stack.enter_context(progress.counting("Importing", total=size, in_bytes=True))
        try:
            counts = transfer.import_lines(s.queue(migrate=True), _text(handle, advance))
        except BaseException:
            if new_file is not None:
                s.close()
                for leftover in (
                    new_file,
                    *(Path(f"{new_file}{end}") for end in preflight.SIDE_FILES),
                ):
                    leftover.unlink(missing_ok=True)
            raise
    output.line(f"Imported {output.counts(counts)}")


def _new_sqlite_file(settings: Settings) -> Path | None:
    """The SQLite file the command is about to create, None if it exists or is no file."""
    if not settings.is_sqlite or settings.database_url:
        return None
    return None if settings.db_path.exists() else settings.db_path.resolve()


def _text(handle: BinaryIO, advance: progress.Advance) -> Iterator[str]:
    """The lines of ``handle`` as text, read one at a time, telling how many bytes."""
    for n, raw in enumerate(handle, 1):
        advance(len(raw))
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidInput(f"line {n} is not UTF-8 text", line=n) from None


def backup(
    ctx: typer.Context,
    path: Annotated[Path, typer.Argument(help="The new backup file.")],
) -> None:
    """Copy the live SQLite database safely, while agents keep working."""
    pages = maintenance.backup(state(ctx).queue(existing=True), path)
    output.line(f"Backed up {pages} pages to {path}")


def register(app: typer.Typer) -> None:
    app.command()(init)
    app.command()(where)
    app.add_typer(db_app, name="db")
    copy.register(db_app)
    app.command()(doctor)
    app.command()(export)
    app.command("import")(import_)
    app.command()(backup)
