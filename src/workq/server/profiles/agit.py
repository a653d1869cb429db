"""agit (contract D, profile ``agit``) over the queue: repositories, a worktree per task,
agents, the conflict scan and the merge queue. A task is a workq issue of the repository,
its id ``t-<number>``.

Each tool answers with agit's JSON as text (its error objects too, with workq's code
and next step added) and the same data as structured content."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any

from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, Field

from workq.errors import InvalidInput, MergeConflict, NotFound, WorkqError
from workq.schemas import (
    PAGE_MAX,
    RUN_ID_MAX,
    ConflictReport,
    ReadyFilter,
)
from workq.server.profiles.agit_answers import (
    AgentId,
    Beat,
    ClaimedTask,
    CompletedTask,
    Merged,
    Registered,
    Removed,
    RepoItem,
    RepoName,
    Repos,
    RepoStatus,
    Spawned,
    TaskId,
    TaskItem,
    Tasks,
    WorktreeId,
    WorktreeItem,
    task_id,
    task_number,
    task_status,
)
from workq.server.registry import READ_ONLY, Registry, writes
from workq.server.results import ERROR_META, SPELLING, failure
from workq.server.state import ServerState


def _answer(text_data: Any, data: BaseModel | dict[str, Any]) -> CallToolResult:
    structured = data.model_dump(mode="json") if isinstance(data, BaseModel) else data
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(text_data, default=str))],
        structured_content=structured,
    )


def _error(error: WorkqError, message: str | None = None, **extra: Any) -> CallToolResult:
    """agit's error object as text (``{"error": ...}``), workq's code and hint too."""
    result = failure(error)
    body: dict[str, Any] = {"error": message or error.message, **extra, "code": error.code}
    hint = error.hint_for(SPELLING.get())
    if hint:
        body["hint"] = hint
    result.content = [TextContent(type="text", text=json.dumps(body))]
    meta = dict(result.meta or {})
    meta[ERROR_META] = {**meta.get(ERROR_META, {}), **extra}
    result.meta = meta
    return result


def _guarded(call: Callable[[], CallToolResult]) -> CallToolResult:
    try:
        return call()
    except MergeConflict as exc:
        files = list(exc.facts.get("conflicting_files", []))
        return _error(exc, "merge would result in conflicts", conflicting_files=files)
    except WorkqError as exc:
        return _error(exc)


def _number(task: str) -> int:
    number = task_number(task)
    if number is None:
        raise InvalidInput(f"task id {task!r:.40} is not t-<number>", field="task_id")
    return number


def _of_the_worktree(error: WorkqError) -> bool:
    """Whether a claim was refused for its worktree (none could be made, or the issue is in
    no repository) rather than for the task: agit words only the latter as its own."""
    return error.facts.get("field") == "worktree" or bool(
        {"claim_released", "claim_kept"} & set(error.facts)
    )


def _tasks(state: ServerState, repo: str) -> list[TaskItem]:
    from workq.services.workspaces import repositories

    return [
        TaskItem(
            id=task_id(i.number),
            description=i.title,
            status=task_status(i),
            agent=i.claimed_by,
            created_at=i.created_at,
        )
        for i in repositories.tasks(state.queue(), repo)
    ]


def _claim_order(state: ServerState, repo: str, items: list[TaskItem]) -> list[TaskItem]:
    """Pending tasks marked claimable or not, the claimable first in the order claims
    take them (as issue_ready orders them), then the others by number."""
    from workq.services.queue import ready_queue

    pending = {t.id: t for t in items if t.status == "pending"}
    if not pending:
        return items
    ready = ready_queue.ready(
        state.queue(), ReadyFilter(repository=repo), limit=PAGE_MAX, holder=state.run_id
    )
    order = {task_id(r.number): n for n, r in enumerate(ready)}
    for t in pending.values():
        t.claimable = t.id in order
    first = sorted((t for t in items if t.id in order), key=lambda t: order[t.id])
    return first + [t for t in items if t.id not in order]


def register(reg: Registry) -> None:
    _register_repositories(reg)
    _register_tasks(reg)
    _register_merges(reg)
    _register_agents(reg)


def _register_repositories(reg: Registry) -> None:
    """Repositories, their worktrees and the conflict scan."""
    state = reg.state

    @reg.tool(READ_ONLY)
    def agit_list_repos() -> Annotated[CallToolResult, Repos]:
        """List all registered repositories."""
        from workq.services.workspaces import repositories

        def call() -> CallToolResult:
            items = [
                RepoItem.model_validate(r.model_dump())
                for r in repositories.list_all(state.queue())
            ]
            return _answer([i.model_dump() for i in items], Repos(repos=items))

        return _guarded(call)

    @reg.tool(READ_ONLY)
    def agit_repo_status(repo: RepoName) -> Annotated[CallToolResult, RepoStatus]:
        """Detailed status of a repository: its worktrees, tasks and file conflicts."""
        from workq.services.workspaces import claiming

        def call() -> CallToolResult:
            r = claiming.overview(state.queue(), repo)
            tasks = _tasks(state, repo)
            titles = {t.id: t.description for t in tasks}
            items = [
                WorktreeItem(
                    id=w.id,
                    branch=w.branch,
                    status=w.state,
                    agent=w.agent,
                    task=titles.get(task_id(w.number)) if w.number else None,
                    path=w.path,
                    task_id=task_id(w.number) if w.number else None,
                )
                for w in r.worktrees
            ]
            status = RepoStatus(
                name=r.name,
                path=r.path,
                default_branch=r.default_branch,
                remote_url=r.remote_url,
                worktrees=items,
                tasks=tasks,
                conflicts=[c.model_dump() for c in r.conflicts],
            )
            return _answer(status.model_dump(mode="json"), status)

        return _guarded(call)

    @reg.tool(writes(idempotent=False))
    def agit_spawn_worktree(
        repo: RepoName,
        task: Annotated[
            str | None,
            Field(
                max_length=256, description="A task id (t-<number>), or a description: a new task"
            ),
        ] = None,
        branch: Annotated[
            str | None, Field(max_length=255, description="Default: {type}/{number}-{slug}")
        ] = None,
        agent: Annotated[
            str | None, Field(max_length=RUN_ID_MAX, description="Agent id to hold the task")
        ] = None,
    ) -> Annotated[CallToolResult, Spawned]:
        """Create an isolated worktree for an agent, on the task's own branch. The task is
        claimed for the agent (default: this server's run)."""
        from workq.services.workspaces import claiming

        def call() -> CallToolResult:
            by = state.authority(agent)
            holder = by.acts_as or state.run_id
            number, info, _briefing = claiming.spawn_task(
                state.queue(),
                repo,
                task_number(task) if task else None,
                title=(task or f"Work of {holder}")[:256],
                by=by,
                branch=branch,
            )
            state.claimed_with(holder)
            out = Spawned(
                worktree_id=info.worktree_id,
                path=info.path,
                branch=info.branch,
                task_id=task_id(number),
            )
            return _answer(out.model_dump(), out)

        return _guarded(call)

    @reg.tool(writes(idempotent=True, destructive=True))
    def agit_remove_worktree(
        repo: RepoName,
        worktree_id: WorktreeId,
        force: Annotated[
            bool, Field(strict=True, description="Even with uncommitted changes")
        ] = False,
    ) -> Annotated[CallToolResult, Removed]:
        """Remove a worktree from disk and registry (its branch stays if it has unmerged
        commits). Refused with uncommitted changes unless force."""
        from workq.services.workspaces import worktree_cleanup

        def call() -> CallToolResult:
            worktree_cleanup.remove(
                state.queue(),
                repo,
                worktree_id,
                by=state.authority(),
                force=force,
                actor=state.run_id,
            )
            out = Removed(removed=True, worktree_id=worktree_id)
            return _answer(out.model_dump(), out)

        return _guarded(call)

    @reg.tool(READ_ONLY)
    def agit_check_conflicts(repo: RepoName) -> Annotated[CallToolResult, ConflictReport]:
        """Scan for files that two or more active worktrees change (commits and
        uncommitted changes against each one's base)."""
        from workq.services.workspaces import conflicts

        def call() -> CallToolResult:
            report = conflicts.scan(state.queue(), repo)
            return _answer(report.model_dump(), report)

        return _guarded(call)


def _register_tasks(reg: Registry) -> None:
    state = reg.state

    @reg.tool(READ_ONLY)
    def agit_list_tasks(
        repo: RepoName,
        status: Annotated[
            str | None,
            Field(description="pending, claimed, in_progress, completed or failed"),
        ] = None,
    ) -> Annotated[CallToolResult, Tasks]:
        """List the tasks (issues) of a repository."""
        from workq.services.workspaces import repositories

        def call() -> CallToolResult:
            wanted = {"claimed": "in_progress"}.get(status or "", status)
            if wanted not in (None, "pending", "in_progress", "completed", "failed"):
                raise InvalidInput(
                    "status must be pending, claimed, in_progress, completed or failed",
                    field="status",
                )
            repositories.get(state.queue(), repo)
            listed = [t for t in _tasks(state, repo) if wanted is None or t.status == wanted]
            items = _claim_order(state, repo, listed)
            return _answer(
                [t.model_dump(mode="json", exclude_none=True) for t in items], Tasks(tasks=items)
            )

        return _guarded(call)

    @reg.tool(writes(idempotent=True))
    def agit_claim_task(
        task_id: TaskId,
        agent_id: AgentId,
        worktree: Annotated[
            bool | None,
            Field(strict=True, description="Make its worktree (default: as its repository says)"),
        ] = None,
    ) -> Annotated[CallToolResult, ClaimedTask]:
        """Atomically claim a pending task for an agent (the agent id is the run id that
        holds it)."""
        from workq.services.workspaces import claiming

        def call() -> CallToolResult:
            refused = f'task "{task_id}" not found or already claimed'
            number = task_number(task_id)
            if number is None:
                raise NotFound(refused)
            # The agent id is a run id: one another live caller bound is refused
            # (RUN_ID_IN_USE), and a claim made under it binds it to this caller.
            by = state.authority(agent_id)
            try:
                taken = claiming.claim(state.queue(), number, by, worktree=worktree)
            except WorkqError as exc:
                if _of_the_worktree(exc):
                    raise
                # The contract's words, and why (the code alone told an agent too little).
                return _error(exc, refused, why=exc.message)
            state.claimed_with(agent_id)
            info = taken.worktree
            out = ClaimedTask(
                claimed=True,
                task_id=task_id,
                agent_id=agent_id,
                path=info.path if info else None,
                branch=info.branch if info else None,
                worktree_id=info.worktree_id if info else None,
                number=number,
                fence=taken.fence,
                lease_expires_at=taken.lease_expires_at,
            )
            return _answer(out.model_dump(mode="json", exclude_none=True), out)

        return _guarded(call)

    @reg.tool(writes(idempotent=True))
    def agit_complete_task(
        task_id: TaskId,
        result: Annotated[str | None, Field(max_length=10_000, description="Result")] = None,
    ) -> Annotated[CallToolResult, CompletedTask]:
        """Mark a claimed task completed, with an optional result (kept as a comment)."""
        from workq.services.queue import claims

        def call() -> CallToolResult:
            number = _number(task_id)
            claims.complete(state.queue(), number, state.authority(), note=result)
            out = CompletedTask(completed=True, task_id=task_id)
            return _answer(out.model_dump(), out)

        return _guarded(call)


def _register_merges(reg: Registry) -> None:
    state = reg.state

    @reg.tool(writes(idempotent=True, destructive=True))
    def agit_merge_worktree(
        repo: RepoName, worktree_id: WorktreeId
    ) -> Annotated[CallToolResult, Merged]:
        """Merge a worktree's branch into the default branch (refused with the conflicting
        files if it would conflict), complete its task, then remove the worktree and
        branch. Merges queue behind each other; a rerun after a crash finishes the job."""
        from workq.services.workspaces import merges

        def call() -> CallToolResult:
            done = merges.merge(
                state.queue(),
                repo,
                worktree_id,
                by=state.authority(),
                actor=state.run_id,
                lease_seconds=state.settings.merge_lease_seconds,
            )
            out = Merged(
                merged=done.merged,
                branch=done.branch,
                into=done.into,
                worktree_cleaned=done.worktree_cleaned,
                commit=done.commit,
                already_merged=done.already_merged,
                note=done.note,
                landing=done.landing,
            )
            return _answer(out.model_dump(mode="json", exclude_none=True), out)

        return _guarded(call)


def _register_agents(reg: Registry) -> None:
    state = reg.state

    @reg.tool(writes(idempotent=True))
    def agit_register_agent(
        name: Annotated[str, Field(min_length=1, max_length=128, description="Agent name")],
        type: Annotated[
            str, Field(min_length=1, max_length=32, description='e.g. "claude", "custom"')
        ],
    ) -> Annotated[CallToolResult, Registered]:
        """Register an AI agent (a name and type seen before get their id back); the id
        is a run id, bound to this caller: an agent restarted behind a new server registers
        again and acts on its own claims (refused while another live caller acts as it)."""
        from workq.services.queue import agents

        def call() -> CallToolResult:
            info = agents.register(state.queue(), name, type)
            state.authority(info.agent_id)  # RUN_ID_IN_USE while another caller acts as it
            state.claimed_with(info.agent_id)
            out = Registered(agent_id=info.agent_id, name=info.name, type=info.type)
            return _answer(out.model_dump(), out)

        return _guarded(call)

    @reg.tool(writes(idempotent=True))
    def agit_heartbeat(agent_id: AgentId) -> Annotated[CallToolResult, Beat]:
        """Update an agent's heartbeat, and renew the leases of the tasks it holds (the
        agent id is bound to this caller, as its claims are)."""
        from workq.services.queue import agents

        def call() -> CallToolResult:
            state.authority(agent_id)  # RUN_ID_IN_USE while another caller acts as it
            renewed = agents.heartbeat(state.queue(), agent_id)
            state.claimed_with(agent_id)  # a refused call binds nothing
            out = Beat(ok=True, agent_id=agent_id, renewed=renewed)
            return _answer({"ok": True, "agent_id": agent_id}, out)

        return _guarded(call)
