"""Who may read the board and who may act on it.

Reading: with a token configured, every request carries it, as ``Authorization: Bearer``
or as the cookie the login form sets (HttpOnly, SameSite=Strict); without one (loopback
only, see workq.bind) anyone on this machine may read, and the Host header must name the
bound address (workq.bind.host_allowed), so a page on another site cannot read the board
through DNS rebinding.

Acting (POST): the reader's right, plus a custom header (``X-Workq-Board``) that only the
board's own script sends (a browser sends no custom header across origins without a CORS
preflight, which the board never grants) and an ``Origin`` that is the board's own. See
docs/board.md.
"""

from __future__ import annotations

import hmac

from starlette.requests import Request

from workq.bind import host_allowed

COOKIE = "workq_board"
ACTION_HEADER = "x-workq-board"


class Guard:
    def __init__(self, token: str | None, host: str = "127.0.0.1") -> None:
        self.token = token
        self.host = host
        """The address the board is bound to: without a token, requests must name it."""

    def _matches(self, given: str) -> bool:
        assert self.token is not None
        return hmac.compare_digest(given.encode(), self.token.encode())

    def host_ok(self, request: Request) -> bool:
        if self.token:
            return True
        return host_allowed(request.headers.get("host"), self.host)

    def may_read(self, request: Request) -> bool:
        if not self.host_ok(request):
            return False
        if not self.token:
            return True
        scheme, _, given = request.headers.get("authorization", "").strip().partition(" ")
        if scheme.lower() == "bearer" and self._matches(given.strip()):
            return True
        return self._matches(request.cookies.get(COOKIE, ""))

    def same_origin(self, request: Request) -> bool:
        """A browser's POST carries Origin; when it does, it must be the board's own."""
        origin = request.headers.get("origin")
        if origin is None:
            return True
        return origin == f"{request.url.scheme}://{request.headers.get('host', '')}"

    def may_act(self, request: Request) -> bool:
        return (
            self.may_read(request)
            and request.headers.get(ACTION_HEADER) == "1"
            and self.same_origin(request)
        )

    def login_ok(self, request: Request, given: str) -> bool:
        return bool(self.token) and self.same_origin(request) and self._matches(given)
