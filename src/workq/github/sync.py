"""Running the mirror: checks at start, one pass, a watch loop, or a background thread
beside the MCP server (``start_background_sync``)."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from workq.config import Settings
from workq.domain import leases
from workq.errors import StorageError, WorkqError
from workq.github import merges
from workq.github.auth import (
    GitHubUnreachable,
    SyncSetupError,
    api_url,
    check_repo_name,
    preflight,
    resolve_token,
)
from workq.github.client import GitHubClient
from workq.github.failures import AuthFailed, GitHubCallError
from workq.github.importer import Importer, ImportReport
from workq.github.landing import Lander, LandReport
from workq.github.transport import DEFAULT_TIMEOUT
from workq.github.worker import Options, Progress, PushReport, Worker, WorkerBusy
from workq.services.handle import Queue
from workq.services.sync import mirror_target

log = logging.getLogger("workq.github")


@dataclass
class Session:
    """A checked connection to one repository, and the worker holding its mirror."""

    client: GitHubClient
    worker: Worker
    queued: int  # rows queued when the mirror was (re)configured
    lander: Lander

    @property
    def repo(self) -> str:
        return self.worker.repo

    def close(self) -> None:
        with contextlib.suppress(WorkqError):
            self.worker.release_lease()
        self.client.close()


def connect(
    q: Queue,
    repo: str,
    *,
    env: Mapping[str, str] | None = None,
    options: Options | None = None,
    progress: Progress | None = None,
    stop: threading.Event | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> Session:
    """Check token, repository and access, configure the mirror, take the worker's lease.

    Raises:
        SyncSetupError: no token, refused token, unknown repository, no push access.
        GitHubUnreachable: GitHub did not answer.
        WorkerBusy: another worker mirrors this repository.
        Conflict: the database mirrors another repository.
    """
    repo = check_repo_name(repo)
    client = GitHubClient(resolve_token(env), base_url=api_url(env), timeout=timeout)
    try:
        access = preflight(client, repo)
        _mirror, queued = mirror_target.configure(q, access.repo.full_name)
        worker = Worker(
            q,
            client,
            _mirror.repo,
            access.user.login,
            options=options,
            progress=progress,
            stop=stop,
        )
        worker.hold_lease()
    except BaseException:
        client.close()
        raise
    lander = Lander(q, client, worker.repo, pace=worker.pace)
    return Session(client=client, worker=worker, queued=queued, lander=lander)


@dataclass
class PassResult:
    imported: ImportReport | None
    pushed: PushReport
    merged: list[int] = field(default_factory=list)  # issues done by a merged pull request
    landed: LandReport = field(default_factory=LandReport)


def run_pass(session: Session, *, with_import: bool, with_merges: bool = True) -> PassResult:
    """Import (if asked), move the landing queue, settle merged pull requests (if asked),
    then push every due row once.

    Raises:
        AuthFailed: GitHub refused the token meanwhile (the worker stops).
    """
    worker = session.worker
    imported = None
    if with_import:
        try:
            imported = Importer(worker).run()
        except AuthFailed:
            raise
        except GitHubCallError as exc:
            mirror_target.note_mirror(worker.q, worker.repo, last_error=f"import: {exc.message}")
            log.warning("import failed: %s", exc.message)
    # Before the push, so that the same pass mirrors the issues they complete.
    landed = session.lander.run_pass()
    merged = merges.settle(worker.q, worker.client, worker.repo) if with_merges else []
    pushed = worker.push_pass()
    return PassResult(imported=imported, pushed=pushed, merged=merged, landed=landed)


def watch(
    session: Session,
    *,
    with_import: bool,
    on_pass: Callable[[PassResult], None] | None = None,
) -> None:
    """Pass after pass until the worker's ``stop`` is set. Failures of GitHub or of the
    database are logged and retried; a refused token or a lost lease ends the loop."""
    worker = session.worker
    next_import = next_merges = 0.0
    while not worker.stop.is_set():
        importing = with_import and time.monotonic() >= next_import
        # Merged pull requests are read back at the import's pace, not every poll.
        merging = time.monotonic() >= next_merges
        try:
            worker.renew_lease()
            result = run_pass(session, with_import=importing, with_merges=merging)
        except AuthFailed as exc:
            _say_stopped(worker, exc.message)
            raise
        except WorkerBusy:
            raise
        except (GitHubCallError, StorageError) as exc:
            log.warning("sync pass failed: %s", exc.message)
            worker.stop.wait(worker.options.poll_interval)
            continue
        if importing:
            next_import = time.monotonic() + worker.options.import_interval
        if merging:
            next_merges = time.monotonic() + worker.options.import_interval
        if on_pass is not None:
            on_pass(result)
        worker.stop.wait(_idle(worker))


def _say_stopped(worker: Worker, reason: str) -> None:
    """Record the stop for the people who asked to hear of it (it stops all the same)."""
    try:
        mirror_target.stopped(worker.q, worker.repo, reason)
    except WorkqError as exc:
        log.warning("could not record the stop: %s", exc.describe())


def _idle(worker: Worker) -> float:
    """How long to wait before the next pass: until the next row is due, at most a poll."""
    wait = worker.options.poll_interval
    if worker.held_until is not None:
        wait = max(wait, (worker.held_until - worker.q.now()).total_seconds())
    return min(wait, leases.renewal_period(worker.options.lease_seconds))


def start_background_sync(
    settings: Settings,
    repo: str,
    *,
    env: Mapping[str, str] | None = None,
    options: Options | None = None,
    with_import: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
    fail_fast: bool = True,
) -> Callable[[], None]:
    """Run the mirror in a daemon thread with its own database connections; returns the
    function that stops it (waits for the current request, at most the client timeout).

    Checks token, repository and access before returning (``fail_fast``). If GitHub cannot
    be reached, or another worker holds the mirror, the thread keeps trying in the
    background: the queue never waits for GitHub. Without ``fail_fast`` (beside a server,
    which is offline-first) a failed check is said on stderr and tried again too; only a
    database that mirrors another repository stops the mirror, and never the server.

    Raises:
        SyncSetupError: no token, refused token, unknown repository, no push access.
        Conflict: the database mirrors another repository.
    """
    from workq.services.runtime import open_queue

    repo = check_repo_name(repo)  # a name that can never work is refused at once
    pause = (options or Options()).lease_seconds / 3
    retried: tuple[type[WorkqError], ...] = (
        (GitHubUnreachable, WorkerBusy) if fail_fast else (SyncSetupError, WorkerBusy)
    )
    retried_in_loop: tuple[type[WorkqError], ...] = (*retried, StorageError)
    q = open_queue(settings)
    stop = threading.Event()
    session: Session | None = None
    try:
        session = connect(q, repo, env=env, options=options, stop=stop, timeout=timeout)
    except retried as exc:
        log.warning(
            "GitHub mirror to %s off until this is fixed (%s); trying again every %d s",
            repo,
            exc.describe(),
            pause,
        )
    except WorkqError as exc:
        if fail_fast:
            q.db.dispose()
            raise
        log.error("GitHub mirror to %s stopped: %s", repo, exc.describe())
        q.db.dispose()
        return lambda: None
    except BaseException:
        q.db.dispose()
        raise

    def run() -> None:
        nonlocal session
        while not stop.is_set():
            try:
                if session is None:
                    session = connect(q, repo, env=env, options=options, stop=stop, timeout=timeout)
                watch(session, with_import=with_import)
            except retried_in_loop as exc:
                log.warning("GitHub sync: %s; retrying", exc.message)
            except WorkqError as exc:
                log.error("GitHub sync stopped: %s", exc.describe())
                return
            stop.wait(pause)

    thread = threading.Thread(target=run, name="workq-github-sync", daemon=True)
    thread.start()

    def stop_sync() -> None:
        stop.set()
        thread.join(timeout=30)
        if session is not None:
            session.close()
        q.db.dispose()

    return stop_sync
