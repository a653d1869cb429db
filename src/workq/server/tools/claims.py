"""The claim loop: ready, claim, complete, block (contract A) and claim_next, release,
heartbeat; plus the recovery tools unblock and force_claim."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

import anyio.to_thread
from mcp.types import CallToolResult
from pydantic import Field

from workq.domain.authority import Authority
from workq.errors import InvalidInput, Step, render
from workq.schemas import (
    NOTHING_CLAIMED,
    Claim,
    ClaimedIssue,
    ClaimedNext,
    Completed,
    ReadyFilter,
    WorkspaceInfo,
)
from workq.server import tasks as tasking
from workq.server.inline import on_loop
from workq.server.outputs import Ready, Renewed, Waiting
from workq.server.params import (
    Agent,
    Confirmation,
    Fence,
    Flag,
    Labels,
    Number,
    Reason,
    Repo,
    RunId,
    Types,
    WaitSeconds,
)
from workq.server.registry import READ_ONLY, Registry, writes
from workq.server.render import numbers, ready_text
from workq.server.results import SPELLING, ok, when, worded
from workq.server.state import ServerState
from workq.server.waits import Look, until_found

NOTHING_READY = "No ready issues available"
EXPLAINED = 50  # issues issue_ready(explain=true) looks at


def _waiting(number: int, waits_on: Sequence[int]) -> str:
    """What a holder's claim has come to wait on since it was claimed, if anything."""
    if not waits_on:
        return ""
    return (
        f"\nIssue #{number} now waits on {numbers(waits_on)}, not done yet: the claim stays "
        "yours; issue_complete is refused until then"
    )


CLAIM_REFUSED = "Could not claim issue #{} (already claimed or blocked)"

WithWorktree = Annotated[bool | None, Field(strict=True, description="Make its git worktree")]


def _workspace(info: WorkspaceInfo | None) -> str:
    return f"\nworktree: {info.path} (branch {info.branch})" if info else ""


def _briefed(claim: Claim) -> str:
    """The briefing of the claim before, which did not complete (its only place in the
    schema-less answer: the text)."""
    if claim.briefing is None:
        return ""
    return "\n\nBefore you:\n" + "\n".join(f"- {line}" for line in claim.briefing.lines(when))


def _filter(
    agent: str | None,
    include_types: Sequence[str] | None,
    exclude_types: Sequence[str] | None,
    labels: Sequence[str] | None,
    repository: str | None = None,
) -> ReadyFilter | None:
    if not (agent or include_types or exclude_types or labels or repository):
        return None
    return ReadyFilter.model_validate(
        {
            "agent": agent,
            "include_types": include_types,
            "exclude_types": exclude_types,
            "labels": labels,
            "repository": repository,
        }
    )


def _worktree_left(kept: WorkspaceInfo, *, removed: bool) -> str:
    """What a block did with the issue's worktree; how to remove one it leaves."""
    where = f"{kept.worktree_id} at {kept.path} (branch {kept.branch})"
    if removed:
        return f"Removed its worktree {where}; the branch stays if it has unmerged commits"
    how = render(("remove it with ", Step.REMOVE_WORKTREE), SPELLING.get(), kept.model_dump())
    return f"Its worktree {where} stays for whoever takes it up; {how}"


def register_core(reg: Registry) -> None:
    _register_claiming(reg)
    _register_holding(reg)


