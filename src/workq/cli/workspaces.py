"""Agent workspaces on the command line: repositories, worktrees, agents, the conflict scan
and the merge queue (contract D's agit)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from workq.cli import output
from workq.cli.state import state
from workq.errors import NotFound
from workq.schemas import LAND_MODES, MERGE_MODES, ON_REFUSED, LandingStatus, WorktreeInfo
from workq.services.handle import Queue
from workq.services.queue import agents, issues
from workq.services.workspaces import (
    claiming,
    conflicts,
    landings,
    merges,
    repositories,
    worktree_cleanup,
    worktrees,
)

repo_app = typer.Typer(help="Registered git repositories.", no_args_is_help=True)
worktree_app = typer.Typer(help="A git worktree per claimed issue.", no_args_is_help=True)

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
RepoArg = Annotated[str, typer.Argument(help="The repository's name.")]
RepoOpt = Annotated[str | None, typer.Option("--repo", help="Only this repository.")]
Number = Annotated[int, typer.Argument(help="The issue number.", min=1)]
LandOpt = Annotated[
    str,
    typer.Option(
        "--land",
        help="local: merge into the default branch here; pr: through a pull request on GitHub.",
    ),
]
GitHubOpt = Annotated[
    str | None,
    typer.Option(
        "--github", help="OWNER/NAME pull requests go to (default: the one origin names)."
    ),
]
OnRefusedOpt = Annotated[
    str,
    typer.Option(
        "--on-refused",
        help="A refused landing: return (to its holder, with a comment) or block (the issue).",
    ),
]
RunId = Annotated[
    str | None,
    typer.Option("--run-id", help="Whom you act for (default: WORKQ_RUN_ID or --as)."),
]


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    if n < 1024:
        return f"{n} B"
    size = n / 1024
    for unit in ("KiB", "MiB"):
        if size < 1024:
            return f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def _worktrees(found: list[WorktreeInfo], *, disk: bool = False) -> None:
    if not found:
        output.line("No worktrees")
        return
    columns = ["id", "repo", "#", "branch", "state", "agent", "path"]
    output.table(
        [*columns, *(["disk"] if disk else [])],
        [
            (
                w.id,
                w.repository,
                w.number,
                w.branch,
                w.state,
                w.agent,
                w.path,
                *([_size(w.disk_bytes)] if disk else []),
            )
            for w in found
        ],
    )


@repo_app.command("add")
def repo_add(
    ctx: typer.Context,
    name: RepoArg,
    path: Annotated[Path, typer.Argument(help="The repository (any of its worktrees).")] = Path(),
    default_branch: Annotated[
        str | None, typer.Option("--default-branch", help="Default: the checked-out branch.")
    ] = None,
    folder: Annotated[
        Path | None, typer.Option("--dir", help="Worktree folder (default PATH/.worktrees).")
    ] = None,
    auto_worktree: Annotated[
        bool, typer.Option("--worktree-per-claim", help="Every claim makes a worktree.")
    ] = False,
    merge_mode: Annotated[
        str, typer.Option("--merge-mode", help=f"One of {', '.join(MERGE_MODES)}.")
    ] = "merge",
    land: LandOpt = "local",
    github: GitHubOpt = None,
    on_refused: OnRefusedOpt = "return",
    update_branch: Annotated[
        bool,
        typer.Option(
            "--update-branch/--no-update-branch",
            help="With --land pr: bring a pull request behind its base up to date on GitHub "
            "(the default).",
        ),
    ] = True,
    json_: JsonFlag = False,
) -> None:
    """Register a local git repository."""
    repo = repositories.add(
        state(ctx).queue(),
        name,
        path,
        default_branch=default_branch,
        worktree_dir=folder,
        auto_worktree=auto_worktree,
        merge_mode=merge_mode,
        land=land,
        github_repo=github,
        on_refused=on_refused,
        update_branch=update_branch,
    )
    if json_:
        output.emit_json(repo)
        return
    output.line(f"Registered {repo.name}: {repo.path} (default branch {repo.default_branch})")
    if repo.land == "pr":
        output.line(f"Its issues land through pull requests on {repo.github_repo}")


@repo_app.command("set")
def repo_set(
    ctx: typer.Context,
    name: RepoArg,
    land: Annotated[
        str | None, typer.Option("--land", help=f"One of {', '.join(LAND_MODES)}.")
    ] = None,
    github: GitHubOpt = None,
    on_refused: Annotated[
        str | None, typer.Option("--on-refused", help=f"One of {', '.join(ON_REFUSED)}.")
    ] = None,
    update_branch: Annotated[
        bool | None,
        typer.Option(
            "--update-branch/--no-update-branch",
            help="Bring a pull request behind its base up to date on GitHub.",
        ),
    ] = None,
    merge_mode: Annotated[
        str | None, typer.Option("--merge-mode", help=f"One of {', '.join(MERGE_MODES)}.")
    ] = None,
    json_: JsonFlag = False,
) -> None:
    """Change how a repository lands its issues' work (what is not given stays)."""
    s = state(ctx)
    repo = repositories.configure(
        s.queue(),
        name,
        merge_mode=merge_mode,
        land=land,
        github_repo=github,
        on_refused=on_refused,
        update_branch=update_branch,
        actor=s.actor,
    )
    if json_:
        output.emit_json(repo)
        return
    if repo.land != "pr":
        output.line(f"{repo.name} lands locally (the merge queue moves its default branch)")
        return
    output.line(
        f"{repo.name} lands through pull requests on {repo.github_repo}; a refused landing "
        + ("blocks its issue" if repo.on_refused == "block" else "goes back to its holder")
        + ("; a branch behind is updated on GitHub" if repo.update_branch else "")
    )


