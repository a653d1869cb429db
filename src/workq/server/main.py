"""``serve()``: what ``workq serve`` runs. Only the protocol ever reaches stdout."""

from __future__ import annotations

import sys

from workq.config import Settings
from workq.errors import InvalidInput
from workq.server.startup import log_to_stderr, prepare, serve_http, starting
from workq.services.preflight import check_storage, describe_storage, storage_warning

TRANSPORTS = {"stdio": "stdio", "http": "http", "streamable-http": "http"}
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


def serve(
    settings: Settings,
    *,
    transport: str = "stdio",
    host: str | None = None,
    port: int | None = None,
    migrate: bool | None = None,
    board: bool = False,
    workers: int = 1,
) -> None:
    """Serve the queue over stdio (default) or Streamable HTTP until the client leaves;
    over HTTP by ``workers`` processes on one port (server/workers.py).

    Raises:
        InvalidInput: an unknown transport or toolset, a host or port without HTTP, or a
            non-loopback bind without a token.
        StorageError: a database that can never open (see ``check_storage``).
        Nothing has been served when one is raised.
    """
    log_to_stderr()
    kind = TRANSPORTS.get(transport)
    if kind is None:
        raise InvalidInput(f"unknown transport {transport!r}", hint="use stdio or http")
    if kind == "stdio" and board:
        raise InvalidInput(
            "the board is a web page: it needs HTTP",
            hint="add --http, or run 'workq board' on its own",
            field="board",
        )
    if kind == "stdio" and (host is not None or port is not None):
        raise InvalidInput(
            "--host and --port set where HTTP listens, but this server would speak stdio",
            hint="add --http to serve over HTTP, or drop --host and --port",
            field="host" if host is not None else "port",
        )
    if kind == "stdio" and workers != 1:
        raise InvalidInput(
            "a stdio server has one client, its parent process: it has no workers",
            hint="add --http to answer many agents from several processes, or drop --workers",
            field="workers",
        )
    host = DEFAULT_HOST if host is None else host
    port = DEFAULT_PORT if port is None else port
    if workers > 1:
        from workq.server.workers import supervise

        supervise(settings, host=host, port=port, count=workers, migrate=migrate, board=board)
        return
    with starting():
        from workq.server import http

        sock = None
        if kind == "http":
            http.check_bind(host, settings.token)
            sock = http.listen(host, port)
        check_storage(settings)
        server, checked = prepare(settings, migrate=migrate)
    endpoint = "stdio" if kind == "stdio" else f"http://{host}:{port}/mcp"
    # stderr: in the server process stdout carries the protocol and nothing else.
    database = describe_storage(settings)
    sys.stderr.write(
        f"workq: serving {endpoint} as run id {server.state.run_id} (database {database})"
        f"{checked}\n"
    )
    warning = storage_warning(settings)
    if warning:
        sys.stderr.write(f"workq: warning: {warning}\n")
    if kind == "stdio" and sys.stdin.isatty():  # a person ran it in a terminal
        sys.stderr.write(
            "workq: waiting for an MCP client's JSON-RPC messages on stdin: an agent's client "
            "(or the MCP Inspector) starts this command itself; Ctrl-D or Ctrl-C ends it\n"
        )
    sys.stderr.flush()
    if kind == "stdio":
        server.run()
    else:
        serve_http(server, settings, host=host, port=port, sock=sock, board=board)
