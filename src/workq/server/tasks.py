"""The MCP Tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663), server side, on the
2026-07-28 protocol: a tool call the server would otherwise hold open for minutes is
answered at once with a task handle (``resultType: "task"``); the client polls
``tasks/get`` for the tool's answer, or ends it with ``tasks/cancel``.

- Which calls: a tool registers itself (``offer``) with the kind of task it becomes
  (services/tasks/kinds.py) and how that kind's answer renders as its result. The tool
  decides per call (``offered()`` says whether it may; it then ``hands_over`` a task).
- Only for a request of the 2026-07-28 protocol whose per-request capabilities declare
  the extension; a legacy session, or a client that does not declare it, gets today's
  answer. ``tasks/*`` from a client that does not declare it: -32021 with the required
  capability; an unknown, another caller's or an expired task: -32602 (one answer for
  all three: whether another caller's task exists is not told).
- A task belongs to the caller that made it (its run id: the server's over stdio, the
  session's over HTTP, see sessions.py), and lives in the database: any worker process,
  or the server restarted, answers for it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_NAME_HEADER, decode_header_value
from mcp.types import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    CallToolRequestParams,
    CallToolResult,
    RequestParams,
)
from mcp.types.version import MODERN_PROTOCOL_VERSIONS
from mcp_types import methods as wire
from pydantic import Field

from workq.domain import dates
from workq.errors import Spelling, TaskExpired, TaskNotFound, WorkqError, revived, tool_call
from workq.schemas import TaskStatus, TaskView
from workq.server.results import OBJECT_FAILURES, SPELLING, failure, object_failure
from workq.server.state import ServerState

if TYPE_CHECKING:
    from workq.services.handle import Queue

TASKS = "io.modelcontextprotocol/tasks"
MODERN = frozenset(MODERN_PROTOCOL_VERSIONS)


@dataclass(frozen=True)
class ToolTask:
    """A tool whose calls may become tasks of ``kind``: how the kind's answer (its
    ``value``) renders as the tool's result, and the wording in front of a refusal."""

    tool: str
    kind: str
    render: Callable[[Any], CallToolResult]
    refused: str


_BY_TOOL: dict[str, ToolTask] = {}
_BY_KIND: dict[str, ToolTask] = {}


def offer(task: ToolTask) -> None:
    """Calls of ``task.tool`` may become tasks of ``task.kind``."""
    _BY_TOOL[task.tool] = task
    _BY_KIND[task.kind] = task


@dataclass
class Offer:
    """A call that may become a task: the tool hands the task it made over here."""

    task: TaskView | None = None


_OFFER: ContextVar[Offer | None] = ContextVar("workq_task_offer", default=None)


def offered() -> Offer | None:
    """The offer of the tool call being served: the client declared the extension on a
    2026-07-28 request and the tool may answer with a task. None: answer as always."""
    return _OFFER.get()