def _register_claiming(reg: Registry) -> None:
    """Finding a ready issue and claiming one."""
    state = reg.state

    @reg.tool(READ_ONLY)
    async def issue_ready(
        agent: Agent | None = None,
        include_types: Types | None = None,
        exclude_types: Types | None = None,
        labels: Annotated[Labels | None, Field(description="Must carry all")] = None,
        wait_seconds: WaitSeconds = None,
        repository: Repo | None = None,
        explain: Flag = False,
    ) -> Annotated[CallToolResult, Ready]:
        """The next ready issue: open, unblocked, unclaimed; urgent first, then oldest.
        Does not claim it (issue_claim or issue_claim_next does)."""
        from workq.services.queue import ready_queue

        wanted = _filter(agent, include_types, exclude_types, labels, repository)
        found = await until_found(
            state,
            lambda: ready_queue.ready(state.queue(), wanted, holder=state.run_id) or None,
            wait_seconds or 0,
            Look(
                (wanted.model_dump_json() if wanted else None, False),
                lambda: ready_queue.any_ready(state.queue(), wanted),
            ),
        )
        text = ready_text(found[0]) if found else NOTHING_READY
        issue = found[0] if found else None
        if not explain:
            return ok(text, Ready.of(issue))
        why = ready_queue.explain(state.queue(), wanted, holder=state.run_id, limit=EXPLAINED)
        text += "\nNot ready:" if why else "\nEvery unfinished issue is ready."
        text += "".join(f"\n- #{n.number} {n.title}: {'; '.join(n.reasons)}" for n in why)
        return ok(text, Ready.of(issue, why))

    @reg.tool(writes(idempotent=True))
    def issue_claim(
        number: Number, run_id: RunId = None, worktree: WithWorktree = None
    ) -> Annotated[CallToolResult, Claim]:
        """Claim an issue for a run. Claiming again as the same run renews the lease."""
        from workq.services.workspaces import claiming

        with worded(
            f"Could not claim issue #{number}", conflicts_only=CLAIM_REFUSED.format(number)
        ):
            by = state.authority(run_id)
            claim = claiming.claim(state.queue(), number, by, worktree=worktree)
            state.claimed_with(claim.claimed_by)
        text = f"Claimed issue #{number}" + _waiting(number, claim.waits_on)
        return ok(text + _workspace(claim.worktree) + _briefed(claim), claim)

    @reg.tool(writes(idempotent=False))
    async def issue_claim_next(
        run_id: RunId = None,
        agent: Agent | None = None,
        include_types: Types | None = None,
        exclude_types: Types | None = None,
        labels: Annotated[Labels | None, Field(description="Must carry all")] = None,
        wait_seconds: WaitSeconds = None,
        repository: Repo | None = None,
        worktree: WithWorktree = None,
    ) -> Annotated[CallToolResult, ClaimedNext]:
        """Claim the next ready issue in one step (no race with other agents) and return
        it with its description."""
        from workq.services.workspaces import claiming

        wanted = _filter(agent, include_types, exclude_types, labels, repository)
        with worded(CLAIM_NEXT_REFUSED):
            by = state.authority(run_id)

        def attempt() -> ClaimedIssue | None:
            return claiming.claim_next(state.queue(), by, wanted, worktree=worktree)

        chance = tasking.offered()
        if chance is not None and wait_seconds:
            # The client takes tasks: try once; if nothing is there, answer with a task
            # that claims when work comes (services/tasks/claim_next.py).
            with worded(CLAIM_NEXT_REFUSED):
                issue = await anyio.to_thread.run_sync(attempt)
                if issue is None:
                    return await _claim_later(state, chance, by, wanted, worktree, wait_seconds)
        else:
            look = (
                Look(
                    (wanted.model_dump_json() if wanted else None, bool(worktree)),
                    lambda: claiming.claimable(state.queue(), wanted, worktree=worktree),
                )
                if wait_seconds
                else None  # one try: nothing to share with waiting calls
            )
            with worded(CLAIM_NEXT_REFUSED):
                issue = await until_found(state, attempt, wait_seconds or 0, look)
        if issue is not None:
            with worded(CLAIM_NEXT_REFUSED):
                state.claimed_with(issue.claimed_by)
        return claimed_next(issue)

    tasking.offer(
        tasking.ToolTask(
            tool="issue_claim_next",
            kind="claim_next",
            render=lambda value: claimed_next(_claimed_issue(value)),
            refused=CLAIM_NEXT_REFUSED,
        )
    )


CLAIM_NEXT_REFUSED = "Could not claim the next issue"


