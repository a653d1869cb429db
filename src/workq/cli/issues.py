"""Issue commands: create, list, show, update, delete, reopen, depend, comment, history."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

import typer

from workq.cli import output
from workq.cli.state import state
from workq.domain import landing_failures
from workq.schemas import (
    PAGE_DEFAULT,
    CommentKind,
    Issue,
    IssueListItem,
    IssueType,
    LandingStatus,
    Priority,
    Status,
)
from workq.services.queue import dependencies, issues, listing, notes
from workq.services.sync import mirror, pulls
from workq.services.workspaces import landings, worktrees

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
Number = Annotated[int, typer.Argument(help="The issue number.", min=1)]


def _progress(issue: Issue) -> list[tuple[str, object]]:
    """A stalled claim's line, with what to do."""
    if issue.stalled_since is None:
        return []
    return [
        (
            "stalled",
            f"since {output.when(issue.stalled_since)}: no commit, note or step; ask its "
            f"agent, or release it: workq release {issue.number} --force",
        )
    ]


def _show(
    issue: Issue, github: str | None = None, pull: str | None = None, waiting: Sequence[int] = ()
) -> None:
    done_first = [n for n in issue.blocked_by if n not in waiting]
    output.fields(
        [
            ("number", f"#{issue.number}"),
            ("title", issue.title),
            ("status", issue.status.value),
            ("priority", issue.priority.value),
            ("type", issue.issue_type.value),
            ("agent", issue.agent),
            ("labels", ", ".join(issue.labels) or "-"),
            ("touches", ", ".join(issue.touches) or "-"),
            ("blocked", f"yes: {issue.blocked_reason}" if issue.is_blocked else "no"),
            ("waits on", ", ".join(f"#{n}" for n in waiting) or "-"),
            *(
                [("came after", ", ".join(f"#{n} (done)" for n in done_first))]
                if done_first
                else []
            ),
            ("blocks", ", ".join(f"#{n}" for n in issue.blocks) or "-"),
            ("claimed by", issue.claimed_by),
            ("lease until", issue.lease_expires_at),
            *_progress(issue),
            ("created", issue.created_at),
            ("updated", issue.updated_at),
            ("closed", issue.closed_at),
            *([("github", github)] if github else []),
            *([("pull request", pull)] if pull else []),
            *([("repository", issue.repository)] if issue.repository else []),
            *(
                [("worktree", f"{issue.worktree.path} (branch {issue.worktree.branch})")]
                if issue.worktree
                else []
            ),
        ]
    )
    if issue.description:
        output.line("")
        output.line(issue.description)


def _as_priority(value: str | Priority) -> Priority:
    try:
        return Priority(value)
    except ValueError:
        raise typer.BadParameter(
            f"{value!r} is not a priority: urgent, high, medium or low (critical is urgent)"
        ) from None


def _priority(*names: str) -> Any:
    return typer.Option(*names, parser=_as_priority, metavar="urgent|high|medium|low")


def create(
    ctx: typer.Context,
    title: Annotated[str, typer.Argument(help="A one-line title.")],
    description: Annotated[str | None, typer.Option("--description", "-d")] = None,
    priority: Annotated[Priority, _priority("--priority", "-p")] = Priority.MEDIUM,
    issue_type: Annotated[IssueType, typer.Option("--type", "-t")] = IssueType.TASK,
    agent: Annotated[str | None, typer.Option(help="Who should take it (default claude).")] = None,
    label: Annotated[list[str] | None, typer.Option("--label", "-l", help="Repeatable.")] = None,
    touch: Annotated[
        list[str] | None,
        typer.Option(
            "--touch", help="A path glob it will touch (reserved while claimed); repeatable."
        ),
    ] = None,
    context: Annotated[str | None, typer.Option(help="Background (issue template).")] = None,
    criterion: Annotated[
        list[str] | None, typer.Option("--criterion", help="An acceptance criterion; repeatable.")
    ] = None,
    notes_: Annotated[str | None, typer.Option("--notes", help="Technical notes.")] = None,
    repo: Annotated[
        str | None, typer.Option("--repo", help="The registered repository it belongs to.")
    ] = None,
    json_: JsonFlag = False,
) -> None:
    """Create an issue."""
    s = state(ctx)
    issue = issues.create(
        s.queue(),
        title=title,
        description=description,
        priority=priority,
        issue_type=issue_type,
        agent=agent,
        labels=label or (),
        touches=touch or (),
        repository=repo,
        actor=s.actor,
        context=context,
        acceptance_criteria=criterion,
        technical_notes=notes_,
    )
    if json_:
        output.emit_json(issue)
    else:
        output.line(f"Created issue #{issue.number}: {issue.title} (agent: {issue.agent})")


