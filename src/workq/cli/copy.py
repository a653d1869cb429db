"""`workq db copy`: move a queue between engines (SQLite file <-> PostgreSQL URL)."""

from __future__ import annotations

from typing import Annotated

import typer

from workq.cli import output, progress
from workq.cli.state import state
from workq.services.maintenance import transfer


def copy(
    ctx: typer.Context,
    source: Annotated[
        str,
        typer.Option("--from", help="The queue to copy: a SQLite file or a database URL."),
    ],
    target: Annotated[
        str,
        typer.Option("--to", help="An empty database (file or URL); migrated first."),
    ],
    json_: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
) -> None:
    """Copy a whole queue to another database, nothing lost (ids, numbers, history).

    e.g. workq db copy --from autopilot.db --to postgresql+psycopg://workq:PW@db/workq
    """
    with progress.counting("Copying rows") as advance:
        report = transfer.copy_queue(
            state(ctx).settings(), source, target, lambda _table, rows: advance(rows)
        )
    if json_:
        output.emit_json(report)
        return
    output.line(f"Copied {output.counts(report.counts)}")
    output.line(f"from {report.source}")
    output.line(f"to   {report.target}")
    output.line("The copy's export matches the source's, line for line.")


def register(db_app: typer.Typer) -> None:
    db_app.command("copy")(copy)
