"""Queue commands: ready, claim, claim-next, heartbeat, complete, block, unblock, release."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from workq.cli import output
from workq.cli.state import State, state
from workq.errors import NotHolder, OpenBlockers
from workq.schemas import (
    FORCE_CLAIM_CONFIRMATION,
    NOTHING_CLAIMED,
    Claim,
    ClaimedIssue,
    IssueType,
    ReadyFilter,
)
from workq.services.queue import blocking, claims, ready_queue, reports, waiting
from workq.services.workspaces import claiming

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
Number = Annotated[int, typer.Argument(help="The issue number.", min=1)]
RunId = Annotated[
    str | None,
    typer.Option("--run-id", help="Whom the claim is for (default: WORKQ_RUN_ID or --as)."),
]

Fence = Annotated[
    int | None,
    typer.Option(
        "--fence", min=1, help="The claim's fencing token: refused if it is no longer current."
    ),
]

Wait = Annotated[
    int,
    typer.Option(
        "--wait",
        min=0,
        max=waiting.WAIT_MAX,
        metavar="SECONDS",
        help="While nothing is ready, wait up to this long for something to become ready.",
    ),
]

IgnorePlanMode = Annotated[
    bool,
    typer.Option(
        "--ignore-plan-mode",
        help="Act even while the run is in plan mode (admin; refused otherwise).",
    ),
]


# What an event records of --ignore-plan-mode: an override, by the person (--as).
_IGNORING = "--ignore-plan-mode"


def _run_id(s: State, given: str | None) -> str:
    return s.run_id(given)


def _filter(
    agent: str | None,
    include: list[IssueType] | None,
    exclude: list[IssueType] | None,
    label: list[str] | None,
    repo: str | None = None,
) -> ReadyFilter:
    return ReadyFilter(
        agent=agent,
        include_types=include or None,
        exclude_types=exclude or None,
        labels=label or None,
        repository=repo,
    )


Agent = Annotated[str | None, typer.Option(help="Only issues for this agent.")]
Include = Annotated[list[IssueType] | None, typer.Option("--type", help="Only these types.")]
Exclude = Annotated[list[IssueType] | None, typer.Option("--not-type", help="Not these types.")]
Label = Annotated[list[str] | None, typer.Option("--label", help="Must carry all of these.")]
Repo = Annotated[str | None, typer.Option("--repo", help="Only issues of this repository.")]


def ready(
    ctx: typer.Context,
    agent: Agent = None,
    include: Include = None,
    exclude: Exclude = None,
    label: Label = None,
    repo: Repo = None,
    limit: Annotated[int, typer.Option(min=1, max=200)] = 10,
    wait: Wait = 0,
    explain: Annotated[
        bool, typer.Option("--explain", help="Also say why the other issues are not ready.")
    ] = False,
    run_id: RunId = None,
    json_: JsonFlag = False,
) -> None:
    """Show the issues that would be claimed next, in order (without those whose paths
    a run other than --run-id has reserved)."""
    s = state(ctx)
    q, holder = s.queue(existing=True), _run_id(s, run_id)
    wanted = _filter(agent, include, exclude, label, repo)
    found = waiting.until_found(
        q, lambda: ready_queue.ready(q, wanted, limit=limit, holder=holder) or None, wait
    )
    found = found or []
    blocked = ready_queue.explain(q, wanted, holder=holder) if explain else []
    if json_ and explain:
        output.emit_json(
            {
                "ready": [i.model_dump(mode="json") for i in found],
                "not_ready": [n.model_dump(mode="json") for n in blocked],
            }
        )
        return
    if json_:
        output.emit_json(found)
    elif not found:
        output.line("No ready issues available")
    else:
        output.table(
            ["#", "title", "priority", "type", "agent", "created"],
            [
                (
                    i.number,
                    i.title,
                    i.priority.value,
                    i.issue_type.value,
                    i.agent,
                    output.when(i.created_at),
                )
                for i in found
            ],
        )
    if explain:
        output.line("")
        output.line("Not ready:" if blocked else "Every unfinished issue is ready.")
        for n in blocked:
            output.line(f"#{n.number} {n.title}: {'; '.join(n.reasons)}")


def _waiting(claim: Claim) -> None:
    if claim.waits_on:
        shown = ", ".join(f"#{n}" for n in claim.waits_on)
        output.line(
            f"Issue #{claim.number} now waits on {shown}, not done yet: the claim stays "
            "yours, and complete is refused until then"
        )


def _claimed(claim: Claim | ClaimedIssue, json_: bool) -> None:
    if json_:
        output.emit_json(claim)
        return
    took = f" (taken over from {claim.previous_holder})" if claim.previous_holder else ""
    output.line(
        f"Claimed issue #{claim.number}: {claim.title} for {claim.claimed_by}, "
        f"lease until {output.when(claim.lease_expires_at)}, fence {claim.fence}{took}"
    )
    if isinstance(claim, Claim):
        _waiting(claim)
    if claim.worktree is not None:
        output.line(f"worktree: {claim.worktree.path} (branch {claim.worktree.branch})")
    if claim.briefing is not None:
        output.line("Before you:")
        for said in claim.briefing.lines(output.when):
            output.line(f"  {said}")


def claim(
    ctx: typer.Context,
    number: Number,
    run_id: RunId = None,
    ignore_plan_mode: IgnorePlanMode = False,
    json_: JsonFlag = False,
) -> None:
    """Claim an issue (a compare-and-set: exactly one claimer wins)."""
    s = state(ctx)
    by = s.acting(run_id, override=_IGNORING if ignore_plan_mode else None)
    got = claiming.claim(s.queue(), number, by)
    _claimed(got, json_)


def claim_next(
    ctx: typer.Context,
    run_id: RunId = None,
    agent: Agent = None,
    include: Include = None,
    exclude: Exclude = None,
    label: Label = None,
    wait: Wait = 0,
    ignore_plan_mode: IgnorePlanMode = False,
    json_: JsonFlag = False,
) -> None:
    """Claim the first ready issue, atomically. Exit status 2 when nothing is ready (with
    --wait: when nothing became ready in time).
    --json prints what the issue_claim_next tool returns: the claim, flat as `claim
    --json` prints it with the issue's fields, or {"claimed": false}."""
    s = state(ctx)
    q, wanted = s.queue(), _filter(agent, include, exclude, label)
    by = s.acting(run_id, override=_IGNORING if ignore_plan_mode else None)
    got = waiting.until_found(
        q,
        lambda: claiming.claim_next(q, by, wanted),
        wait,
        lambda: claiming.claimable(q, wanted, worktree=None),
    )
    if got is None:
        if json_:
            output.emit_json(NOTHING_CLAIMED)
        else:
            output.line("No ready issues available")
        raise typer.Exit(2)
    _claimed(got, json_)


