"""``notifications/tasks`` on ``subscriptions/listen`` (the Tasks extension's push channel).

The SDK serves ``subscriptions/listen`` with a closed vocabulary (mcp/shared/subscriptions.py:
list changes and resource updates): its acknowledgement drops a filter key it does not know,
such as ``taskIds``, and its bus carries no task events. So a listen request that names
``taskIds`` is served here instead, as a server middleware; any other goes to the SDK
unchanged. This stream honors the SDK's own keys too (from the server's bus), and
``taskIds`` of tasks the caller owns: the acknowledgement lists those, leaving out ids that
are unknown, expired or another caller's (alike).

Each named task is sent as ``tasks/get`` would answer it at that moment (a completed one is
delivered, and so read, as by a poll), once when the stream opens and again whenever its
status or ``lastUpdatedAt`` changes, until it is terminal. The stream looks every
``LOOK_SECONDS`` (as a client polling at ``pollIntervalMs`` would); it stays open until the
client closes it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, cast

import anyio
import anyio.to_thread
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.subscriptions import SubscriptionBus
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import (
    SUBSCRIPTION_ID_META_KEY,
    ServerEvent,
    event_matches,
    event_to_notification,
)
from mcp.types import INVALID_REQUEST, SubscriptionFilter
from pydantic import BaseModel

from workq.errors import WorkqError
from workq.schemas import TERMINAL, TaskView
from workq.server.state import ServerState
from workq.server.tasks import TasksExtension, declares, detailed, require

log = logging.getLogger("workq.server")

LISTEN = "subscriptions/listen"
# How often a stream looks at its tasks when the queue does not change (a wait that ends,
# a cancel, a claim's own event, which wakes no waiting call, write no waking change).
LOOK_SECONDS = 1.0
TASK_IDS_MAX = 100


class _Notification(BaseModel):
    """A notification outside the SDK's typed vocabulary, as ``send_notification`` dumps."""

    method: str
    params: dict[str, Any]


def _honored(requested: SubscriptionFilter) -> SubscriptionFilter:
    """The SDK's own keys of the filter, as its listen handler honors them."""
    return SubscriptionFilter(
        tools_list_changed=True if requested.tools_list_changed else None,
        prompts_list_changed=True if requested.prompts_list_changed else None,
        resources_list_changed=True if requested.resources_list_changed else None,
        resource_subscriptions=list(requested.resource_subscriptions)
        if requested.resource_subscriptions
        else None,
    )


def listening(
    state: ServerState, tasks: TasksExtension, bus: SubscriptionBus
) -> ServerMiddleware[Any]:
    """Server middleware: serve a ``subscriptions/listen`` that names ``taskIds``."""

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        params = ctx.params if isinstance(ctx.params, Mapping) else {}
        wanted = params.get("notifications")
        if ctx.method != LISTEN or not isinstance(wanted, Mapping) or "taskIds" not in wanted:
            return await call_next(ctx)
        require(ctx)  # -32021 for a client that does not declare the extension
        ids = wanted.get("taskIds")
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise MCPError(code=-32602, message="notifications.taskIds must be a list of task ids")
        if ctx.request_id is None:
            raise MCPError(INVALID_REQUEST, "subscriptions/listen requires a request id")
        stream = _Stream(state, tasks, bus, ctx, SubscriptionFilter.model_validate(wanted))
        return await stream.serve(list(dict.fromkeys(ids))[:TASK_IDS_MAX])

    return middleware


class _Stream:
    def __init__(
        self,
        state: ServerState,
        tasks: TasksExtension,
        bus: SubscriptionBus,
        ctx: ServerRequestContext[Any, Any],
        requested: SubscriptionFilter,
    ) -> None:
        self.state = state
        self.tasks = tasks
        self.bus = bus
        self.ctx = ctx
        self.honored = _honored(requested)
        self.meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: ctx.request_id}
        self.sent: dict[str, tuple[str, str]] = {}

    async def _send(self, method: str, params: dict[str, Any]) -> None:
        note = _Notification(method=method, params={**params, "_meta": self.meta})
        await self.ctx.session.send_notification(
            cast(Any, note), related_request_id=self.ctx.request_id
        )

    async def serve(self, task_ids: list[str]) -> HandlerResult:
        uris = frozenset(self.honored.resource_subscriptions or ())
        events, received = anyio.create_memory_object_stream[ServerEvent](1024)

        def deliver(event: ServerEvent) -> None:
            if event_matches(self.honored, uris, event):
                try:
                    events.send_nowait(event)
                except (anyio.WouldBlock, anyio.ClosedResourceError):
                    log.warning("workq: a listen stream's backlog is full; event dropped")

        unsubscribe = self.bus.subscribe(deliver)
        try:
            owned = await self._views(task_ids)  # the first look: which are the caller's
            acknowledged = self.honored.model_dump(by_alias=True, exclude_none=True)
            acknowledged["taskIds"] = [v.id for v in owned]
            await self._send(
                "notifications/subscriptions/acknowledged", {"notifications": acknowledged}
            )
            ids = await self._tell(owned)
            async with anyio.create_task_group() as group:
                group.start_soon(self._forward, received)
                while True:
                    await anyio.sleep(LOOK_SECONDS)
                    if ids:
                        ids = await self._tell(await self._views(ids))
        finally:
            unsubscribe()
            events.close()
            received.close()
        return {"_meta": self.meta}  # pragma: no cover - the client ends the stream

    async def _forward(self, received: Any) -> None:
        async for event in received:
            note = event_to_notification(event, self.meta)
            await self.ctx.session.send_notification(note, related_request_id=self.ctx.request_id)

    async def _views(self, task_ids: list[str]) -> list[TaskView]:
        """The tasks among ``task_ids`` the caller owns, each as a poll sees it now."""
        from workq.services.tasks import lifecycle

        def look() -> list[TaskView]:
            try:
                owner = self.tasks.owner()
                q = self.state.queue()
            except WorkqError:
                return []
            found = []
            for task_id in task_ids:
                try:
                    found.append(lifecycle.poll(q, task_id, owner))
                except WorkqError:  # not the caller's, expired, or the database failed
                    continue
            return found

        return await anyio.to_thread.run_sync(look)

    async def _tell(self, views: list[TaskView]) -> list[str]:
        """Send each of ``views`` that changed since it was last sent; the ids still worth
        looking at (not terminal)."""
        for view in views:
            mark = (view.status.value, view.updated_at.isoformat())
            if self.sent.get(view.id) == mark:
                continue
            self.sent[view.id] = mark
            await self._send(
                "notifications/tasks",
                detailed(view, self.ctx.protocol_version, self.tasks.spell),
            )
        return [v.id for v in views if v.status not in TERMINAL]


__all__ = ["LISTEN", "declares", "listening"]
