"""Over Streamable HTTP, each session is a caller of its own.

One HTTP server carries many agents. Without this, every session that names no ``run_id``
would act as the server's one run id: one agent could complete, release or renew what
another claimed. So each session gets a run id of its own when it is first seen
(``ServerState.session``), reported in its ``initialize`` result's instructions, and every
call of the session is served as it. stdio has no session id: there the caller is the
server's own run id. A stateless HTTP request (no session) is served as the server's run
id too; such a client names its ``run_id`` on each call.
"""

from __future__ import annotations

from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext

from workq.server.state import ServerState

SESSION_HEADER = "mcp-session-id"


def session_id(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The transport's session id of this request's connection, if it has one."""
    # mcp 2.3 keeps it on the per-client Connection behind the request's session proxy
    # (``Context.session_id`` offers it to tools, not to middleware); the header carries
    # it on every request after the first.
    connection = getattr(ctx.session, "_connection", None)
    found = getattr(connection, "session_id", None)
    if isinstance(found, str) and found:
        return found
    headers = getattr(ctx.request, "headers", None)
    given = headers.get(SESSION_HEADER) if headers is not None else None
    return given if isinstance(given, str) and given else None


def identify(state: ServerState) -> ServerMiddleware[Any]:
    """Server middleware: serve each request of an HTTP session as that session's caller."""

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        found = session_id(ctx)
        if found is None:
            return await call_next(ctx)
        caller = state.session(found)
        with state.serving(caller):
            result = await call_next(ctx)
        if ctx.method == "initialize" and isinstance(result, dict):
            told = result.get("instructions") or ""
            result = {
                **result,
                "instructions": f"{told}\n\nThis session acts as run id {caller.run_id}: what "
                "it claims without naming a run_id is held by it, and only it (or a call "
                "naming that run_id) may complete or release it.".lstrip(),
            }
        return result

    return middleware
