"""The ``initialize`` handshake as a hand-driven client meets it.

Contract A tells people to paste ``{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}``
into the server. The SDK requires ``protocolVersion``, ``capabilities`` and ``clientInfo``,
refuses such a request with an empty ``data``, and then refuses every later request the
same way because the handshake never happened. ``complete_initialize`` fills what is
missing (contract A's protocol version, no capabilities, an unnamed client); the stdio
connection applies it to every ``initialize`` it reads (see ``stdio.py``). ``explain`` is
a middleware that gives the SDK's wordless refusals their reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS
from mcp.types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

FIRST_PROTOCOL_VERSION = "2024-11-05"
DEFAULTS: dict[str, Any] = {
    "protocolVersion": FIRST_PROTOCOL_VERSION,
    "capabilities": {},
    "clientInfo": {"name": "unnamed-client", "version": "0"},
}
# Requests the SDK serves before the handshake.
_BEFORE_HANDSHAKE = frozenset({"initialize", "ping"})


def complete_initialize(params: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The params of an ``initialize`` with the missing required fields filled in, or None
    when nothing is missing (or the params are not an object: the SDK refuses those)."""
    if params is None:
        return dict(DEFAULTS)
    if not isinstance(params, Mapping) or all(key in params for key in DEFAULTS):
        return None
    return {**DEFAULTS, **params}


def _describe(exc: ValidationError) -> str:
    """Where the params are wrong and why, without echoing the values sent."""
    problems = []
    for error in exc.errors(include_url=False, include_input=False, include_context=False):
        where = ".".join(str(part) for part in error["loc"]) or "params"
        problems.append(f"{where}: {error['msg']}")
    return "; ".join(problems[:5])


async def explain(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Server middleware: a refused request says what is wrong, not an empty ``data``."""
    try:
        return await call_next(ctx)
    except ValidationError as exc:
        raise MCPError(
            code=INVALID_PARAMS, message="Invalid request parameters", data=_describe(exc)
        ) from exc
    except MCPError as exc:
        if (
            exc.error.code == INVALID_PARAMS
            and not exc.error.data
            and ctx.method not in _BEFORE_HANDSHAKE
            and ctx.request_id is not None
            and ctx.session.client_params is None
            and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS
        ):
            raise MCPError(
                code=INVALID_PARAMS,
                message="Not initialized: send an initialize request first",
                data=f"{ctx.method} needs an initialize request on this connection first",
            ) from exc
        raise
