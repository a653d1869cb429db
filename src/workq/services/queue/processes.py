"""Names of running workq processes (host:pid:nonce), for the leases they hold, and whether
the process behind a name is gone."""

from __future__ import annotations

import os
import secrets
import socket


def token() -> str:
    """A name for this process, unique across hosts and restarts."""
    return f"{socket.gethostname()[:60]}:{os.getpid()}:{secrets.token_hex(4)}"


def gone(name: str) -> bool:
    """True when ``name`` is a process of this host that no longer runs (killed, exited
    without cleaning up): what it held may be taken at once. A process of another host,
    or a name of another form, is never known to be gone."""
    host, _, rest = name.partition(":")
    pid, _, _ = rest.partition(":")
    if host != socket.gethostname()[:60] or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False