async def _claim_later(
    state: ServerState,
    chance: tasking.Offer,
    by: Authority,
    wanted: ReadyFilter | None,
    worktree: bool | None,
    wait_seconds: int,
) -> CallToolResult:
    """Answer an issue_claim_next that would wait with a task that claims for it: its run
    id is bound now (as a claim binds it), and the task is durable before it is handed
    over. What is returned here stands in for the task's handle (tasks.py answers that)."""
    from workq.services.queue import waiting
    from workq.services.tasks import claim_next as claim_task

    waiting.seconds(wait_seconds)
    if by.acts_as is not None and by.acts_as != state.run_id:
        state.claimed_with(by.acts_as)
    task = await anyio.to_thread.run_sync(
        lambda: claim_task.start(
            state.queue(),
            owner=state.run_id,
            by=by,
            f=wanted,
            worktree=worktree,
            wait_seconds=wait_seconds,
        )
    )
    tasking.hand_over(chance, task.view())
    return ok(NOTHING_READY, NOTHING_CLAIMED)


def _claimed_issue(value: Any) -> ClaimedIssue | None:
    """A task's stored answer: the claimed issue, or None (``{"claimed": false}``)."""
    if not isinstance(value, dict) or not value.get("claimed", True):
        return None
    return ClaimedIssue.model_validate(value)


def claimed_next(issue: ClaimedIssue | None) -> CallToolResult:
    """issue_claim_next's answer: the claimed issue, or that none was ready."""
    if issue is None:
        return ok(NOTHING_READY, NOTHING_CLAIMED)
    text = f"Claimed issue #{issue.number}: {issue.title}"
    text += f"\npriority: {issue.priority.value} · type: {issue.issue_type.value}"
    if issue.previous_holder:
        text += f" · taken over from {issue.previous_holder} (lease expired)"
    text += _workspace(issue.worktree)
    if issue.description:
        text += f"\n\n{issue.description}"
    return ok(text + _briefed(issue), issue)


