"""``serve()``: what ``workq serve`` runs. Only the protocol ever reaches stdout."""

from __future__ import annotations

import logging
import re
import sys

from workq.config import Settings
from workq.errors import InvalidInput

TRANSPORTS = {"stdio": "stdio", "http": "http", "streamable-http": "http"}


def log_to_stderr() -> None:
    """Every log line to stderr, before the SDK configures its own logging."""
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
        root.setLevel(logging.WARNING)
    logging.getLogger("workq").setLevel(logging.INFO)


def where(settings: Settings) -> str:
    """The database, with any password hidden."""
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", settings.url)


def serve(
    settings: Settings,
    *,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8765,
    migrate: bool | None = None,
) -> None:
    """Serve the queue over stdio (default) or Streamable HTTP until the client leaves.

    Raises:
        InvalidInput: an unknown transport or toolset, or a non-loopback bind without a
            token. Nothing has been served then.
    """
    log_to_stderr()
    kind = TRANSPORTS.get(transport)
    if kind is None:
        raise InvalidInput(f"unknown transport {transport!r}", hint="use stdio or http")
    from workq.server import http
    from workq.server.app import build_server

    if kind == "http":
        http.check_bind(host, settings.token)
    server = build_server(settings, migrate=migrate)
    endpoint = "stdio" if kind == "stdio" else f"http://{host}:{port}/mcp"
    # stderr: in the server process stdout carries the protocol and nothing else.
    sys.stderr.write(
        f"workq: serving {endpoint} as run id {server.state.run_id} (database {where(settings)})\n"
    )
    sys.stderr.flush()
    if kind == "stdio":
        server.run()
    else:
        http.run(server, host=host, port=port, token=settings.token)
