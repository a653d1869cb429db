"""Who may reach workq over HTTP (``serve --http`` and the board share it): loopback by
default; any other bind requires a token."""

from __future__ import annotations

import ipaddress

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
