"""Notices to people on the command line: ``workq notify add|list|remove|test`` manage the
sinks, ``deliveries`` shows how the notices stand, ``run`` delivers them where no server does
(services/notices/sinks.py, delivery.py)."""

from __future__ import annotations

import threading
from typing import Annotated

import typer

from workq.cli import foreground, output
from workq.cli.state import state
from workq.domain.notices import NOTICES
from workq.errors import InvalidInput
from workq.services.notices import delivery, sinks, watch
from workq.services.notices.outbox import DELIVERED, FAILED, PENDING
from workq.services.queue import processes

EVENTS_HELP = "Comma-separated notice events, or 'all': " + ", ".join(NOTICES) + "."

notify_app = typer.Typer(
    help="Notices to people: webhooks (Slack, Mattermost, your own) and local commands "
    "told when a claim stalls, a landing is refused, an issue is blocked, and more.",
    no_args_is_help=True,
)
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
SinkName = Annotated[str, typer.Argument(help="The sink's name.")]


@notify_app.command("add")
def add_command(
    ctx: typer.Context,
    name: Annotated[
        str, typer.Argument(help="A name for the sink: a-z, 0-9, '-', '_' (e.g. team-slack).")
    ],
    events: Annotated[str, typer.Option("--events", help=EVENTS_HELP)],
    url: Annotated[
        str | None,
        typer.Option("--url", help="A webhook: JSON is POSTed here (http or https)."),
    ] = None,
    command: Annotated[
        str | None,
        typer.Option(
            "--command",
            help="A local command, split as a shell would and run without one; the notice "
            "is JSON on its stdin.",
        ),
    ] = None,
    secret_env: Annotated[
        str | None,
        typer.Option(
            "--secret-env",
            metavar="VAR",
            help="Sign webhook bodies (X-Workq-Signature-256) with the secret in this "
            "environment variable; the delivering process must have it too. The secret is "
            "never stored.",
        ),
    ] = None,
    no_check: Annotated[
        bool,
        typer.Option("--no-check", help="Add a webhook without checking that its host answers."),
    ] = False,
    json_: JsonFlag = False,
) -> None:
    """Add a sink: a webhook (--url) or a local command (--command) that is told of the
    events you choose. `workq notify test NAME` then sends it a test notice."""
    s = state(ctx)
    found = sinks.add(
        s.queue(),
        name,
        url=url,
        command=command,
        events=events,
        secret_env=secret_env,
        check=not no_check,
        actor=s.actor,
    )
    if json_:
        output.emit_json(found)
        return
    signed = f", signed with ${found.secret_env}" if found.secret_env else ""
    output.line(
        f"Added {found.kind} sink {found.name} ({found.target}{signed}) for: "
        + _events(found.events)
    )
    output.line(f"Next: workq notify test {found.name}")


@notify_app.command("list")
def list_command(ctx: typer.Context, json_: JsonFlag = False) -> None:
    """The sinks, webhook URLs cut to their host (a webhook URL is often a secret)."""
    found = sinks.list_sinks(state(ctx).queue(existing=True))
    if json_:
        output.emit_json(found)
        return
    if not found:
        output.line("No sinks: add one with 'workq notify add NAME --url URL --events all'")
        return
    output.table(
        ["name", "kind", "target", "events", "signed with", "added"],
        [
            (
                f.name,
                f.kind,
                f.target,
                _events(f.events),
                f"${f.secret_env}" if f.secret_env else None,
                output.when(f.created_at),
            )
            for f in found
        ],
    )


@notify_app.command("remove")
def remove_command(ctx: typer.Context, name: SinkName) -> None:
    """Remove a sink and its notices, delivered or not."""
    dropped = sinks.remove(state(ctx).queue(existing=True), name)
    output.line(f"Removed sink {name} ({dropped} notices dropped)")


@notify_app.command("test")
def test_command(ctx: typer.Context, name: SinkName, json_: JsonFlag = False) -> None:
    """Send a test notice to a sink now (not through the outbox); exits 1 if it failed."""
    result = delivery.send_test(state(ctx).queue(existing=True), name)
    if json_:
        output.emit_json(result)
    elif result.ok:
        status = f" (status {result.status})" if result.status is not None else ""
        output.line(f"Sent a test notice to {result.sink}{status} in {result.seconds:.2f} s")
    else:
        output.errors().print(
            f"error: the test notice to {result.sink} failed: {result.error}", markup=False
        )
    if not result.ok:
        raise typer.Exit(1)


@notify_app.command("deliveries")
def deliveries_command(
    ctx: typer.Context,
    state_: Annotated[
        str | None,
        typer.Option(
            "--state", metavar="pending|delivered|failed", help="Only notices in this state."
        ),
    ] = None,
    limit: Annotated[int, typer.Option(help="At most this many.", min=1, max=1000)] = 20,
    json_: JsonFlag = False,
) -> None:
    """The newest notices and how their delivery stands, with the counts by state."""
    if state_ is not None and state_ not in (PENDING, DELIVERED, FAILED):
        raise InvalidInput(
            f"--state {state_!r} is not a state", hint="pending, delivered or failed"
        )
    q = state(ctx).queue(existing=True)
    counts = delivery.counts(q)
    found = delivery.recent(q, limit, state=state_)
    if json_:
        output.emit_json(
            {"counts": counts.model_dump(), "notices": [d.model_dump(mode="json") for d in found]}
        )
        return
    output.line(
        f"Notices: {counts.pending} pending, {counts.delivered} delivered, {counts.failed} failed"
    )
    if not found:
        return
    output.table(
        ["id", "delivery", "sink", "event", "#", "state", "tries", "when", "last error"],
        [
            (
                d.id,
                d.delivery_id[:8],
                d.sink,
                d.event,
                d.number,
                d.state,
                d.attempts,
                output.when(
                    d.delivered_at
                    if d.state == DELIVERED
                    else (d.next_attempt_at if d.state == PENDING else d.created_at)
                ),
                d.last_error,
            )
            for d in found
        ],
        spare=["delivery", "tries", "when"],
    )


@notify_app.command("run")
def run_command(
    ctx: typer.Context,
    once: Annotated[bool, typer.Option("--once", help="One pass, then exit.")] = False,
    interval: Annotated[
        float, typer.Option(help="Seconds between passes.", min=0.1, max=3600)
    ] = 2.0,
    json_: JsonFlag = False,
) -> None:
    """Watch the queue (stalled claims, lapsed leases, a drained queue) and deliver the
    notices until Ctrl-C, where no `workq serve` does (a server does both itself); --once
    for one pass (from cron, say)."""
    s = state(ctx)
    q = s.queue(existing=True)
    holder = processes.this_process()
    if once:
        watch.sweep(q)
        report = delivery.deliver_due(q, holder)
        if json_:
            output.emit_json(report)
        else:
            output.line(
                f"{report.delivered} delivered, {report.retrying} to retry, {report.failed} failed"
            )
        return
    foreground.log_to_stderr("workq.notices", "workq.watch")
    output.errors().print("Delivering notices (Ctrl-C stops)", markup=False)
    stop = threading.Event()
    watcher = threading.Thread(
        target=watch.run, args=(q, stop, s.settings().watch_seconds), daemon=True
    )
    with foreground.stop_on_signals(stop):
        watcher.start()
        delivery.run(q, stop, holder, interval)
    watcher.join(timeout=10)


def _events(names: list[str]) -> str:
    return "all" if set(names) == set(NOTICES) else ",".join(names)


def register(app: typer.Typer) -> None:
    app.add_typer(notify_app, name="notify")
