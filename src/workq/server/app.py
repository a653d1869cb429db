"""The MCP server of workq: ``build_server(settings)``.

Tools are thin: they call one service and format its result. This module turns every
failure into a tool result an agent can act on (see ``results.py``): workq errors keep
their code, facts and hint; rejected arguments become INVALID_INPUT naming the fields;
unknown arguments are refused; a crash is logged on stderr and reported as INTERNAL
without a traceback.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.subscriptions import InMemorySubscriptionBus
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, InputRequiredResult
from pydantic import ValidationError

import workq
from workq.config import Settings
from workq.errors import InvalidInput, WorkqError
from workq.server import handshake, prompts, resources, sessions, stdio, task_listen, toolsets
from workq.server.opening import Opening
from workq.server.registry import Catalog, Registry
from workq.server.results import (
    OBJECT_FAILURES,
    SPELLING,
    Refusal,
    failure,
    invalid_arguments,
    object_failure,
    unknown_arguments,
)
from workq.server.spelling import spelling
from workq.server.state import ServerState
from workq.server.tasks import TasksExtension

log = logging.getLogger("workq.server")

INSTRUCTIONS = """\
workq is a work queue shared by agents. Loop: issue_claim_next (or issue_ready then \
issue_claim), do the work, then issue_complete; issue_block with a reason if you cannot \
finish. Claims made through this server stay yours while it runs. Errors carry a CODE \
and the next step."""


class UnknownTool(InvalidInput):
    """No tool by that name."""

    code = "UNKNOWN_TOOL"
    hint = "list the tools with tools/list"


class InternalError(WorkqError):
    """The tool failed unexpectedly."""

    code = "INTERNAL"
    hint = "retry once; if it fails again, report it with the server's log (stderr)"


class WorkqServer(MCPServer[ServerState]):
    def __init__(self, state: ServerState, tools: dict[str, Tool]) -> None:
        @asynccontextmanager
        async def lifespan(_: MCPServer[ServerState]) -> AsyncIterator[ServerState]:
            state.start()
            try:
                yield state
            finally:
                state.stop()

        tasks = TasksExtension(state)
        bus = InMemorySubscriptionBus()
        super().__init__(
            "workq",
            version=workq.__version__,
            instructions=INSTRUCTIONS,
            tools=list(tools.values()),
            lifespan=lifespan,
            log_level="WARNING",
            middleware=[
                handshake.explain,
                sessions.identify(state),
                task_listen.listening(state, tasks, bus),
            ],
            extensions=[tasks],
            subscriptions=bus,
        )
        self.state = state
        self.workq_tools = tools
        self.spell = spelling(tools)
        tasks.spell = self.spell
        self.opening = Opening(state.wait_open, state.is_open)
        self._homes: dict[str, str] | None = None

    async def run_stdio_async(self) -> None:
        await stdio.serve(self)

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        context: Context[ServerState, Any] | None = None,
    ) -> CallToolResult | InputRequiredResult:
        tool = self.workq_tools.get(name)
        if tool is None:
            return failure(self._unknown_tool(name))
        said = SPELLING.set(self.spell)  # hints name tools this server has
        try:
            result = await self._call(tool, name, arguments, context)
        finally:
            SPELLING.reset(said)
        if name in OBJECT_FAILURES and isinstance(result, CallToolResult) and result.is_error:
            return object_failure(name, result)
        return result

    async def _call(
        self,
        tool: Any,
        name: str,
        arguments: dict[str, Any],
        context: Context[ServerState, Any] | None,
    ) -> CallToolResult | InputRequiredResult:
        accepted = tool.parameters.get("properties", {})
        if not accepted.keys() >= arguments.keys():
            unknown = sorted(set(arguments) - set(accepted))
            return failure(unknown_arguments(unknown, list(accepted)))
        try:
            async with self.opening.turn():
                return await super().call_tool(name, arguments, context)
        except MCPError:
            raise
        except ToolError as exc:
            return _tool_failure(name, exc)

    def _unknown_tool(self, name: str) -> UnknownTool:
        # Say which toolset has it, so the agent (or its human) knows what to enable.
        if self._homes is None:
            catalog = Catalog(self.state)
            toolsets.register(catalog, list(toolsets.GROUPS))
            self._homes = catalog.toolset_of
        home = self._homes.get(name)
        if home is None:
            return UnknownTool(f"Unknown tool: {name[:100]}")
        kind = toolsets.kind(home)
        flag, variable = (
            ("--profile ", "WORKQ_PROFILE")
            if kind == "profile"
            else ("--toolsets default,", "WORKQ_TOOLSETS")
        )
        return UnknownTool(
            f"Unknown tool: {name}; it is in the {home!r} {kind}, which this server does not "
            "enable",
            hint=f"start the server with {flag}{home} (or {variable})",
        )


def _tool_failure(name: str, exc: ToolError) -> CallToolResult:
    if type(exc) is ToolError and isinstance(exc.__cause__, ValidationError):
        return failure(invalid_arguments(exc.__cause__))
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, Refusal):
            return failure(cause.error, cause.prefix)
        if isinstance(cause, WorkqError):
            return failure(cause)
        cause = cause.__cause__
    if isinstance(exc, UnexpectedToolError):
        log.error("workq: tool %s crashed", name, exc_info=exc.__cause__)
        return failure(InternalError(f"{name} failed unexpectedly"))
    return failure(WorkqError(str(exc)))


def build_server(
    settings: Settings,
    *,
    toolset_names: list[str] | None = None,
    migrate: bool | None = None,
    binder: str | None = None,
) -> WorkqServer:
    """The server, with the toolsets of ``settings.toolsets`` unless named here.

    Nothing touches the database until the server runs (see ``ServerState``). ``binder``:
    the name run ids are bound under, when this process is one of several workers.
    """
    state = ServerState(settings, migrate=migrate, server=binder)
    registry = Registry(state)
    names = (
        toolset_names
        if toolset_names is not None
        else toolsets.select(settings.toolsets, settings.profiles)
    )
    toolsets.register(registry, names)
    server = WorkqServer(state, registry.tools)
    resources.register(server, state)
    prompts.register(server, state)
    return server
