"""The stdio connection, with what a piped client needs beyond the SDK's loop.

- Every ``initialize`` read gets its missing required fields filled (``handshake.py``).
- A line that is not a JSON-RPC message is answered with a JSON-RPC error whose id is
  null: -32700 when it is not JSON, -32600 when it is JSON but no message (no
  ``"jsonrpc"``, or a batch: the protocol versions workq speaks from 2025-06-18 on have
  none, and the SDK reads none). The SDK's loop dropped such lines without a word.
- End of input ends the connection only once every request already read has been
  answered; calls waiting for work (``wait_seconds``) are told to stop waiting first, so
  they neither hold up the exit nor claim an issue for a client that has gone. The
  SDK's loop cancels the calls still running when stdin closes, so
  ``printf '...' | workq serve`` used to lose the answers of writes that were applied.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, Self, cast

import anyio
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types import (
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
)
from pydantic import ValidationError

from workq.server import pipes
from workq.server.handshake import complete_initialize

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

log = logging.getLogger("workq.server")

# How long end of input waits for the calls still running (a call may itself wait up to
# two minutes for the database to open).
DRAIN_TIMEOUT_SECONDS = 300.0
# Requests that stay open for as long as the connection does (a modern client's stream of
# notifications) and end with it: end of input does not wait for them.
OPEN_WHILE_CONNECTED = frozenset({"subscriptions/listen"})


class Unanswered:
    """The requests read and not yet answered, by id."""

    def __init__(self) -> None:
        self._ids: dict[Any, int] = {}
        self._none_left = anyio.Event()
        self._none_left.set()

    def add(self, request_id: Any) -> None:
        self._ids[request_id] = self._ids.get(request_id, 0) + 1
        if self._none_left.is_set():
            self._none_left = anyio.Event()

    def discard(self, request_id: Any) -> None:
        count = self._ids.pop(request_id, 0)
        if count > 1:
            self._ids[request_id] = count - 1
        if not self._ids:
            self._none_left.set()

    async def wait_until_none(self) -> None:
        with anyio.move_on_after(DRAIN_TIMEOUT_SECONDS):
            await self._none_left.wait()
        if self._ids:
            log.warning("workq: input ended; %d call(s) left unanswered", len(self._ids))


class ReadStream(Protocol):
    """What is read of the SDK's stdio read stream (its own protocol is private)."""

    async def receive(self) -> SessionMessage | Exception: ...

    async def aclose(self) -> None: ...


class WriteStream(Protocol):
    """What is written to the SDK's stdio write stream."""

    async def send(self, item: SessionMessage, /) -> None: ...

    async def aclose(self) -> None: ...


PARSE_ERROR = -32700
INVALID_REQUEST = -32600


def invalid_answer(error: Exception) -> JSONRPCError:
    """The JSON-RPC error for a line that is no message (id null: none can be read)."""
    found = error.errors() if isinstance(error, ValidationError) else []
    if found and found[0]["type"] == "json_invalid":
        code, message = PARSE_ERROR, "Parse error: the line is not JSON"
    elif found and isinstance(found[0].get("input"), list):
        code = INVALID_REQUEST
        message = "Invalid Request: batches are not supported; send one message per line"
    else:
        code = INVALID_REQUEST
        message = 'Invalid Request: not a JSON-RPC 2.0 message ("jsonrpc": "2.0", "method", ...)'
    return JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(code=code, message=message))


class _Reader:
    """The read side: notes each request, completes ``initialize``, answers a line that is
    no message, delays end of input."""

    def __init__(
        self,
        inner: ReadStream,
        pending: Unanswered,
        on_end: Callable[[], None] = lambda: None,
        reply: Callable[[SessionMessage], Awaitable[None]] | None = None,
    ):
        self._inner = inner
        self._pending = pending
        self._on_end = on_end
        self._reply = reply

    @property
    def last_context(self) -> Any:
        # The SDK reads the sender's context off a context-aware stream (duck-typed).
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        while True:
            try:
                item = await self._inner.receive()
            except anyio.EndOfStream:
                self._on_end()
                await self._pending.wait_until_none()
                raise
            if isinstance(item, Exception) and self._reply is not None:
                answer = invalid_answer(item)
                log.warning("workq: answered a line that is no message: %s", answer.error.message)
                await self._reply(SessionMessage(answer))
                continue
            return self._note(item)

    def _note(self, item: SessionMessage | Exception) -> SessionMessage | Exception:
        if not isinstance(item, SessionMessage):
            return item
        message = item.message
        if isinstance(message, JSONRPCRequest):
            if message.method not in OPEN_WHILE_CONNECTED:
                self._pending.add(message.id)
            if message.method == "initialize":
                params = complete_initialize(message.params)
                if params is not None:
                    completed = message.model_copy(update={"params": params})
                    return SessionMessage(completed, item.metadata)
        elif isinstance(message, JSONRPCNotification) and message.method == (
            "notifications/cancelled"
        ):
            # A cancelled request is never answered (the spec forbids it).
            self._pending.discard((message.params or {}).get("requestId"))
        return item

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        return None


class _Writer:
    """The write side: an answer written settles its request."""

    def __init__(self, inner: WriteStream, pending: Unanswered):
        self._inner = inner
        self._pending = pending

    async def send(self, item: SessionMessage, /) -> None:
        await self._inner.send(item)
        if isinstance(item.message, JSONRPCResponse | JSONRPCError):
            self._pending.discard(item.message.id)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        return None


def _transport(
    streams: tuple[pipes.Lines, pipes.Answers] | None,
) -> AbstractAsyncContextManager[tuple[Any, Any]]:
    """The SDK's stdio transport, on the event loop's streams when there are some."""
    if streams is None:
        return stdio_server()
    lines, answers = streams
    # The SDK types them as anyio's file wrappers; it only iterates one and writes the other.
    return stdio_server(cast(Any, lines), cast(Any, answers))


def wrap(
    read: ReadStream,
    write: WriteStream,
    on_end: Callable[[], None] = lambda: None,
) -> tuple[_Reader, _Writer]:
    pending = Unanswered()
    writer = _Writer(write, pending)
    return _Reader(read, pending, on_end, writer.send), writer


async def serve(server: MCPServer[Any]) -> None:
    """Serve ``server`` (an ``MCPServer``) over this process's stdin and stdout."""
    async with pipes.loop_pipes() as streams, _transport(streams) as (read, write):
        state = getattr(server, "state", None)
        reader, writer = wrap(read, write, state.end_waits if state is not None else lambda: None)
        # The SDK's own stdio runner, with the streams wrapped (MCPServer.run_stdio_async
        # offers no way to pass streams).
        lowlevel = server._lowlevel_server
        await lowlevel.run(reader, writer, lowlevel.create_initialization_options())