def list_(
    ctx: typer.Context,
    status: Annotated[Status | None, typer.Option(help="Only this status.")] = None,
    priority: Annotated[Priority | None, _priority("--priority")] = None,
    issue_type: Annotated[IssueType | None, typer.Option("--type")] = None,
    agent: Annotated[str | None, typer.Option()] = None,
    label: Annotated[str | None, typer.Option()] = None,
    claimed_by: Annotated[str | None, typer.Option()] = None,
    limit: Annotated[int, typer.Option(min=1, max=200)] = PAGE_DEFAULT,
    cursor: Annotated[str | None, typer.Option(help="From a previous page.")] = None,
    json_: JsonFlag = False,
) -> None:
    """List issues by number, a page at a time."""
    page = listing.list_issues(
        state(ctx).queue(existing=True),
        status=status,
        priority=priority,
        issue_type=issue_type,
        agent=agent,
        label=label,
        claimed_by=claimed_by,
        limit=limit,
        cursor=cursor,
    )
    if json_:
        output.emit_json(page)
        return
    output.table(
        ["#", "title", "status", "priority", "type", "agent", "blocked / waits on", "claimed by"],
        [
            (
                i.number,
                i.title,
                i.status.value,
                i.priority.value,
                i.issue_type.value,
                i.agent,
                _waits(i),
                i.claimed_by,
            )
            for i in page.items
        ],
        spare=["agent", "type", "priority"],
    )
    if page.has_more:
        output.line(f"more: --cursor {page.next_cursor}")


def _waits(item: IssueListItem) -> str:
    if item.blocked_reason is not None:
        return f"blocked: {item.blocked_reason}"
    return ", ".join(f"#{n}" for n in item.waiting_on or ())


def show(ctx: typer.Context, number: Number, json_: JsonFlag = False) -> None:
    """Show one issue in full, with its links and the GitHub mirror if any."""
    q = state(ctx).queue(existing=True)
    issue = worktrees.issue(q, number)
    link = mirror.github_link(q, number)
    pr = pulls.of_issue(q, number)
    landing = landings.get(q, number)
    if json_:
        data = issue.model_dump(mode="json")
        data["github"] = link.model_dump(mode="json") if link else None
        data["pull_request"] = pr.model_dump(mode="json") if pr else None
        data["landing"] = landing.model_dump(mode="json") if landing else None
        output.emit_json(data)
        return
    merged = f" (merged {output.when(pr.merged_at)})" if pr and pr.merged_at else ""
    _show(
        issue,
        f"{link.repo}#{link.gh_number} {link.url}" if link else None,
        f"{pr.repo}#{pr.pr_number} {pr.url}{merged}" if pr else None,
        issues.waits_on(q, number) if issue.open_blockers else [],
    )
    if landing is not None:
        _show_landing(landing)


def _show_landing(found: LandingStatus) -> None:
    """Where the issue's landing through a pull request stands; refused, what to repair."""
    pull = f" · pull request #{found.pr_number} {found.pr_url or ''}" if found.pr_number else ""
    rounds = f" · refused {found.rounds} times so far" if found.rounds else ""
    output.line("")
    output.line(f"Landing: {found.state}{pull.rstrip()}{rounds}")
    if found.failure is not None:
        output.line("")
        output.line(landing_failures.comment(found.failure))
    elif found.detail:
        output.line(found.detail)


def update(
    ctx: typer.Context,
    number: Number,
    title: Annotated[str | None, typer.Option()] = None,
    description: Annotated[str | None, typer.Option("--description", "-d")] = None,
    priority: Annotated[Priority | None, _priority("--priority", "-p")] = None,
    issue_type: Annotated[IssueType | None, typer.Option("--type", "-t")] = None,
    agent: Annotated[str | None, typer.Option()] = None,
    add_label: Annotated[list[str] | None, typer.Option("--add-label")] = None,
    remove_label: Annotated[list[str] | None, typer.Option("--remove-label")] = None,
    touch: Annotated[
        list[str] | None,
        typer.Option("--touch", help="Its path globs, all of them; repeatable."),
    ] = None,
    clear_touches: Annotated[
        bool, typer.Option("--clear-touches", help="It declares no paths any more.")
    ] = False,
    repo: Annotated[
        str | None,
        typer.Option("--repo", help="The registered repository it belongs to from now on."),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(help="Change touches or repository of another run's live claim (admin)."),
    ] = False,
    json_: JsonFlag = False,
) -> None:
    """Change an issue's title, description, priority, type, agent, labels, touches or
    repository. Touches and repository of an issue another run holds a live claim on are
    its holder's: --force changes them anyway (recorded in the history)."""
    s = state(ctx)
    issue = issues.update_issue(
        s.queue(),
        number,
        title=title,
        description=description,
        priority=priority,
        issue_type=issue_type,
        agent=agent,
        add_labels=add_label or (),
        remove_labels=remove_label or (),
        touches=[] if clear_touches else (touch or None),
        repository=repo,
        by=s.acting(override="workq update --force" if force else None),
        actor=s.actor,
    )
    if json_:
        output.emit_json(issue)
    else:
        output.line(f"Updated issue #{number}")


