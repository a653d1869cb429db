"""Work that must not wait: a call the server runs on its event loop (server/inline.py).

Handing a call to a worker thread and back costs more than a claim on SQLite does, so the
server runs its hot calls on the loop itself, inside ``no_waiting()``. Everything that
could make a thread wait asks ``must_not_wait()`` or calls ``before_waiting()`` first: the
database's write lock (held by another thread or process), a hook that runs git, a
subprocess. They raise ``WouldWait`` before anything of the call is written, and the
server runs the call again on a worker thread, where waiting is allowed.

The rule that keeps a second run safe: a call refuses only before its first commit. Once
it committed, waiting is allowed (and logged: a call that reaches a wait after its commit
should not have been run on the loop).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

log = logging.getLogger("workq.nowait")


class WouldWait(Exception):
    """The call reached something it would wait for, and nothing of it was written: run it
    where waiting is allowed (a worker thread). Never reaches a caller."""


@dataclass
class _Run:
    committed: bool = False


_RUN: ContextVar[_Run | None] = ContextVar("workq_no_waiting", default=None)


@contextmanager
def no_waiting() -> Iterator[None]:
    """Run the body as work that must not wait (see the module's docstring)."""
    token = _RUN.set(_Run())
    try:
        yield
    finally:
        _RUN.reset(token)


def must_not_wait() -> bool:
    """Whether a wait is refused here: inside ``no_waiting``, and nothing committed yet."""
    run = _RUN.get()
    return run is not None and not run.committed


def before_waiting(what: str) -> None:
    """Before ``what``, which may wait: WouldWait when ``must_not_wait()``."""
    run = _RUN.get()
    if run is None:
        return
    if not run.committed:
        raise WouldWait(what)
    log.warning("workq: %s after a commit, on the server's event loop: it waits there", what)


def call_committed() -> None:
    """The call committed a change: from here on it is not run again, and may wait."""
    run = _RUN.get()
    if run is not None:
        run.committed = True
