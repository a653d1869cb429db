"""Who may reach workq over HTTP (``serve --http`` and the board share it): loopback by
default; any other bind requires a token. Without a token, a request must also name the
bound address in its ``Host`` (and ``Origin``, when it has one): a page on another site
whose name was rebound to a loopback address cannot drive the queue or read the board."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from workq.errors import InvalidInput

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse to serve beyond this machine without a token."""
    if not is_loopback(host) and not token:
        raise InvalidInput(
            f"refusing to serve on {host} without a bearer token: anyone who can reach it "
            "could change the queue",
            hint="pass --token (or set WORKQ_TOKEN), or bind 127.0.0.1",
            field="host",
        )


def local_names(bound: str) -> frozenset[str]:
    """The host names a request may carry to a server bound to ``bound`` without a token:
    the bound name itself, and the loopback names when it is ``localhost``, ``127.0.0.1``
    or ``::1``."""
    name = bound.strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return LOOPBACK_NAMES
    return frozenset({name})


def _hostname(value: str) -> str | None:
    try:
        return urlsplit(value).hostname
    except ValueError:
        return None


def host_allowed(header: str | None, bound: str) -> bool:
    """Whether a ``Host`` header names the server bound to ``bound``."""
    return bool(header) and _hostname(f"//{header}") in local_names(bound)


def origin_allowed(origin: str | None, bound: str) -> bool:
    """Whether an ``Origin`` header (absent: a request that is not a browser's cross-site
    one) is a page of the server bound to ``bound``."""
    if origin is None:
        return True
    return origin.startswith(("http://", "https://")) and _hostname(origin) in local_names(bound)
