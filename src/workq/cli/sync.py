"""The GitHub mirror: ``workq sync github``, ``sync status``, ``sync retry``, ``sync forget``."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from workq.cli import foreground, output
from workq.cli.state import state
from workq.errors import InvalidInput
from workq.github.sync import PassResult, connect, run_pass, watch
from workq.github.worker import Options
from workq.services.sync import mirror_target, outbox_rows, sync_status

sync_app = typer.Typer(help="Mirror the queue to GitHub issues.", no_args_is_help=True)
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
Repo = Annotated[str, typer.Option("--repo", help="The repository, OWNER/NAME.")]
PACE_ENV = "WORKQ_GITHUB_PACE"
# Show a progress bar from this many rows on (a first push, a long import).
PROGRESS_FROM = 20


@sync_app.command()
def github(
    ctx: typer.Context,
    repo: Repo,
    once: Annotated[bool, typer.Option("--once", help="One pass, then exit (default).")] = False,
    watch_: Annotated[
        bool, typer.Option("--watch", help="Keep pushing changes as they happen.")
    ] = False,
    import_: Annotated[
        bool, typer.Option("--import", help="Also bring GitHub's issues into the queue.")
    ] = False,
    pace: Annotated[
        float | None,
        typer.Option(
            help=f"Seconds between writes to GitHub (env {PACE_ENV}; default 1).", min=0, max=60
        ),
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for GitHub.", min=1)] = 10.0,
) -> None:
    """Push the queue to GitHub issues (token: GITHUB_TOKEN or 'gh auth token'; API:
    GITHUB_API_URL, default https://api.github.com, e.g. https://HOST/api/v3 for GitHub
    Enterprise Server)."""
    if once and watch_:
        raise InvalidInput("choose --once or --watch, not both")
    if pace is None:
        pace = float(os.environ.get(PACE_ENV) or 1.0)
    options = Options(write_interval=pace)
    q = state(ctx).queue()
    stop = threading.Event()
    with _progress() as progress:
        session = connect(q, repo, options=options, progress=progress, stop=stop, timeout=timeout)
        try:
            if session.queued:
                output.line(f"Mirroring to {session.repo}: {session.queued} issues to push")
            if not watch_:
                _summary(run_pass(session, with_import=import_))
                return
            foreground.log_to_stderr("workq.github")
            output.line(f"Watching the queue for changes to push to {session.repo} (Ctrl-C stops)")
            with foreground.stop_on_signals(stop):
                watch(session, with_import=import_, on_pass=_quiet_summary)
        finally:
            session.close()


class _Bar:
    """Progress for long passes: a bar on a terminal, nothing elsewhere."""

    def __init__(self) -> None:
        self.display: Progress | None = None
        self.tasks: dict[str, object] = {}

    def __call__(self, phase: str, done: int, total: int | None) -> None:
        if (total or done) < PROGRESS_FROM or not output.errors().is_terminal:
            return
        if self.display is None:
            self.display = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=output.errors(),
                transient=True,
            )
            self.display.start()
        if phase not in self.tasks:
            label = "Pushing to GitHub" if phase == "push" else "Importing from GitHub"
            self.tasks[phase] = self.display.add_task(label, total=total)
        task = self.tasks[phase]
        self.display.update(task, completed=done, total=total)  # type: ignore[arg-type]

    def close(self) -> None:
        if self.display is not None:
            self.display.stop()


@contextmanager
def _progress() -> Iterator[_Bar]:
    bar = _Bar()
    try:
        yield bar
    finally:
        bar.close()


def _summary(result: PassResult) -> None:
    if result.imported is not None:
        i = result.imported
        if i.not_modified:
            output.line("Import: nothing changed on GitHub")
        else:
            output.line(
                f"Import: {i.seen} seen on {i.pages} page(s), {i.created} new, {i.updated} "
                f"updated, {i.conflicts} conflicts (local kept), "
                f"{i.pull_requests} pull requests skipped"
            )
        for error in i.errors:
            output.errors().print(f"  {error}", markup=False)
    if result.merged:
        output.line(f"Merged pull requests completed {numbers(result.merged)}")
    _landings(result)
    p = result.pushed
    output.line(
        f"Push: {p.rows} issues, {p.created} created, {p.updated} updated, "
        f"{p.comments} comments, {p.writes} writes"
        + (f", {p.found} found after an unclear answer" if p.found else "")
        + (f", {p.gone} gone from GitHub" if p.gone else "")
    )
    if p.rescheduled or p.held_until:
        until = f" (GitHub's rate limit holds until {output.when(p.held_until)})"
        output.line(
            f"{p.rescheduled} to retry later{until if p.held_until else ''}; "
            "see 'workq sync status'"
        )
    if p.dead:
        output.errors().print(f"{p.dead} parked as dead: see 'workq sync status'", markup=False)


def _landings(result: PassResult) -> None:
    landed = result.landed
    if landed.landed:
        output.line(f"Landed through pull requests: {numbers(landed.landed)}")
    if landed.refused:
        output.line(f"Landings refused: {numbers(landed.refused)} (see 'workq merge N --status')")
    if landed.waiting:
        output.line(f"Landings waiting: {landed.waiting} (checks, reviews or GitHub)")
    if landed.held:
        output.line("Landings held by GitHub's rate limit until its reset")


def numbers(values: list[int]) -> str:
    return ", ".join(f"#{n}" for n in values)


def _quiet_summary(result: PassResult) -> None:
    p = result.pushed
    if p.rows or p.rescheduled or p.dead or (result.imported and result.imported.seen):
        _summary(result)
    elif result.landed.landed or result.landed.refused:
        _landings(result)


@sync_app.command()
def status(ctx: typer.Context, json_: JsonFlag = False) -> None:
    """Pending, uncertain and dead rows, next attempt, last error, last push."""
    found = sync_status.status(state(ctx).queue(existing=True))
    if json_:
        output.emit_json(found)
        return
    if found.repo is None:
        output.line("No GitHub mirror is configured: start one with 'workq sync github --repo O/N'")
        return
    worker = None
    if found.worker:
        worker = f"{found.worker} until {output.when(found.worker_expires_at)}"
    output.fields(
        [
            ("repository", found.repo),
            ("pending", f"{found.pending} ({found.due_now} due now)"),
            ("uncertain", found.uncertain),
            ("dead", found.dead),
            ("linked issues", found.linked),
            ("next attempt", found.next_attempt_at),
            ("last push", found.last_push_at),
            ("last import", found.last_import_at),
            ("last error", found.last_error),
            ("worker", worker),
        ]
    )
    if found.problems:
        output.table(
            ["#", "state", "attempts", "next attempt", "last error"],
            [
                (
                    p.number,
                    "uncertain" if p.uncertain else p.state,
                    p.attempts,
                    output.when(p.next_attempt_at),
                    p.last_error,
                )
                for p in found.problems
            ],
            title="Rows with trouble",
        )


@sync_app.command()
def retry(
    ctx: typer.Context,
    all_: Annotated[
        bool, typer.Option("--all", help="Also rows waiting after a failure or a rate limit.")
    ] = False,
) -> None:
    """Put rows parked as dead back in the queue, due now."""
    count = outbox_rows.revive(state(ctx).queue(), waiting=all_)
    output.line(f"{count} rows due now")


@sync_app.command()
def forget(ctx: typer.Context, repo: Repo) -> None:
    """Stop mirroring REPO: drop the outbox and the links (GitHub is not touched)."""
    dropped = mirror_target.forget(state(ctx).queue(), repo)
    output.line(f"No longer mirroring {repo} ({dropped} links dropped)")


def register(app: typer.Typer) -> None:
    app.add_typer(sync_app, name="sync")