def heartbeat(
    ctx: typer.Context,
    number: Number,
    run_id: RunId = None,
    fence: Fence = None,
    note: Annotated[
        str | None,
        typer.Option(
            help="What the work has come to: kept as a progress note, it keeps the claim "
            "from counting as stalled (a bare heartbeat does not)."
        ),
    ] = None,
) -> None:
    """Extend the lease of a claim you hold."""
    s = state(ctx)
    got = claims.heartbeat(s.queue(), number, s.acting(run_id, fence=fence), note=note)
    output.line(f"Lease of issue #{number} extended until {output.when(got.lease_expires_at)}")
    _waiting(got)


def complete(
    ctx: typer.Context,
    number: Number,
    run_id: RunId = None,
    force: Annotated[bool, typer.Option(help="Complete whoever holds it (admin).")] = False,
    fence: Fence = None,
    ignore_plan_mode: IgnorePlanMode = False,
    json_: JsonFlag = False,
) -> None:
    """Mark an issue done; the issues waiting only on it become ready. An issue that waits
    on unfinished issues is refused unless --force."""
    s = state(ctx)
    forced = "workq complete --force" if force else (_IGNORING if ignore_plan_mode else None)
    try:
        by = s.acting(run_id, override=forced, fence=fence)
        done = claims.complete(s.queue(), number, by, actor=s.actor)
    except OpenBlockers as exc:
        exc.hint = "finish those first (the claim stays yours), or complete it anyway with --force"
        raise
    if json_:
        output.emit_json(done)
        return
    output.line(f"Completed issue #{number}" + (" (already done)" if done.already_done else ""))
    if done.unblocked:
        output.line("Now ready: " + ", ".join(f"#{n}" for n in done.unblocked))


def block(
    ctx: typer.Context,
    number: Number,
    reason: Annotated[str, typer.Argument(help="Why it cannot go on.")],
    run_id: RunId = None,
    force: Annotated[
        bool, typer.Option(help="Block it even if someone else holds it (admin).")
    ] = False,
    fence: Fence = None,
) -> None:
    """Block an issue with a reason: its claim is released and it leaves the queue. Another
    run's live claim is only overridden with --force (recorded in the history)."""
    s = state(ctx)
    by = s.acting(run_id, override="workq block --force" if force else None, fence=fence)
    try:
        blocking.block(s.queue(), number, reason, by=by, actor=s.actor)
    except NotHolder as exc:
        exc.hint = "ask its holder, or block it anyway with --force (recorded in its history)"
        raise
    output.line(f"Blocked issue #{number}: {reason}")