@repo_app.command("list")
def repo_list(ctx: typer.Context, json_: JsonFlag = False) -> None:
    """List registered repositories."""
    found = repositories.list_all(state(ctx).queue(existing=True))
    if json_:
        output.emit_json(found)
        return
    if not found:
        output.line("No repositories")
        return
    output.table(
        ["name", "path", "default branch", "worktrees", "tasks", "merge"],
        [
            (r.name, r.path, r.default_branch, r.worktree_count, r.task_count, r.merge_mode)
            for r in found
        ],
    )


@repo_app.command("status")
def repo_status(ctx: typer.Context, name: RepoArg, json_: JsonFlag = False) -> None:
    """A repository: its worktrees and the files two of them both change."""
    repo = claiming.overview(state(ctx).queue(existing=True), name)
    if json_:
        output.emit_json(repo)
        return
    output.fields(
        [
            ("name", repo.name),
            ("path", repo.path),
            ("default branch", repo.default_branch),
            ("remote", repo.remote_url),
            ("worktree folder", repo.worktree_dir),
            ("merge mode", repo.merge_mode),
            (
                "lands",
                f"through pull requests on {repo.github_repo}" if repo.land == "pr" else "locally",
            ),
            ("tasks", repo.task_count),
        ]
    )
    output.line("")
    _worktrees(repo.worktrees)
    for c in repo.conflicts:
        output.line(f"conflict: {c.file} changed by {', '.join(f'#{n}' for n in c.issues)}")


@repo_app.command("assign")
def repo_assign(
    ctx: typer.Context,
    number: Number,
    name: RepoArg,
    force: Annotated[
        bool, typer.Option(help="Even if another run holds a live claim on it (admin).")
    ] = False,
) -> None:
    """Put an issue in a repository. An issue another run holds a live claim on is its
    holder's to move: --force moves it anyway (recorded in the history)."""
    s = state(ctx)
    by = s.acting(override="workq repo assign --force" if force else None)
    repositories.assign(s.queue(), number, name, by=by, actor=s.actor)
    output.line(f"Issue #{number} is in repository {name}")


@worktree_app.command("list")
def worktree_list(
    ctx: typer.Context,
    repo: RepoOpt = None,
    everything: Annotated[bool, typer.Option("--all", help="Merged and removed too.")] = False,
    json_: JsonFlag = False,
) -> None:
    """List worktrees (active ones unless --all), with their disk use."""
    found = worktrees.list_worktrees(
        state(ctx).queue(existing=True), repo, everything=everything, disk=True
    )
    if json_:
        output.emit_json(found)
        return
    _worktrees(found, disk=True)


@worktree_app.command("spawn")
def worktree_spawn(
    ctx: typer.Context,
    number: Number,
    repo: Annotated[str | None, typer.Option("--repo", help="Default: the issue's.")] = None,
    branch: Annotated[str | None, typer.Option(help="Default: {type}/{number}-{slug}.")] = None,
    json_: JsonFlag = False,
) -> None:
    """Make (or show) the worktree of an issue."""
    s = state(ctx)
    q = s.queue()
    name = repo or _repository_of(s.queue(), number)
    info = worktrees.spawn(q, name, number, by=s.acting(), branch=branch)
    if json_:
        output.emit_json(info)
        return
    output.line(f"{info.path} (branch {info.branch}, worktree {info.worktree_id})")


def _repository_of(q: Queue, number: int) -> str:
    issue = issues.get(q, number)
    if issue.repository is None:
        raise NotFound(
            f"Issue #{number} belongs to no repository",
            hint=f"name one with --repo, or run 'workq repo assign {number} NAME'",
        )
    return issue.repository


@worktree_app.command("remove")
def worktree_remove(
    ctx: typer.Context,
    worktree_id: Annotated[str, typer.Argument(help="The worktree's id (workq worktree list).")],
    repo: Annotated[str, typer.Option("--repo", help="Its repository.")],
    run_id: RunId = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Even with uncommitted changes, and while someone else holds its issue "
            "(recorded in its history).",
        ),
    ] = False,
) -> None:
    """Remove a worktree (its branch stays if it has unmerged commits). While its issue is
    claimed, only its holder may (--run-id, WORKQ_RUN_ID or --as), unless --force."""
    s = state(ctx)
    by = s.acting(run_id, override="workq worktree remove --force" if force else None)
    gone = worktree_cleanup.remove(s.queue(), repo, worktree_id, by=by, force=force, actor=s.actor)
    output.line(f"Removed {gone.path} (branch {gone.branch})")


