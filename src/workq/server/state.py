"""What one server process holds: its run id, the run ids it claimed with, and the queue.

The queue is opened on a background thread when serving starts, so the MCP handshake
does not wait for SQLAlchemy to import or the database to migrate; the first tool call
waits for it instead. While serving, another thread renews the leases of every claim made
through this process, so a live agent never loses its work to a short lease.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import Future, wait
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from workq.config import Settings
from workq.domain import leases
from workq.domain.authority import Authority
from workq.errors import RunIdInUse, StorageError, WorkqError
from workq.server.github_link import GitHubLink
from workq.services.queue import processes

if TYPE_CHECKING:
    from workq.services.handle import Queue

log = logging.getLogger("workq.server")

# How long a tool call waits for the queue to open (a migration, a busy database).
OPEN_TIMEOUT_SECONDS = 120.0
HOLDERS_MAX = 4096
# Alembic keeps its migration context in module globals: one open (and so at most one
# migration) at a time in a process, whatever number of servers it runs.
_OPENING = threading.Lock()


def new_run_id() -> str:
    return f"run-{secrets.token_hex(4)}"


def session_run_id(session_id: str) -> str:
    """The run id of HTTP session ``session_id``: the same in every process that serves it
    (``--workers``), and across restarts of the server."""
    return f"run-{hashlib.blake2b(session_id.encode(), digest_size=8).hexdigest()}"


@dataclass
class Caller:
    """Who a call acts as: a run id, and the run ids it claimed with (whose claims it may
    complete). One per server process on stdio; one per session over HTTP. ``binder``
    names the caller in run id bindings (services/queue/run_ids.py): a run id another
    live caller bound is refused, whether that caller is another server or another
    session of this one."""

    run_id: str
    binder: str = ""
    holders: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.holders.add(self.run_id)


# The caller of the call being served, set around it by ``ServerState.serving`` (tools run
# on worker threads, which get a copy of this context); unset: the server's own.
_CALLER: ContextVar[Caller | None] = ContextVar("workq_caller", default=None)


class ServerState:
    """Shared by every tool of one server. Thread-safe: tools run on worker threads."""

    def __init__(
        self, settings: Settings, *, migrate: bool | None = None, server: str | None = None
    ) -> None:
        self.settings = settings
        # Who binds run ids (services/queue/run_ids.py): this process, or the supervisor of
        # the workers it is one of (they act as one server); a session binds as itself.
        self.server = server or processes.token()
        self.own = Caller(settings.run_id or new_run_id(), binder=self.server)
        self.migrate = migrate
        self._lock = threading.Lock()
        self._sessions: OrderedDict[str, Caller] = OrderedDict()
        # Every run id a caller of this process claimed with: the claims it renews.
        self._holders: set[str] = {self.own.run_id}
        # (binder, run id) -> until when (the database's clock) the binding stands
        self._bound: dict[tuple[str, str], datetime] = {}
        self._future: Future[Queue] | None = None
        self._opened: Queue | None = None  # the future's queue, once it opened
        self._users = 0
        self._stop = threading.Event()
        # The background threads of an open queue: lease renewal, the watch (stalls,
        # lapses, a drained queue), the delivery of notices.
        self._keepers: list[threading.Thread] = []
        self._opener: threading.Thread | None = None
        self._waits_ended = threading.Event()
        self._on_end_waits: list[Callable[[], None]] = []
        self.github = GitHubLink(settings)

    # -- identity ---------------------------------------------------------------------

    @property
    def run_id(self) -> str:
        """The run id of the caller being served: this server's, or its HTTP session's."""
        return (_CALLER.get() or self.own).run_id

    def session(self, session_id: str) -> Caller:
        """The caller of HTTP session ``session_id``: a run id of its own (``session_run_id``),
        so that sessions which name no run id do not act as one."""
        with self._lock:
            caller = self._sessions.get(session_id)
            if caller is None:
                run_id = session_run_id(session_id)
                binder = f"{self.server}:{run_id}"
                caller = self._sessions[session_id] = Caller(run_id, binder=binder)
                if len(self._sessions) > HOLDERS_MAX:
                    self._sessions.popitem(last=False)
            return caller

    @contextmanager
    def serving(self, caller: Caller) -> Iterator[None]:
        """Serve one call as ``caller``."""
        token = _CALLER.set(caller)
        try:
            yield
        finally:
            _CALLER.reset(token)

    def authority(self, run_id: str | None = None, *, fence: int | None = None) -> Authority:
        """The caller of this call, as every service takes it: acting for ``run_id`` alone
        if it names one (claiming under it), else for every run id it claimed with
        (claiming under its own), with ``fence``; its own run id is ``who`` (whose plan
        mode refuses its claims and completions too). The one place a server builds an
        Authority.

        Raises:
            RunIdInUse: another live caller (another server, another session of this one)
                bound the run id it names.
        """
        caller = _CALLER.get() or self.own
        chosen = run_id or caller.run_id
        if chosen == caller.run_id:
            self._bind(caller, chosen)  # its own: no other caller may take it first
        else:
            self._check_bound(caller, chosen)  # bound once a claim under it is made
        if run_id is not None:  # naming a run id acts as that run alone
            return Authority.of({chosen}, acts_as=chosen, fence=fence, who=caller.run_id)
        with self._lock:
            ids = frozenset(caller.holders)
        return Authority.of(ids, acts_as=chosen, fence=fence, who=caller.run_id)

    def claimed_with(self, run_id: str) -> None:
        """A claim was made under ``run_id``: bind it to the caller (a refused call binds
        nothing), and renew its leases while this server runs.

        Raises:
            RunIdInUse: another live caller bound it meanwhile.
        """
        caller = _CALLER.get() or self.own
        self._bind(caller, run_id)
        with self._lock:
            if len(self._holders) < HOLDERS_MAX:
                self._holders.add(run_id)
                caller.holders.add(run_id)

    def _check_bound(self, caller: Caller, run_id: str) -> None:
        """RunIdInUse unless ``run_id`` is this caller's or free: read from the database
        unless this caller's binding of it stands (``_stands``)."""
        from workq.services.queue import run_ids

        queue = self.queue()
        if not self._stands(queue, caller, run_id):
            run_ids.check(queue, run_id, caller.binder)

    def _bind(self, caller: Caller, run_id: str) -> None:
        """Bind ``run_id`` to ``caller`` (services/queue/run_ids.py), unless its binding
        stands for another half lease: the renewal keeps it bound while the server runs."""
        queue = self.queue()
        if not self._stands(queue, caller, run_id):
            self._bind_on(queue, caller, run_id)

    def _stands(self, queue: Queue, caller: Caller, run_id: str) -> bool:
        """Whether ``caller``'s binding of ``run_id`` stands for another half lease by the
        database's clock (a machine that slept finds it lapsed)."""
        until = self._bound.get((caller.binder, run_id))  # one read of a dict: no lock
        half = timedelta(seconds=queue.lease_seconds / 2)
        return until is not None and until - queue.now() > half

    def _bind_on(self, queue: Queue, caller: Caller, run_id: str) -> None:
        from workq.services.queue import run_ids

        until = run_ids.bind(queue, run_id, caller.binder)
        with self._lock:
            self._bound[(caller.binder, run_id)] = until

    # -- waiting calls ----------------------------------------------------------------

    def end_waits(self) -> None:
        """The client has gone (end of input): calls waiting for work stop waiting."""
        self._waits_ended.set()
        for wake in list(self._on_end_waits):
            wake()

    def on_end_waits(self, wake: Callable[[], None]) -> None:
        """Call ``wake`` (it must not block) when waits end: a sleeping waiter sees it."""
        self._on_end_waits.append(wake)

    def waits_ended(self) -> bool:
        return self._waits_ended.is_set()

    # -- lifecycle --------------------------------------------------------------------

    def start(self) -> None:
        """Begin opening the queue and renewing leases. Nested starts share one queue."""
        with self._lock:
            self._users += 1
            if self._future is not None:
                return
            self._stop.clear()
            self._launch()

    def _launch(self) -> Future[Queue]:
        """Start opening the queue on a thread (the caller holds ``_lock``)."""
        future: Future[Queue] = Future()
        self._future = future
        self._opener = threading.Thread(
            target=self._open, args=(future,), name="workq-open", daemon=True
        )
        self._opener.start()
        return future

    def stop(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users > 0 or self._future is None:
                return
            future, self._future = self._future, None
            opener, self._opener = self._opener, None
            self._opened = None
        self._stop.set()
        if opener is not None:
            opener.join(timeout=OPEN_TIMEOUT_SECONDS)
        with self._lock:
            keepers, self._keepers = self._keepers, []
        for keeper in keepers:
            keeper.join(timeout=10)
        if future.done() and future.exception() is None:
            self._abandon_tasks(future.result())
            self._unbind(future.result())
            future.result().db.dispose()
        self.github.close()

    def _abandon_tasks(self, queue: Queue) -> None:
        """The client ended its input and this server's run id was made up for this process
        (no later server can act under it, so none could read its tasks): its waiting tasks
        are cancelled, and claims made for them and not read go back to the queue. With a
        chosen run id (``--run-id``, ``WORKQ_RUN_ID``) a restarted client may poll them."""
        if not self._waits_ended.is_set() or self.settings.run_id:
            return
        from workq.services.tasks import lifecycle

        try:
            lifecycle.abandon(queue, self.own.run_id, "Its client went away")
        except WorkqError as exc:  # they expire with their ttl instead
            log.warning("workq: could not cancel this client's tasks: %s", exc.describe())

    def _unbind(self, queue: Queue) -> None:
        """The run ids this server acted under are free for another server at once."""
        from workq.services.queue import run_ids

        try:
            run_ids.unbind(queue, self.server)
        except WorkqError as exc:  # they lapse with their lease instead
            log.warning("workq: could not give up the run ids: %s", exc.describe())

    def mirror_repo(self) -> str | None:
        """The repository this database mirrors to, if one is configured."""
        from workq.services.sync import mirror_target

        found = mirror_target.mirror(self.queue())
        return found.repo if found else None

    def opened(self) -> Queue | None:
        """The queue if it is open now (never waits)."""
        return self._opened

    def queue(self) -> Queue:
        """The open queue; waits while it is being opened, raises why it could not be."""
        opened = self._opened  # every call asks: once open, no lock
        if opened is not None:
            return opened
        with self._lock:
            future = self._future
            if future is None:
                raise StorageError("the server is not running", hint="start it with 'workq serve'")
            if future.done() and future.exception() is not None:
                # The last open failed (a locked, damaged or missing file): try again, so a
                # server outlives a fault that has since been fixed.
                future = self._launch()
        try:
            return future.result(timeout=OPEN_TIMEOUT_SECONDS)
        except TimeoutError:
            raise StorageError(
                f"the database did not open within {OPEN_TIMEOUT_SECONDS:.0f} s",
                hint="check that no other process holds a long write lock, then retry",
            ) from None

    def wait_open(self) -> None:
        """Block until the queue opened or failed to (a failure is for the calls to report)."""
        with self._lock:
            future = self._future
        if future is not None:
            wait([future], timeout=OPEN_TIMEOUT_SECONDS)

    def is_open(self) -> bool:
        with self._lock:
            future = self._future
        return future is not None and future.done() and future.exception() is None

    def _open(self, future: Future[Queue]) -> None:
        try:
            from workq.services.runtime import open_queue

            with _OPENING:
                queue = open_queue(self.settings, migrate=self.migrate)
        except WorkqError as exc:
            log.error("workq: cannot open the queue: %s", exc.describe())
            future.set_exception(exc)
            return
        except Exception as exc:
            log.exception("workq: cannot open the queue")
            future.set_exception(StorageError(f"cannot open the queue: {exc}"))
            return
        self._bind_own(queue)
        keepers = self._keepers_of(queue)
        with self._lock:
            current = self._future is future
            if current:
                self._keepers = keepers
                self._opened = queue
        future.set_result(queue)
        if current:
            for keeper in keepers:
                keeper.start()
        else:  # stopped while opening
            queue.db.dispose()

    def _keepers_of(self, queue: Queue) -> list[threading.Thread]:
        from workq.services.notices import delivery, watch
        from workq.services.queue.processes import this_process
        from workq.services.tasks import waker

        def thread(name: str, target: Callable[..., None], *args: object) -> threading.Thread:
            return threading.Thread(target=target, args=args, name=name, daemon=True)

        return [
            thread("workq-renew", self._renew_loop, queue),
            thread("workq-watch", watch.run, queue, self._stop, self.settings.watch_seconds),
            thread("workq-notices", delivery.run, queue, self._stop, this_process()),
            thread("workq-tasks", waker.run, queue, self._stop),
        ]

    def _bind_own(self, queue: Queue) -> None:
        """Bind this server's run id as it starts (calls under it then write nothing more);
        if another live server acts under it, calls under it are refused until that ends."""
        try:
            self._bind_on(queue, self.own, self.own.run_id)
        except WorkqError as exc:
            log.warning("workq: %s", exc.describe())

    def _renew_loop(self, queue: Queue) -> None:
        from workq.services.queue.claims import renew_leases

        interval = max(leases.renewal_period(queue.lease_seconds), 1.0)
        while not self._stop.wait(interval):
            try:
                renewed = renew_leases(queue, self._renew_bindings(queue))
            except WorkqError as exc:
                log.warning("workq: lease renewal failed (will retry): %s", exc.describe())
            else:
                log.debug("workq: renewed %d lease(s)", renewed)

    def _renew_bindings(self, queue: Queue) -> set[str]:
        """Renew the bindings of this server's callers; the run ids whose claims it still
        renews. One another caller took meanwhile (this one was stopped past its lease) is
        that caller's now: this one stops acting under it and renewing its claims."""
        from workq.services.queue import run_ids

        with self._lock:
            bound = dict(self._bound)
        kept = run_ids.renew(queue, self.server, set(bound))
        for binder, run_id in set(bound) - set(kept):
            try:
                until = run_ids.bind(queue, run_id, binder)
            except RunIdInUse as exc:
                log.warning("workq: %s; no longer acting under it", exc.message)
                with self._lock:
                    self._bound.pop((binder, run_id), None)
                    callers = [self.own, *self._sessions.values()]
                    if not any(run_id in c.holders for c in callers if c.binder != binder):
                        self._holders.discard(run_id)
                    for caller in callers:
                        if caller.binder == binder:
                            caller.holders.discard(run_id)
            else:
                kept[(binder, run_id)] = until
        with self._lock:
            self._bound.update(kept)
            held = {run_id for (_, run_id) in kept}
            return {h for h in self._holders if h in held}
