"""Before a server serves: logging to stderr, the collector paused while it is built, the
server built and checked (toolsets, GitHub, git), and serving it over HTTP. What
``workq serve`` runs in its one process, and each worker of ``--workers`` in its own."""

from __future__ import annotations

import gc
import logging
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from workq.config import Settings
from workq.errors import WorkqError
from workq.server.state import ServerState

if TYPE_CHECKING:
    from workq.server.app import WorkqServer


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


def prepare(
    settings: Settings, *, migrate: bool | None, server: str | None = None
) -> tuple[WorkqServer, str]:
    """The server, built and checked before it serves; what the start line adds.

    Raises:
        InvalidInput, GitMissing: it cannot serve.
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
    """The GitHub tools' link, tried once before serving when their profile is on: what the
    start line adds. workq is offline-first: a link that cannot be made (no token, a
    refused one, no repository, GitHub out of reach) turns the GitHub tools off, not the
    server; each GitHub call then says why, and tries again, so they work once the cause
    is gone, without a restart."""
    from workq.github.auth import SyncSetupError
    from workq.server import toolsets

    if "github-tools" not in toolsets.select(settings.toolsets, settings.profiles):
        return ""
    try:
        link = state.github.check(lambda: _mirror_repo(settings, migrate))
    except SyncSetupError as exc:
        return (
            f"; GitHub tools off until this is fixed ({exc.describe()}): each GitHub call "
            "says so and tries again"
        )
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
    from workq.services.sync import mirror_target

    try:
        queue = open_queue(settings, migrate=migrate)
    except WorkqError:
        return None
    try:
        found = mirror_target.mirror(queue)
    finally:
        queue.db.dispose()
    return found.repo if found else None