def unblock(ctx: typer.Context, number: Number) -> None:
    """Put a blocked issue back in the queue."""
    s = state(ctx)
    blocking.unblock(s.queue(), number, actor=s.actor)
    output.line(f"Unblocked issue #{number}")


def release(
    ctx: typer.Context,
    number: Number,
    run_id: RunId = None,
    force: Annotated[bool, typer.Option(help="Release whoever holds it (admin).")] = False,
    reason: Annotated[str | None, typer.Option()] = None,
    fence: Fence = None,
    discard: Annotated[
        bool,
        typer.Option(help="Even with commits its worktree has and main lacks (branch kept)."),
    ] = False,
) -> None:
    """Give a claim up: the issue goes back to the queue."""
    s = state(ctx)
    by = s.acting(run_id, override="workq release --force" if force else None, fence=fence)
    claims.release(s.queue(), number, by, reason=reason, actor=s.actor, discard=discard)
    output.line(f"Released issue #{number}")


def force_claim(
    ctx: typer.Context,
    number: Number,
    confirm: Annotated[str, typer.Option(help=f"Must be exactly: {FORCE_CLAIM_CONFIRMATION}")],
    run_id: RunId = None,
    ignore_plan_mode: IgnorePlanMode = False,
    json_: JsonFlag = False,
) -> None:
    """Take a claim from its holder (recorded in the history)."""
    s = state(ctx)
    by = s.acting(run_id, override=_IGNORING if ignore_plan_mode else None)
    got = claims.force_claim(s.queue(), number, by, confirm)
    _claimed(got, json_)


def backlog(
    ctx: typer.Context,
    include: Include = None,
    exclude: Exclude = None,
    limit: Annotated[int, typer.Option(min=1, max=100)] = 20,
    json_: JsonFlag = False,
) -> None:
    """Issues not done, by priority score, with lock holders."""
    found = reports.backlog(
        state(ctx).queue(existing=True), include_types=include, exclude_types=exclude, limit=limit
    )
    if json_:
        output.emit_json(found)
        return
    output.table(
        ["#", "title", "priority", "type", "score", "age (days)", "locked by", "blocked"],
        [
            (
                b.number,
                b.title,
                b.priority.value,
                b.issue_type.value,
                b.priority_score,
                b.age_in_days,
                b.locked_by,
                "yes" if b.is_blocked else "",
            )
            for b in found.backlog
        ],
        spare=["type", "age (days)", "priority"],
    )
    output.line(f"{len(found.backlog)} of {found.total} shown")


def stats(ctx: typer.Context, json_: JsonFlag = False) -> None:
    """Counts by status and priority, ready, blocked and stale claims."""
    found = reports.stats(state(ctx).queue(existing=True))
    if json_:
        output.emit_json(found)
        return
    output.fields(
        [
            ("total", found.total),
            *((f"  {k}", v) for k, v in found.by_status.items()),
            ("ready", found.ready),
            ("blocked", found.blocked),
            ("claimed", found.claimed),
            ("stale claims", found.stale_claims),
            *((f"  {k} (not done)", v) for k, v in found.by_priority.items()),
        ]
    )


WATCH_BATCH = 100


def watch(
    ctx: typer.Context,
    count: Annotated[
        int | None, typer.Option("--count", min=1, help="Stop after this many changes.")
    ] = None,
    since: Annotated[
        int | None, typer.Option(min=0, help="Start after this event id (default: now).")
    ] = None,
) -> None:
    """Print a line per change to the queue as it happens (Ctrl-C to stop)."""
    q = state(ctx).queue(existing=True)
    last = waiting.latest_event(q) if since is None else since
    shown = 0
    with waiting.Waiter(q, waiting.WAIT_MAX, every_change=True) as feed:
        while count is None or shown < count:
            seen = feed.mark()
            batch = waiting.events_after(q, last, limit=WATCH_BATCH)
            for event in batch:
                last = event.id
                by = f" by {event.actor}" if event.actor else ""
                output.line(f"{output.when(event.created_at)}  #{event.number} {event.kind}{by}")
                shown += 1
                if count is not None and shown >= count:
                    return
            sys.stdout.flush()
            if len(batch) < WATCH_BATCH:
                feed.sleep(seen, waiting.LEASE_RECHECK_SECONDS)


def register(app: typer.Typer) -> None:
    app.command()(ready)
    app.command()(claim)
    app.command("claim-next")(claim_next)
    app.command()(heartbeat)
    app.command()(complete)
    app.command()(block)
    app.command()(unblock)
    app.command()(release)
    app.command("force-claim")(force_claim)
    app.command()(backlog)
    app.command()(stats)
    app.command()(watch)
