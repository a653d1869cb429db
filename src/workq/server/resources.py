"""Resources: the ready queue, one issue, and the statistics, as JSON."""

from __future__ import annotations

import json
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError

from workq.errors import NotFound, WorkqError
from workq.server.state import ServerState

READY_SHOWN = 20
JSON = "application/json"


def _dump(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, indent=1)


def register(server: MCPServer[Any], state: ServerState) -> None:
    @server.resource(
        "workq://issues/ready",
        name="ready",
        description=f"The next {READY_SHOWN} ready issues, in claim order",
        mime_type=JSON,
    )
    def ready() -> str:
        from workq.services.queue import ready_queue

        try:
            found = ready_queue.ready(state.queue(), limit=READY_SHOWN)
        except WorkqError as exc:
            raise ResourceError(exc.describe()) from exc
        return _dump([issue.model_dump(mode="json") for issue in found])

    @server.resource(
        "workq://issues/{number}",
        name="issue",
        description="One issue in full",
        mime_type=JSON,
    )
    def issue(number: str) -> str:
        from workq.services.workspaces import worktrees

        if not number.isdecimal() or len(number) > 10:
            raise ResourceNotFoundError(f"Unknown resource: workq://issues/{number}")
        try:
            found = worktrees.issue(state.queue(), int(number))
        except NotFound as exc:
            raise ResourceNotFoundError(exc.message) from exc
        except WorkqError as exc:
            raise ResourceError(exc.describe()) from exc
        return _dump(found.model_dump(mode="json"))

    @server.resource(
        "workq://stats",
        name="stats",
        description="Counts by status and priority; ready, blocked, claimed, stale claims",
        mime_type=JSON,
    )
    def stats() -> str:
        from workq.services.queue import reports

        try:
            return _dump(reports.stats(state.queue()).model_dump(mode="json"))
        except WorkqError as exc:
            raise ResourceError(exc.describe()) from exc
