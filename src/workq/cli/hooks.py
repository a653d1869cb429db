"""`workq hooks install | check`: the git pre-commit hook for file reservations."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from workq.cli import output
from workq.cli.state import state
from workq.domain.authority import Authority
from workq.services.workspaces import hooks

hooks_app = typer.Typer(
    name="hooks",
    help="A git pre-commit hook that respects file reservations.",
    no_args_is_help=True,
)


@hooks_app.command("install")
def install(
    ctx: typer.Context,
    repo: Annotated[Path, typer.Option(help="A directory in the repository.")] = Path("."),
    force: Annotated[bool, typer.Option(help="Replace a pre-commit hook not workq's.")] = False,
) -> None:
    """Install the pre-commit hook: it refuses a commit changing a path another holder
    reserved exclusively."""
    s = state(ctx)
    settings = s.settings()
    db_path = None if settings.database_url else settings.db_path
    hook = hooks.install(repo, db_path=db_path, force=force)
    output.line(f"Installed {hook}")


@hooks_app.command("check")
def check(
    ctx: typer.Context,
    repo: Annotated[Path, typer.Option(help="A directory in the repository.")] = Path("."),
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="Who commits (default: WORKQ_RUN_ID).")
    ] = None,
) -> None:
    """Exit 1, naming holder and issue, if the staged changes touch a path another holder
    reserved exclusively (what the hook runs)."""
    s = state(ctx)
    committer = run_id or s.settings().run_id
    refused = hooks.check(
        s.queue(),
        repo,
        by=s.acting(committer) if committer else Authority.of(()),
        index_file=os.environ.get("GIT_INDEX_FILE"),
    )
    for r in refused:
        h = r.held
        sys.stderr.write(
            f"workq: {r.path} is reserved exclusively by {h.holder} for issue #{h.number} "
            f"({h.glob}, until {output.when(h.until)})\n"
        )
    if refused:
        sys.stderr.write("workq: commit refused; ask the holder, or wait for the claim to end\n")
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.add_typer(hooks_app, name="hooks")
