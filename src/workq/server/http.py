"""Streamable HTTP: loopback by default; any other bind requires a bearer token."""

from __future__ import annotations

import hmac
import json
import socket
import uuid
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from workq.bind import check_bind, host_allowed, is_loopback, listen, origin_allowed
from workq.server.handshake import complete_initialize
from workq.server.sessions import SESSION_HEADER

__all__ = [
    "BearerToken",
    "LocalOnly",
    "WithBoard",
    "check_bind",
    "is_loopback",
    "listen",
    "run",
]


async def _refuse(send: Send, status: int, message: str, hint: str) -> None:
    body = json.dumps({"error": "forbidden", "message": message, "hint": hint}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _header(scope: Scope, name: bytes) -> str | None:
    headers: list[tuple[bytes, bytes]] = scope.get("headers", [])
    return _text(next((v for k, v in headers if k.lower() == name), None))


def _text(value: bytes | None) -> str | None:
    return value.decode("latin-1") if value is not None else None


class LocalOnly:
    """ASGI middleware of a server without a token (bound to loopback): a request's Host,
    and its Origin when it has one, must name the bound address (workq.bind), else 421 or
    403. A site whose name was rebound to 127.0.0.1 cannot reach the queue from a page."""

    def __init__(self, app: ASGIApp, bound: str) -> None:
        self.app = app
        self.bound = bound
        self.shown = f"[{bound}]" if ":" in bound else bound
        # (Host, Origin) -> (host allowed, origin allowed): every request of a client
        # sends the same two, so each pair is judged once (bounded: any client can vary them).
        self._judged: dict[tuple[bytes | None, bytes | None], tuple[bool, bool]] = {}

    def _judge(self, scope: Scope) -> tuple[bool, bool]:
        host = origin = None
        for name, value in scope.get("headers", []):
            lowered = name.lower()
            if lowered == b"host" and host is None:
                host = value
            elif lowered == b"origin" and origin is None:
                origin = value
        found = self._judged.get((host, origin))
        if found is None:
            found = (
                host_allowed(_text(host), self.bound),
                origin_allowed(_text(origin), self.bound),
            )
            if len(self._judged) < 64:
                self._judged[host, origin] = found
        return found

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host_ok, origin_ok = self._judge(scope)
        if not host_ok:
            hint = f"reach this server as http://{self.shown}:PORT"
            await _refuse(send, 421, "unknown host", hint)
            return
        if not origin_ok:
            message = "requests from other sites' pages are refused"
            await _refuse(send, 403, message, f"use {self.shown}")
            return
        await self.app(scope, receive, send)


class BearerToken:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>``
    (the scheme in any case, RFC 7235).

    A request without the token is refused with 403 and a JSON body that says what to
    send, and no ``WWW-Authenticate``: MCP clients read any 401 as the start of OAuth (the
    Inspector 2.12 then probes ``/.well-known/oauth-*`` and tries dynamic client
    registration, failing with a message about OAuth), and workq offers no OAuth.
    """

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self._authorized(scope):
            await self.app(scope, receive, send)
            return
        await _refuse(
            send,
            403,
            "this workq server requires its bearer token",
            "send the header 'Authorization: Bearer <token>' with the server's "
            "--token / WORKQ_TOKEN",
        )

    def _authorized(self, scope: Scope) -> bool:
        given = (_header(scope, b"authorization") or "").encode("latin-1")
        scheme, _, credentials = given.strip().partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(
            credentials.strip(), self.expected
        )


class CompleteInitialize:
    """ASGI middleware: an ``initialize`` POSTed with required fields missing (contract A's
    hand-typed ``"params": {}``) gets them filled as on stdio (handshake.py), so both
    transports take the same handshake. A small POST body is read whole first (the
    transport reads it whole too); only one that mentions ``initialize`` is parsed, and
    other requests pass unchanged.

    ``mint_sessions``, for a transport that keeps no sessions (``--workers``: any process
    may answer any request): the answer to an ``initialize`` that names no session carries
    a new ``mcp-session-id``, which the client then sends with every request. The transport
    ignores it, and ``sessions.identify`` serves each session as a caller of its own,
    whichever process answers."""

    def __init__(self, app: ASGIApp, *, mint_sessions: bool = False) -> None:
        self.app = app
        self.mint_sessions = mint_sessions

    # An initialize is a few hundred bytes; a body declared larger (or of unknown length)
    # goes to the transport untouched, which limits and refuses it as it does.
    LIMIT = 64 * 1024

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        length = _header(scope, b"content-length") or ""
        if (
            scope["type"] != "http"
            or scope.get("method") != "POST"
            or not length.isdigit()
            or int(length) > self.LIMIT
        ):
            await self.app(scope, receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                await self.app(scope, _replay([message], receive), send)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if b'"initialize"' in body:
            body, is_initialize = _completed(body)
            headers = [
                (k, v) for k, v in scope.get("headers", []) if k.lower() != b"content-length"
            ]
            headers.append((b"content-length", str(len(body)).encode()))
            if is_initialize and self.mint_sessions and _header(scope, _SESSION) is None:
                minted = (_SESSION, uuid.uuid4().hex.encode())
                headers.append(minted)  # the initialize is served as its session too
                send = _with_header(send, minted)
            scope = {**scope, "headers": headers}
        replayed: Message = {"type": "http.request", "body": body, "more_body": False}
        await self.app(scope, _replay([replayed], receive), send)


_SESSION = SESSION_HEADER.encode()


def _with_header(send: Send, header: tuple[bytes, bytes]) -> Send:
    """``send`` with ``header`` added to the response's headers."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), header]}
        await send(message)

    return sending


def _completed(body: bytes) -> tuple[bytes, bool]:
    """The body, its initialize completed; and whether it is an initialize."""
    try:
        message = json.loads(body)
    except ValueError:
        return body, False  # the transport answers it: a parse error
    if not isinstance(message, dict) or message.get("method") != "initialize":
        return body, False
    params = complete_initialize(message.get("params"))
    if params is None:
        return body, True
    return json.dumps({**message, "params": params}).encode(), True


def _replay(messages: list[Message], then: Receive) -> Receive:
    """``messages`` first, then what ``then`` receives (the client's disconnect)."""
    queue = list(messages)

    async def receive() -> Message:
        if queue:
            return queue.pop(0)
        return await then()

    return receive


class WithBoard:
    """Requests under ``/board`` go to the board (its own login and token rules, see
    workq.board.auth); everything else, lifespan included, to the MCP app."""

    PREFIX = "/board"

    def __init__(self, app: ASGIApp, board: ASGIApp) -> None:
        self.app = app
        self.board = board

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and path == self.PREFIX:
            await send(
                {
                    "type": "http.response.start",
                    "status": 307,
                    "headers": [(b"location", f"{self.PREFIX}/".encode())],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return
        if scope["type"] == "http" and path.startswith(self.PREFIX + "/"):
            root = scope.get("root_path", "") + self.PREFIX
            await self.board({**scope, "root_path": root}, receive, send)
            return
        await self.app(scope, receive, send)


def run(
    server: Any,
    *,
    host: str,
    port: int,
    token: str | None,
    board: ASGIApp | None = None,
    sock: socket.socket | None = None,
    stateless: bool = False,
) -> None:
    """Serve ``server`` over Streamable HTTP on ``sock`` (bound with workq.bind.listen),
    else on ``host``:``port``; ``stateless``: the transport keeps no sessions, so that any
    of several processes on one socket may answer any request (``CompleteInitialize``
    mints the sessions)."""
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    # Host and Origin are checked by LocalOnly, for every loopback bind (the SDK's own check
    # covers three spellings of the bound address only).
    unchecked = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    # Each request is answered as one JSON body rather than an SSE stream of its own, which
    # cost the server about as much CPU as the call (scripts/bench_http.py). No workq call
    # sends notifications or requests of its own; the SDK still streams what must stream
    # (a modern client's subscriptions/listen, a legacy session's GET stream).
    app: ASGIApp = CompleteInitialize(
        server.streamable_http_app(
            host=host,
            transport_security=unchecked,
            json_response=True,
            stateless_http=stateless,
        ),
        mint_sessions=stateless,
    )
    if token:
        app = BearerToken(app, token)
    if board is not None:
        app = WithBoard(app, board)
    if not token:
        app = LocalOnly(app, host)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        # The board's change feeds never end by themselves.
        timeout_graceful_shutdown=2 if board is not None else None,
    )
    uvicorn.Server(config).run(sockets=[sock] if sock is not None else None)
