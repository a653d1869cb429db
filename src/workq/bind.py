"""Who may reach workq over HTTP (``serve --http`` and the board share it): loopback by
default; any other bind requires a token. Without a token, a request must also name the
bound address in its ``Host`` (and ``Origin``, when it has one): a page on another site
whose name was rebound to a loopback address cannot drive the queue or read the board."""

from __future__ import annotations

import errno
import ipaddress
import socket
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


def listen(host: str, port: int, flag: str = "--port") -> socket.socket:
    """A socket bound to ``host``:``port``, for the HTTP server to serve on (bound before
    anything says it is serving, so that a port in use is one clear error).

    Raises:
        InvalidInput: the address cannot be bound (in use, not this machine's, no right).
    """
    try:
        # IPv4 unless the address is IPv6, as uvicorn binds: "localhost" is 127.0.0.1.
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        found = socket.getaddrinfo(
            host.strip("[]"), port, family, socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        raise InvalidInput(
            f"cannot listen on {host}: {exc.strerror}",
            hint="give --host an address of this machine",
            field="host",
        ) from None
    family, kind, proto, _, address = found[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        shown = f"[{host}]" if ":" in host else host
        if exc.errno == errno.EADDRINUSE:
            raise InvalidInput(
                f"port {port} on {shown} is in use",
                hint=f"stop what listens there, or choose another port with {flag}",
                field="port",
            ) from None
        raise InvalidInput(
            f"cannot listen on {shown}:{port}: {exc.strerror}",
            hint=f"choose another address with --host or port with {flag}",
            field="port",
        ) from None
    return sock
