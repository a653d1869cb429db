"""Names of running workq processes, for the leases they hold, and whether the process behind
a name is gone.

A name is ``host:pid:nonce``, the host cut to 60 characters. The GitHub sync worker used to
name itself ``host:pid`` (the whole host name): mirrors written by those versions still hold
such a name, so both forms are read.
"""

from __future__ import annotations

import os
import secrets
import socket

HOST_MAX = 60
# This process's own name, by pid (a forked child names itself anew).
_own: dict[int, str] = {}


def token() -> str:
    """A new name for this process, unique across hosts and restarts."""
    return f"{socket.gethostname()[:HOST_MAX]}:{os.getpid()}:{secrets.token_hex(4)}"


def this_process() -> str:
    """One name for this process, the same each time it is asked: what one process holds
    under it, it holds however many times it takes it."""
    return _own.setdefault(os.getpid(), token())


def parse(name: str) -> tuple[str, int] | None:
    """The host and pid of a name (``host:pid:nonce``, or an older ``host:pid``); None for
    a name of another form."""
    host, colon, rest = name.partition(":")
    pid, _, _ = rest.partition(":")
    if not colon or not pid.isdigit():
        return None
    return host, int(pid)


def gone(name: str) -> bool:
    """True when ``name`` is a process of this host that no longer runs (killed, exited
    without cleaning up): what it held may be taken at once. A process of another host,
    or a name of another form, is never known to be gone."""
    parsed = parse(name)
    if parsed is None:
        return False
    host, pid = parsed
    here = socket.gethostname()
    if host not in (here[:HOST_MAX], here):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False
