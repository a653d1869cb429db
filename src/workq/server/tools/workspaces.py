"""The ``workspaces`` toolset: registered repositories, and the one merge of an issue's
worktree into its repository's default branch. With it on, the issue tools also take
and answer their workspace fields (``repository``, ``worktree``, ``discard``,
``remove_worktree``)."""

from __future__ import annotations

import logging
from typing import Annotated, Literal

from mcp.types import CallToolResult
from pydantic import BaseModel, Field

from workq.domain.names import REPOSITORY_NAME_MAX
from workq.errors import WorkqError
from workq.schemas import MergeResult, RepoOverview, Repository
from workq.server import tasks as tasking
from workq.server.params import Fence, Number, RunId
from workq.server.registry import READ_ONLY, Registry, writes
from workq.server.render import landing_text
from workq.server.results import SPELLING, ok, worded
from workq.server.state import ServerState
from workq.server.task_answers import refusable

log = logging.getLogger("workq.server")

RepoName = Annotated[str, Field(min_length=1, max_length=REPOSITORY_NAME_MAX)]


class Repositories(BaseModel):
    repos: list[Repository]


def register(reg: Registry) -> None:
    state = reg.state

    @reg.tool(READ_ONLY)
    def repo_list() -> Annotated[CallToolResult, Repositories]:
        """The registered git repositories, with their worktree and issue counts."""
        from workq.services.workspaces import repositories

        with worded("Could not list the repositories"):
            found = repositories.list_all(state.queue())
        lines = [f"{r.name}: {r.path} ({r.worktree_count} worktrees)" for r in found]
        return ok("\n".join(lines) or "No repositories registered", Repositories(repos=found))

    @reg.tool(READ_ONLY)
    def repo_status(repo: RepoName) -> Annotated[CallToolResult, RepoOverview]:
        """A repository's worktrees and the files two of them both change."""
        from workq.services.workspaces import claiming

        with worded(f"Could not read repository {repo}"):
            found = claiming.overview(state.queue(), repo)
        lines = [f"{found.name}: {found.path}, default branch {found.default_branch}"]
        lines += [f"#{w.number} {w.branch} ({w.state}) {w.path}" for w in found.worktrees]
        for c in found.conflicts:
            who = ", ".join(f"#{n}" for n in c.issues) or ", ".join(c.worktrees)
            lines.append(f"conflict: {c.file} ({who})")
        return ok("\n".join(lines), found)

    @reg.tool(writes(idempotent=True, destructive=True))
    def issue_merge(
        number: Number,
        run_id: RunId = None,
        fence: Fence = None,
        strategy: Annotated[
            Literal["no-ff", "squash"] | None,
            Field(description="Default: the repository's (fast-forward when possible)"),
        ] = None,
    ) -> Annotated[CallToolResult, MergeResult]:
        """Merge the issue's worktree into its repository's default branch (refused with
        the conflicting files, or the failing gates), complete the issue, remove the
        worktree and branch. Only its holder may. Merges queue; call again after a crash."""
        from workq.services.tasks import merge as merge_task
        from workq.services.workspaces import merges

        chance = tasking.offered()
        with worded(f"Could not merge issue #{number}"):
            by = state.authority(run_id, fence=fence)
            actor = run_id or state.run_id
            lease = state.settings.merge_lease_seconds
            if chance is not None:  # gates to run longer than a moment: a task runs them
                task = merge_task.start_if_long(
                    state.queue(),
                    owner=state.run_id,
                    number=number,
                    by=by,
                    actor=actor,
                    lease_seconds=lease,
                    strategy=strategy,
                    spell=SPELLING.get(),
                )
                if task is not None:
                    tasking.hand_over(chance, task.view())
                    return ok(f"Merging issue #{number}", {})
            done = merges.merge_issue(
                state.queue(), number, by=by, actor=actor, lease_seconds=lease, strategy=strategy
            )
        if chance is not None:
            _follow(state, chance, done)
        return merge_answer(done)

    for kind in ("landing", "merge"):
        tasking.offer(
            tasking.ToolTask(
                tool="issue_merge",
                kind=kind,
                render=refusable(lambda value: merge_answer(MergeResult.model_validate(value))),
                refused="Could not merge issue",
            )
        )


def _follow(state: ServerState, chance: tasking.Offer, done: MergeResult) -> None:
    """If ``done`` queued a landing through a pull request that the GitHub worker still
    moves, answer with a task that follows it until it lands or is refused
    (services/tasks/landing.py). The landing is queued whatever happens here: a task that
    could not be made leaves the synchronous answer."""
    from workq.services.tasks import landing as landing_task

    if done.landing is None or not landing_task.follows(done.landing):
        return
    try:
        task = landing_task.start(state.queue(), owner=state.run_id, landing=done.landing)
    except WorkqError as exc:
        log.warning("workq: issue_merge answered without a task: %s", exc.describe())
        return
    tasking.hand_over(chance, task.view())


def merge_answer(done: MergeResult) -> CallToolResult:
    """issue_merge's answer: merged (at which commit), or where its landing through a pull
    request stands (landed, refused with what to repair, or still moving)."""
    note = f"\nNote: {done.note}" if done.note else ""
    if done.landing is not None:
        return ok(landing_text(done.landing) + note, done)
    at = (done.commit or "")[:12]
    again = " (already merged)" if done.already_merged else ""
    text = f"Merged issue #{done.number}: {done.branch} into {done.into} at {at}{again}"
    return ok(text + note, done)
