"""How a tool's answer kept by a task (services/tasks) renders as its result: the same
result the synchronous call gives, its refusals included (kept with the wording the call
puts in front of them, which may name the issue)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcp.types import CallToolResult

from workq.errors import revived
from workq.server.results import failure


def refusable(render: Callable[[Any], CallToolResult]) -> Callable[[Any], CallToolResult]:
    """``render``, for an answer that may be a refusal (``{"refused": ..., "prefix": ...}``:
    services/tasks/gates.py, merge.py, landing.py)."""

    def rendered(value: Any) -> CallToolResult:
        if isinstance(value, dict) and "refused" in value:
            prefix = value.get("prefix")
            return failure(revived(value["refused"]), prefix if isinstance(prefix, str) else None)
        return render(value)

    return rendered
