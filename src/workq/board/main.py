"""``run()``: what ``workq board`` runs."""

from __future__ import annotations

import logging
import sys

from workq.bind import check_bind, listen
from workq.config import Settings
from workq.services.preflight import check_storage, describe_storage, storage_warning
from workq.services.runtime import open_queue

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8766
SHUTDOWN_SECONDS = 2


def run(settings: Settings, *, host: str | None = None, port: int | None = None) -> None:
    """Serve the board until interrupted.

    Raises:
        InvalidInput: a non-loopback bind without a token.
        StorageError: a database that cannot open. Nothing was served when one is raised.
    """
    import uvicorn

    from workq.board.app import build_app

    host = host or DEFAULT_HOST
    port = port or DEFAULT_PORT
    check_bind(host, settings.token)
    sock = listen(host, port)
    check_storage(settings)
    queue = open_queue(settings)
    logging.getLogger("workq").setLevel(logging.INFO)
    shown = f"[{host}]" if ":" in host else host
    sys.stderr.write(
        f"workq: board at http://{shown}:{port}/ (database {describe_storage(settings)})\n"
    )
    warning = storage_warning(settings)
    if warning:
        sys.stderr.write(f"workq: warning: {warning}\n")
    sys.stderr.flush()
    config = uvicorn.Config(
        build_app(queue, token=settings.token, host=host),
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        # Open change feeds never end by themselves: give them a moment, then close them.
        timeout_graceful_shutdown=SHUTDOWN_SECONDS,
    )
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        queue.db.dispose()
