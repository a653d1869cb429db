"""`workq context` and `workq docs search`: contract E's work context and docs search."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from workq.cli import output
from workq.cli.state import state
from workq.services.coding import docs_index, work_context

docs_app = typer.Typer(help="The repository's docs.", no_args_is_help=True)

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]


def context(
    ctx: typer.Context,
    include_closed_recent: Annotated[
        bool, typer.Option("--include-closed-recent", help="Also what was done in 7 days.")
    ] = False,
    run_id: Annotated[
        str | None,
        typer.Option("--run-id", help="Whose claims and plan (default: WORKQ_RUN_ID, else --as)."),
    ] = None,
    json_: JsonFlag = False,
) -> None:
    """Where you stand: the active issue (from the branch name, else your claim) with its
    acceptance criteria, your claims, the next ready issues, blockers and your plan."""
    s = state(ctx)
    found = work_context.gather(
        s.queue(existing=True),
        by=s.acting(run_id),
        branch=work_context.checkout_branch(Path.cwd()),
        include_closed_recent=include_closed_recent,
    )
    if json_:
        output.emit_json(found)
    else:
        output.line(work_context.text(found))


@docs_app.command("search")
def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="Words to find.")],
    scope: Annotated[str, typer.Option(help=f"One of {', '.join(docs_index.SCOPES)}.")] = "all",
    json_: JsonFlag = False,
) -> None:
    """Ranked search over the repository's docs, Markdown and reStructuredText (indexed as you
    search)."""
    found = docs_index.search(Path.cwd(), query, scope, state(ctx).settings().cache_folder)
    if json_:
        output.emit_json(found)
    else:
        output.line(docs_index.text(found, query))


def register(app: typer.Typer) -> None:
    app.command("context")(context)
    app.add_typer(docs_app, name="docs")
