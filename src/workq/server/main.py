"""``serve()``: what ``workq serve`` runs. Only the protocol ever reaches stdout."""

from __future__ import annotations

import gc
import logging
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from workq.config import Settings
from workq.errors import InvalidInput, WorkqError
from workq.server.state import ServerState
from workq.services.preflight import check_storage, describe_database

if TYPE_CHECKING:
    from workq.server.app import WorkqServer

TRANSPORTS = {"stdio": "stdio", "http": "http", "streamable-http": "http"}
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


@contextmanager
def starting() -> Iterator[None]:
    """The collector paused while the server starts, then what the start built frozen.
    Importing the SDK and building the tools makes a few hundred thousand objects that live
    as long as the server: collections during the start find nothing to free (about 15% of
    its CPU), and frozen, later collections no longer walk them."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def log_to_stderr() -> None:
    """Every log line to stderr, before the SDK configures its own logging."""
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
        root.setLevel(logging.WARNING)
    logging.getLogger("workq").setLevel(logging.INFO)


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
    database = describe_database(settings)
    sys.stderr.write(
        f"workq: serving {endpoint} as run id {server.state.run_id} (database {database})"
        f"{checked}\n"
    )
    sys.stderr.flush()
    if kind == "stdio":
        server.run()
    else:
        serve_http(server, settings, host=host, port=port, sock=sock, board=board)


def prepare(
    settings: Settings, *, migrate: bool | None, server: str | None = None
) -> tuple[WorkqServer, str]:
    """The server, built and checked before it serves; what the start line adds.

    Raises:
        InvalidInput, GitHubToolsSetup, GitHubUnreachable, GitMissing: it cannot serve.
    """
    from workq.server.app import build_server

    built = build_server(settings, migrate=migrate, binder=server)
    return built, _check_github(built.state, settings, migrate) + _check_git(settings)


def serve_http(
    server: WorkqServer,
    settings: Settings,
    *,
    host: str,
    port: int,
    sock: socket.socket | None,
    board: bool,
    stateless: bool = False,
) -> None:
    """Serve ``server`` over Streamable HTTP (with the board under /board) until stopped."""
    from workq.server import http

    page = None
    if board:
        from workq.board.app import build_app
        from workq.services.runtime import open_queue

        page = build_app(open_queue(settings), token=settings.token, host=host)
        sys.stderr.write(f"workq: board at http://{host}:{port}/board/\n")
    http.run(
        server,
        host=host,
        port=port,
        token=settings.token,
        board=page,
        sock=sock,
        stateless=stateless,
    )


def _check_github(state: ServerState, settings: Settings, migrate: bool | None) -> str:
    """The GitHub tools' fail-fast check (contract C) when their profile is on: what the
    start line adds.

    Raises:
        GitHubToolsSetup, GitHubUnreachable: the profile cannot work.
    """
    from workq.server import toolsets

    if "github-tools" not in toolsets.select(settings.toolsets, settings.profiles):
        return ""
    link = state.github.check(lambda: _mirror_repo(settings, migrate))
    return f"; GitHub tools on {link.repo} as {link.login}"


def _check_git(settings: Settings) -> str:
    """Contract C's fail-fast rule applied to the git steps (profile workflow-server): git
    present and new enough, checked once before serving; what the start line adds.

    Raises:
        GitMissing: git is missing or too old.
    """
    from workq.server import toolsets

    if "workflow-server" not in toolsets.select(settings.toolsets, settings.profiles):
        return ""
    from workq.services.workspaces.checkouts import check_git

    return f"; git {check_git()}"


def _mirror_repo(settings: Settings, migrate: bool | None) -> str | None:
    """The repository the database mirrors to, read before serving (None if unreadable)."""
    from workq.services.runtime import open_queue
    from workq.services.sync import outbox

    try:
        queue = open_queue(settings, migrate=migrate)
    except WorkqError:
        return None
    try:
        found = outbox.mirror(queue)
    finally:
        queue.db.dispose()
    return found.repo if found else None