def _register_holding(reg: Registry) -> None:
    """What a holder does with its claim: complete, block, release, renew."""
    state = reg.state

    @reg.tool(writes(idempotent=True))
    async def issue_complete(
        number: Number, run_id: RunId = None, fence: Fence = None
    ) -> Annotated[CallToolResult, Completed]:
        """Mark a claimed issue done. Only its holder may (a run id this server claimed
        with, or run_id)."""
        from workq.services.queue import claims

        with worded(f"Could not complete issue #{number}"):
            done = await on_loop(
                state,
                lambda: claims.complete(
                    state.queue(), number, state.authority(run_id, fence=fence)
                ),
            )
        text = f"Completed issue #{number}"
        if done.unblocked:
            text += f"\nNow ready: {numbers(done.unblocked)}"
        return ok(text, done)

    @reg.tool(writes(idempotent=True))
    def issue_block(
        number: Number,
        reason: Reason,
        run_id: RunId = None,
        fence: Fence = None,
        remove_worktree: Annotated[
            bool,
            Field(
                strict=True,
                description="Its worktree too (not with uncommitted changes; its branch "
                "keeps unmerged commits)",
            ),
        ] = False,
    ) -> CallToolResult:
        """Block an issue with a reason: releases the claim and keeps it out of issue_ready
        until unblocked."""
        from workq.services.queue import blocking
        from workq.services.workspaces import worktree_cleanup, worktrees

        q = state.queue()
        actor = run_id or state.run_id
        with worded(f"Could not block issue #{number}"):
            by = state.authority(run_id, fence=fence)
            kept = worktrees.get_for_issue(q, number)
            if remove_worktree and kept is not None:
                # First: a refusal (uncommitted changes, a merge under way) blocks nothing.
                worktree_cleanup.remove(q, kept.repository, kept.worktree_id, by=by, actor=actor)
            blocked = blocking.block(q, number, reason, by=by, actor=actor)
        text = f"Blocked issue #{number}: {reason}"
        data: dict[str, Any] = blocked.summary().model_dump(mode="json")
        if kept is not None:
            data["worktree"] = {**kept.model_dump(), "removed": remove_worktree}
            text += "\n" + _worktree_left(kept, removed=remove_worktree)
        return ok(text, data)

    @reg.tool(writes(idempotent=False))
    def issue_release(
        number: Number,
        reason: Reason | None = None,
        run_id: RunId = None,
        fence: Fence = None,
        discard: Annotated[
            bool, Field(strict=True, description="Even with unmerged commits (branch kept)")
        ] = False,
    ) -> CallToolResult:
        """Give up a claim without finishing: the issue goes back to the queue."""
        from workq.services.queue import claims

        with worded(f"Could not release issue #{number}"):
            by = state.authority(run_id, fence=fence)
            released = claims.release(state.queue(), number, by, reason=reason, discard=discard)
        return ok(f"Released issue #{number}", released.summary())

    @reg.tool(writes(idempotent=True))
    def issue_heartbeat(
        number: Annotated[
            Number | None, Field(description="Default: every claim of this run")
        ] = None,
        run_id: RunId = None,
        fence: Fence = None,
        note: Annotated[
            str | None,
            Field(description="Progress: not stalled"),
        ] = None,
    ) -> Annotated[CallToolResult, Renewed]:
        """Extend a claim's lease (this server renews its own claims: call it over HTTP or
        for a run id claimed elsewhere)."""
        from workq.services.queue import claims

        q = state.queue()
        if number is not None:
            with worded(f"Could not renew the claim on issue #{number}"):
                by = state.authority(run_id, fence=fence)
                claim = claims.heartbeat(q, number, by, note=note)
            text = f"Renewed claim on issue #{number} until {when(claim.lease_expires_at)}"
            text += _waiting(number, claim.waits_on)
            waiting = [Waiting(number=number, waits_on=claim.waits_on)] if claim.waits_on else []
            return ok(
                text,
                Renewed(renewed=1, lease_expires_at=claim.lease_expires_at, waiting=waiting),
            )
        if fence is not None:
            raise InvalidInput("fence needs the number of its issue", field="fence")
        if note is not None:
            raise InvalidInput("note needs the number of its issue", field="note")
        with worded("Could not renew the claims"):
            mine = state.authority(run_id).run_ids
        count = claims.renew_leases(q, mine)
        until = q.lease_until(q.now())
        waiting = [Waiting(number=n, waits_on=w) for n, w in claims.waiting(q, mine).items()]
        text = f"Renewed {count} claim(s) until {when(until)}"
        text += "".join(_waiting(w.number, w.waits_on) for w in waiting)
        return ok(text, Renewed(renewed=count, lease_expires_at=until, waiting=waiting))


def register_recovery(reg: Registry) -> None:
    state = reg.state

    @reg.tool(writes(idempotent=True))
    def issue_unblock(number: Number) -> CallToolResult:
        """Clear an issue's block so it can be ready again."""
        from workq.services.queue import blocking

        with worded(f"Could not unblock issue #{number}"):
            issue = blocking.unblock(state.queue(), number, actor=state.run_id)
        return ok(f"Unblocked issue #{number}", issue.summary())

    @reg.tool(writes(idempotent=False, destructive=True))
    def issue_force_claim(
        number: Number,
        confirmation: Confirmation,
        run_id: RunId = None,
    ) -> Annotated[CallToolResult, Claim]:
        """Take an issue from whoever holds it (a stuck or dead agent). The previous
        holder is recorded."""
        from workq.services.queue import claims

        with worded(f"Could not force-claim issue #{number}"):
            by = state.authority(run_id)
            claim = claims.force_claim(state.queue(), number, by, confirmation)
            state.claimed_with(claim.claimed_by)
        previous = claim.previous_holder or "nobody"
        return ok(f"Force-claimed issue #{number} (previous holder: {previous})", claim)