def declares(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether this request is of the 2026-07-28 protocol and its client declared the
    extension in its per-request capabilities."""
    if ctx.protocol_version not in MODERN:
        return False
    capabilities = ctx.session.client_capabilities
    declared = capabilities.extensions if capabilities is not None else None
    return bool(declared) and TASKS in (declared or {})


def require(ctx: ServerRequestContext[Any, Any]) -> None:
    if not declares(ctx):
        raise MCPError(
            code=MISSING_REQUIRED_CLIENT_CAPABILITY,
            message="Missing required client capability",
            data={"requiredCapabilities": {"extensions": {TASKS: {}}}},
        )


def _routed(ctx: ServerRequestContext[Any, Any], task_id: str) -> None:
    """Over Streamable HTTP a ``tasks/*`` request names its task in ``Mcp-Name`` too (for
    routing intermediaries, SEP-2663): a header that says another task is refused with
    -32020 (HeaderMismatch, SEP-2243), as the SDK refuses it on ``tools/call``."""
    headers = getattr(ctx.request, "headers", None)
    named = headers.get(MCP_NAME_HEADER) if headers is not None else None
    if named is not None and decode_header_value(named) != task_id:
        raise MCPError(
            code=HEADER_MISMATCH,
            message=f"{MCP_NAME_HEADER} header does not match the request body's 'taskId'",
        )


def task_fields(view: TaskView) -> dict[str, Any]:
    """The ``Task`` of the schema: every field it has for ``view``."""
    fields: dict[str, Any] = {
        "taskId": view.id,
        "status": view.status.value,
        "createdAt": dates.iso_ms(view.created_at),
        "lastUpdatedAt": dates.iso_ms(view.updated_at),
        "ttlMs": view.ttl_ms,
        "pollIntervalMs": view.poll_interval_ms,
    }
    if view.status_message:
        fields["statusMessage"] = view.status_message
    return fields


def created(view: TaskView) -> dict[str, Any]:
    """The ``CreateTaskResult`` of a new task."""
    return {"resultType": "task", **task_fields(view)}


def _rendered(view: TaskView, version: str, spell: Spelling) -> CallToolResult:
    tool_task = _BY_KIND.get(view.kind)
    answer = view.answer or {}
    if tool_task is None:  # a kind this server does not offer (another version's)
        raise MCPError(code=INTERNAL_ERROR, message="Failed to retrieve task: unknown kind")
    said = SPELLING.set(spell)
    try:
        if "refused" in answer:
            result = failure(revived(answer["refused"]), tool_task.refused)
        else:
            result = tool_task.render(answer.get("value"))
        if tool_task.tool in OBJECT_FAILURES and result.is_error:
            result = object_failure(tool_task.tool, result)
    finally:
        SPELLING.reset(said)
    return result


def detailed(view: TaskView, version: str, spell: Spelling = tool_call) -> dict[str, Any]:
    """The ``DetailedTask`` of ``view``: the task, with its result when completed (the
    tool's result as the synchronous call gives it) or its error when failed."""
    fields = task_fields(view)
    if view.status is TaskStatus.COMPLETED:
        result = _rendered(view, version, spell)
        dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        fields["result"] = wire.serialize_server_result("tools/call", version, dumped)
    elif view.status is TaskStatus.FAILED:
        fields["error"] = view.error or {"code": INTERNAL_ERROR, "message": "Task failed"}
    return fields


class TaskParams(RequestParams):
    """The params of ``tasks/get``, ``tasks/update`` and ``tasks/cancel`` (other keys, such
    as ``tasks/update``'s ``inputResponses``, are ignored)."""

    task_id: str = Field(alias="taskId")


def _not_found(verb: str, exc: WorkqError) -> MCPError:
    reason = "Task has expired" if isinstance(exc, TaskExpired) else "Task not found"
    return MCPError(code=INVALID_PARAMS, message=f"Failed to {verb} task: {reason}")


@dataclass
class TasksExtension(Extension):
    """The extension, bound to one server's state."""

    state: ServerState
    spell: Spelling = field(default=tool_call)

    identifier = TASKS

    def methods(self) -> Sequence[MethodBinding]:
        only = frozenset(MODERN_PROTOCOL_VERSIONS)
        return (
            MethodBinding("tasks/get", TaskParams, self._get, protocol_versions=only),
            MethodBinding("tasks/update", TaskParams, self._update, protocol_versions=only),
            MethodBinding("tasks/cancel", TaskParams, self._cancel, protocol_versions=only),
        )

    async def intercept_tool_call(
        self,
        params: CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        if params.name not in _BY_TOOL or not declares(ctx):
            return await call_next(ctx)
        chance = Offer()
        token = _OFFER.set(chance)
        try:
            result = await call_next(ctx)
        finally:
            _OFFER.reset(token)
        if chance.task is not None:
            return created(chance.task)
        return result

    # -- the methods ---------------------------------------------------------------------

    def owner(self) -> str:
        """The caller asking, as tasks are owned: its run id, checked as every call's is
        (another live caller's binding of it is refused)."""
        return self.state.authority().acts_as or self.state.run_id

    async def _as_owner(
        self, verb: str, act: Callable[[Queue, str, str], TaskView], task_id: str
    ) -> TaskView:
        def run() -> TaskView:
            try:
                owner = self.owner()
            except WorkqError as exc:  # this caller cannot act as itself: it owns nothing
                raise TaskNotFound() from exc
            return act(self.state.queue(), task_id, owner)

        try:
            return await anyio.to_thread.run_sync(run)
        except TaskNotFound as exc:
            raise _not_found(verb, exc) from None
        except WorkqError as exc:
            raise MCPError(code=INTERNAL_ERROR, message=exc.describe()) from exc

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> HandlerResult:
        from workq.services.tasks import lifecycle

        require(ctx)
        _routed(ctx, params.task_id)
        view = await self._as_owner("retrieve", lifecycle.poll, params.task_id)
        return {"resultType": "complete", **detailed(view, ctx.protocol_version, self.spell)}

    async def _update(
        self, ctx: ServerRequestContext[Any, Any], params: TaskParams
    ) -> HandlerResult:
        """No workq task ever asks for input: the task must exist; responses are ignored
        (every key is one not outstanding)."""
        from workq.services.tasks import store

        require(ctx)
        _routed(ctx, params.task_id)

        def look(q: Queue, task_id: str, owner: str) -> TaskView:
            return store.owned(q, task_id, owner).view()

        await self._as_owner("update", look, params.task_id)
        return {"resultType": "complete"}

    async def _cancel(
        self, ctx: ServerRequestContext[Any, Any], params: TaskParams
    ) -> HandlerResult:
        from workq.services.tasks import lifecycle

        require(ctx)
        _routed(ctx, params.task_id)
        await self._as_owner("cancel", lifecycle.cancel, params.task_id)
        return {"resultType": "complete"}


def hand_over(chance: Offer, view: TaskView) -> None:
    """The tool answers its call with task ``view`` (the extension returns its handle)."""
    chance.task = view


__all__ = [
    "TASKS",
    "Offer",
    "TasksExtension",
    "ToolTask",
    "declares",
    "hand_over",
    "offer",
    "offered",
    "require",
]