@worktree_app.command("prune")
def worktree_prune(
    ctx: typer.Context,
    repo: RepoOpt = None,
    force: Annotated[
        bool, typer.Option("--force", help="Remove dirty ones too (uncommitted work is lost).")
    ] = False,
    json_: JsonFlag = False,
) -> None:
    """Remove the worktrees of done, released or deleted issues; keep dirty ones unless
    --force. Prints the disk use of each."""
    report = worktree_cleanup.prune(state(ctx).queue(), repo, force=force)
    if json_:
        output.emit_json(report)
        return
    freed = sum(w.disk_bytes or 0 for w in report.removed)
    for w in report.removed:
        output.line(f"removed {w.path} ({_size(w.disk_bytes)})")
    for w in report.kept:
        output.line(f"kept    {w.path} ({_size(w.disk_bytes)})")
    output.line(f"{len(report.removed)} removed ({_size(freed)} freed), {len(report.kept)} kept")


def agents_command(ctx: typer.Context, json_: JsonFlag = False) -> None:
    """Agents and run ids at work: last seen, what each holds, and where."""
    q = state(ctx).queue(existing=True)
    found = worktrees.with_paths(q, agents.roster(q))
    if json_:
        output.emit_json(found)
        return
    if not found:
        output.line("No agents")
        return
    output.table(
        ["id", "name", "type", "last seen", "holds", "worktrees"],
        [
            (
                a.agent_id,
                a.name,
                a.type,
                output.when(a.last_seen),
                ", ".join(f"#{n}" + (" (stalled)" if n in a.stalled else "") for n in a.claims)
                or "-",
                ", ".join(a.worktrees) or "-",
            )
            for a in found
        ],
    )


def conflicts_command(ctx: typer.Context, repo: RepoArg, json_: JsonFlag = False) -> None:
    """Files that two or more active worktrees of a repository change."""
    report = conflicts.scan(state(ctx).queue(existing=True), repo)
    if json_:
        output.emit_json(report)
        return
    for c in report.conflicts:
        shown = ", ".join(f"#{n}" for n in c.issues) or ", ".join(c.worktrees)
        output.line(f"{c.file}: {shown}")
    output.line(f"{len(report.conflicts)} file(s) in conflict, {report.scanned_worktrees} scanned")


def merge_command(
    ctx: typer.Context,
    number: Number,
    run_id: RunId = None,
    force: Annotated[
        bool, typer.Option(help="Merge it whoever holds it (admin; recorded in its history).")
    ] = False,
    status: Annotated[
        bool, typer.Option("--status", help="Show where its landing stands; change nothing.")
    ] = False,
    json_: JsonFlag = False,
) -> None:
    """Merge an issue's worktree into its repository's default branch, complete the issue,
    remove the worktree and branch. Only its holder merges it (--run-id, WORKQ_RUN_ID or
    --as), unless --force. Waits for a merge in progress; rerun after a crash.

    In a repository that lands through pull requests (workq repo set NAME --land pr), the
    branch is queued: the GitHub worker (workq sync github --watch, or the server's) pushes
    it, opens its pull request, waits for its checks and merges it; --status follows it."""
    s = state(ctx)
    if status:
        found = landings.require(s.queue(existing=True), number)
        if json_:
            output.emit_json(found)
        else:
            _landing(found)
        return
    by = s.acting(run_id, override="workq merge --force" if force else None)
    done = merges.merge_issue(
        s.queue(), number, by=by, actor=s.actor, lease_seconds=s.settings().merge_lease_seconds
    )
    if json_:
        output.emit_json(done)
        return
    if done.landing is not None:
        _landing(done.landing)
        if done.note:
            output.line(f"Note: {done.note}")
        return
    again = " (already merged: cleaned up)" if done.already_merged else ""
    output.line(f"Merged {done.branch} into {done.into} at {done.commit}{again}")
    if done.note:
        output.line(f"Note: {done.note}")


def _landing(found: LandingStatus) -> None:
    pull = f"pull request #{found.pr_number} ({found.pr_url})" if found.pr_number else None
    output.fields(
        [
            ("issue", f"#{found.number}"),
            ("branch", f"{found.branch} at {found.head_sha[:12]}"),
            ("state", found.state),
            ("detail", found.detail),
            ("pull request", pull),
            ("merged as", found.merge_sha),
            ("asked by", found.requested_by),
            ("updated", output.when(found.updated_at)),
        ]
    )


def register(app: typer.Typer) -> None:
    app.add_typer(repo_app, name="repo")
    app.add_typer(worktree_app, name="worktree")
    app.command("agents")(agents_command)
    app.command("conflicts")(conflicts_command)
    app.command("merge")(merge_command)