def delete(
    ctx: typer.Context,
    number: Number,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
    force: Annotated[
        bool, typer.Option(help="Delete it even if another run holds a live claim (admin).")
    ] = False,
) -> None:
    """Delete an issue for good (its history stays). An issue another run holds a live
    claim on is refused unless --force."""
    s = state(ctx)
    if not yes:
        typer.confirm(f"Delete issue #{number} for good?", abort=True)
    by = s.acting(override="workq delete --force" if force else None)
    issues.delete_issue(s.queue(), number, by=by, actor=s.actor)
    output.line(f"Deleted issue #{number}")


def reopen(ctx: typer.Context, number: Number) -> None:
    """Bring a done issue back to open."""
    s = state(ctx)
    issues.reopen(s.queue(), number, actor=s.actor)
    output.line(f"Reopened issue #{number}")


def depend(
    ctx: typer.Context,
    blocked: Annotated[int, typer.Argument(help="The issue that must wait.", min=1)],
    blocker: Annotated[int, typer.Option("--on", help="The issue it waits for.", min=1)],
) -> None:
    """Make BLOCKED wait until the issue given with --on is done."""
    s = state(ctx)
    issue = dependencies.depend(s.queue(), blocker=blocker, blocked=blocked, actor=s.actor)
    output.line(f"Issue #{blocked} now waits on #{blocker}")
    if issue.claimed_by and issue.open_blockers:
        output.line(
            f"{issue.claimed_by} keeps its claim on #{blocked} but cannot complete it until "
            "then (its next claim or heartbeat says so)"
        )


def undepend(
    ctx: typer.Context,
    blocked: Annotated[int, typer.Argument(help="The issue that waits.", min=1)],
    blocker: Annotated[
        int, typer.Option("--on", help="The issue it should stop waiting for.", min=1)
    ],
) -> None:
    """Remove a dependency."""
    s = state(ctx)
    dependencies.undepend(s.queue(), blocker=blocker, blocked=blocked, actor=s.actor)
    output.line(f"Issue #{blocked} no longer waits on #{blocker}")


def comment(
    ctx: typer.Context,
    number: Number,
    body: Annotated[str, typer.Argument(help="The comment (markdown).")],
    kind: Annotated[CommentKind, typer.Option()] = CommentKind.NOTE,
    json_: JsonFlag = False,
) -> None:
    """Add a comment (note, progress, question, blocker or resolution)."""
    s = state(ctx)
    made = notes.comment(s.queue(), number, body, kind=kind, author=s.actor)
    if json_:
        output.emit_json(made)
    else:
        output.line(f"Commented on issue #{number}")


def history(
    ctx: typer.Context,
    number: Number,
    limit: Annotated[int, typer.Option(min=1, max=200)] = 50,
    json_: JsonFlag = False,
) -> None:
    """Show the audit history of an issue (also of a deleted one)."""
    q = state(ctx).queue(existing=True)
    found = notes.history(q, number, limit=limit)
    said = notes.comments(q, number) if not json_ and found[-1].kind != "deleted" else []
    if json_:
        output.emit_json(found)
        return
    output.table(
        ["when", "event", "by", "change"],
        [(output.when(e.created_at), e.kind, e.actor, e.change()) for e in found],
    )
    for c in said:
        output.line(f"\n[{c.kind.value}] {c.author or '-'} at {output.when(c.created_at)}:")
        output.line(c.body)


def register(app: typer.Typer) -> None:
    app.command()(create)
    app.command("list")(list_)
    app.command()(show)
    app.command()(update)
    app.command()(delete)
    app.command()(reopen)
    app.command()(depend)
    app.command()(undepend)
    app.command()(comment)
    app.command()(history)
