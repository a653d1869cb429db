"""Admin commands: init, db (upgrade/downgrade/current/check), doctor, export, import, backup."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, BinaryIO

import typer

from workq.cli import copy, output, progress
from workq.cli.state import state
from workq.config import Settings
from workq.errors import InvalidInput, SchemaMismatch
from workq.services import maintenance, schema, transfer

db_app = typer.Typer(help="Schema migrations.", no_args_is_help=True)
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
# The global --db / --database-url, also accepted after the db command (as people type them).
DbFile = Annotated[Path | None, typer.Option("--db", help="The SQLite file.")]
DbUrl = Annotated[str | None, typer.Option("--database-url", help="A database URL.")]


def _settings(ctx: typer.Context, db_file: Path | None, database_url: str | None) -> Settings:
    s = state(ctx)
    if db_file is not None:
        s.db, s.database_url = db_file, None
    if database_url is not None:
        s.database_url = database_url
    return s.settings()


def init(ctx: typer.Context) -> None:
    """Create the database (if needed) and bring it to the latest schema."""
    s = state(ctx)
    s.queue(migrate=True)
    output.line(f"Ready: {s.settings().url} at schema {schema.HEAD}")


@db_app.command()
def upgrade(
    ctx: typer.Context,
    revision: Annotated[str, typer.Argument()] = "head",
    db_file: DbFile = None,
    database_url: DbUrl = None,
) -> None:
    """Migrate the schema up (to head by default)."""
    found = schema.upgrade(_settings(ctx, db_file, database_url), revision)
    output.line(f"Schema {found.describe()}")


@db_app.command()
def downgrade(
    ctx: typer.Context,
    revision: Annotated[str, typer.Argument()],
    db_file: DbFile = None,
    database_url: DbUrl = None,
) -> None:
    """Migrate the schema down to REVISION ('base' removes every table)."""
    found = schema.downgrade(_settings(ctx, db_file, database_url), revision)
    output.line(f"Schema {found.describe()}")


@db_app.command()
def current(
    ctx: typer.Context, json_: JsonFlag = False, db_file: DbFile = None, database_url: DbUrl = None
) -> None:
    """Print the schema revision of the database."""
    found = schema.status(_settings(ctx, db_file, database_url))
    if json_:
        output.emit_json({"state": found.state, "revision": found.revision, "head": schema.HEAD})
    else:
        output.line(found.revision or "none")


@db_app.command()
def check(ctx: typer.Context, db_file: DbFile = None, database_url: DbUrl = None) -> None:
    """Exit 0 if the schema is at head, else say what to run (exit 1)."""
    found = schema.status(_settings(ctx, db_file, database_url))
    if found.state != "current":
        raise SchemaMismatch(f"the schema is {found.describe()}", hint="run 'workq db upgrade'")
    output.line(f"Schema {found.describe()}")


def doctor(
    ctx: typer.Context,
    repair: Annotated[bool, typer.Option(help="Fix what is found.")] = False,
    json_: JsonFlag = False,
) -> None:
    """Check integrity, blocked counts against the graph, stale claims and orphans."""
    report = maintenance.doctor(state(ctx).queue(), repair=repair)
    if json_:
        output.emit_json(report)
    elif not report.findings:
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
    path: Annotated[Path | None, typer.Argument(help="Output file (default: stdout).")] = None,
) -> None:
    """Write the whole queue as JSON lines (lossless: ids, numbers, history)."""
    lines = transfer.export_lines(state(ctx).queue())
    if path is None:
        for text in lines:
            sys.stdout.write(text + "\n")
        return
    count = 0
    with path.open("x", encoding="utf-8") as out, progress.counting("Exporting rows") as advance:
        for text in lines:
            out.write(text + "\n")
            count += 1
            advance(1)
    output.errors.print(f"Wrote {count} lines to {path}")


def import_(
    ctx: typer.Context,
    path: Annotated[Path, typer.Argument(help="An export file ('-' for stdin).")],
) -> None:
    """Load an export into an empty database (all of it, or nothing on a bad line)."""
    q = state(ctx).queue(migrate=True)
    if str(path) == "-":
        with progress.counting("Importing", in_bytes=True) as advance:
            counts = transfer.import_lines(q, _text(sys.stdin.buffer, advance))
    else:
        size = path.stat().st_size
        with (
            path.open("rb") as handle,
            progress.counting("Importing", total=size, in_bytes=True) as advance,
        ):
            counts = transfer.import_lines(q, _text(handle, advance))
    output.line("Imported " + ", ".join(f"{n} {kind}(s)" for kind, n in counts.items()))


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
    pages = maintenance.backup(state(ctx).queue(), path)
    output.line(f"Backed up {pages} pages to {path}")


def register(app: typer.Typer) -> None:
    app.command()(init)
    app.add_typer(db_app, name="db")
    copy.register(db_app)
    app.command()(doctor)
    app.command()(export)
    app.command("import")(import_)
    app.command()(backup)
