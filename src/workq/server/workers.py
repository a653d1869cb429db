"""``workq serve --http --workers N``: N processes answer MCP on one port.

One process binds the port, opens (and migrates) the queue once, then starts N workers
that share the listening socket: the kernel hands each connection to one of them. Any
worker may answer any request, so their transport keeps no sessions; a legacy client's
session is named in its ``initialize`` answer (server/http.py) and acts as the same run id
in every worker (``state.session_run_id``). The workers act as one server: they share its
run id and the name run ids are bound under (services/queue/run_ids.py). Waiting calls are
woken in every worker, since each follows the database's change feed. On SQLite the
workers are writers on one file, as several stdio servers are.

The supervisor only watches: a worker that dies after it served is replaced; one that
dies within ``SETTLE_SECONDS`` of its start stops them all (it would die again). SIGTERM
or SIGINT stops every worker; a worker whose supervisor was killed stops by itself.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import socket
import sys
import threading
import time
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from types import FrameType

from workq.config import Settings
from workq.errors import WorkerFailed
from workq.server.state import new_run_id
from workq.services.preflight import describe_storage

log = logging.getLogger("workq.server")

# A worker that dies this soon after its start is not restarted: it would die again.
SETTLE_SECONDS = 10.0
STOP_SECONDS = 10.0
PARENT_POLL_SECONDS = 1.0


def supervise(
    settings: Settings,
    *,
    host: str,
    port: int,
    count: int,
    migrate: bool | None,
    board: bool,
) -> None:
    """Start ``count`` workers on ``host``:``port`` and watch them until stopped.

    Raises:
        InvalidInput, StorageError, ...: as ``serve`` does, before any worker starts.
    """
    from workq.server import http
    from workq.server.startup import prepare, starting
    from workq.services.preflight import check_storage
    from workq.services.queue import processes
    from workq.services.runtime import open_queue

    with starting():
        http.check_bind(host, settings.token)
        sock = http.listen(host, port)
        check_storage(settings)
        # Checked here once (toolsets, GitHub, git), so that a worker rarely fails to start.
        checking, checked = prepare(settings, migrate=migrate)
        checking.state.github.close()
        # Opened (and migrated) here, once: workers never race to migrate.
        open_queue(settings, migrate=migrate).db.dispose()
    settings = settings.model_copy(update={"run_id": settings.run_id or new_run_id()})
    server = processes.token()
    context = multiprocessing.get_context("spawn")

    def start() -> BaseProcess:
        worker = context.Process(
            target=_worker,
            args=(settings, sock, host, port, board, server, os.getpid()),
            name="workq-worker",
            daemon=False,
        )
        worker.start()
        return worker

    stopping = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    workers = {start(): time.monotonic() for _ in range(count)}
    sys.stderr.write(
        f"workq: serving http://{host}:{port}/mcp as run id {settings.run_id} with {count} "
        f"workers (database {describe_storage(settings)}){checked}\n"
    )
    sys.stderr.flush()
    try:
        while not stopping:
            ended = wait([w.sentinel for w in workers], timeout=0.5)
            for worker in [w for w in workers if w.sentinel in ended]:
                worker.join()
                lived = time.monotonic() - workers.pop(worker)
                if stopping:
                    break
                if lived < SETTLE_SECONDS:
                    raise WorkerFailed(
                        f"a worker exited with code {worker.exitcode} {lived:.1f} s after it "
                        "started; see its error above"
                    )
                log.warning(
                    "workq: worker %s exited (%s); starting another", worker.pid, worker.exitcode
                )
                workers[start()] = time.monotonic()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        _stop_all(list(workers))
        sock.close()


def _stop_all(workers: list[BaseProcess]) -> None:
    for worker in workers:
        if worker.is_alive():
            worker.terminate()
    deadline = time.monotonic() + STOP_SECONDS
    for worker in workers:
        worker.join(max(0.0, deadline - time.monotonic()))
        if worker.is_alive():
            worker.kill()
            worker.join()


def _end_with(supervisor: int) -> None:
    """Stop this worker (as SIGTERM does) once its supervisor is gone, killed without the
    chance to stop it: the run id it serves under is then free to be taken."""
    while os.getppid() == supervisor:
        time.sleep(PARENT_POLL_SECONDS)
    os.kill(os.getpid(), signal.SIGTERM)


def _worker(
    settings: Settings,
    sock: socket.socket,
    host: str,
    port: int,
    board: bool,
    server: str,
    supervisor: int,
) -> None:
    """One worker: the server built and checked as ``serve`` builds it, then served on the
    shared socket until the supervisor stops it, or is gone. ``supervisor`` is named by the
    supervisor itself: a worker that asked for its parent would, started slowly after the
    supervisor was killed, be told init's pid and wait for it forever."""
    from workq.server.startup import log_to_stderr, prepare, serve_http, starting

    log_to_stderr()
    threading.Thread(
        target=_end_with, args=(supervisor,), name="workq-supervisor", daemon=True
    ).start()
    with starting():
        built, _ = prepare(settings, migrate=None, server=server)
    serve_http(built, settings, host=host, port=port, sock=sock, board=board, stateless=True)
