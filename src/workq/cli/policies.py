"""The queue's policies: ``workq policy list``, ``policy set``, ``policy unset``."""

from __future__ import annotations

from typing import Annotated

import typer

from workq.cli import output
from workq.cli.state import state
from workq.services.queue import policies

policy_app = typer.Typer(
    help="Queue-wide policies, or a repository's own: when a claim is stalled and what "
    "follows, how many landing rounds and failed gate runs tell a person.",
    no_args_is_help=True,
)
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
RepoOpt = Annotated[
    str | None,
    typer.Option("--repo", help="A registered repository's own value (default: queue-wide)."),
]


@policy_app.command("list")
def list_(ctx: typer.Context, repo: RepoOpt = None, json_: JsonFlag = False) -> None:
    """Every policy as it holds (for --repo's issues), where its value comes from, and what
    it does."""
    found = policies.shown(state(ctx).queue(existing=True), repo)
    if json_:
        output.emit_json([vars(s) for s in found.values()])
        return
    output.table(
        ["policy", "value", "from", "what it does"],
        [(s.name, s.value, s.scope, s.help) for s in found.values()],
    )


@policy_app.command("set")
def set_(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The policy (see: workq policy list).")],
    value: Annotated[str, typer.Argument(help="Its value: 45m, 2h, off, release, 3 ...")],
    repo: RepoOpt = None,
) -> None:
    """Set a policy queue-wide, or for one repository's issues with --repo."""
    s = state(ctx)
    made = policies.settle(s.queue(), name, value, repository=repo, actor=s.actor)
    output.line(f"{made.name} = {made.value} ({made.scope})")


@policy_app.command("unset")
def unset(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The policy.")],
    repo: RepoOpt = None,
) -> None:
    """Drop the queue-wide (or --repo's) value: the next one out holds again."""
    now = policies.unset(state(ctx).queue(existing=True), name, repository=repo)
    output.line(f"{now.name} = {now.value} ({now.scope})")


def register(app: typer.Typer) -> None:
    app.add_typer(policy_app, name="policy")
