"""Sending one notice to one sink, once: a webhook's POST or a local command's run. Never
raises for the receiver's fault: an :class:`Outcome` says what happened, and whether trying
again could help.

A webhook gets the JSON body with ``X-Workq-Event``, ``X-Workq-Delivery`` (the id a receiver
drops repeats by) and, when the sink names a secret's variable, ``X-Workq-Signature-256``:
``sha256=`` and the hex HMAC-SHA256 of the exact body under that secret. A body is never
sent unsigned to a sink that asks for a signature. Redirects are not followed (the signed
body would go where the sink's owner did not say). No message names the URL: it may be the
secret that lets anyone post.

A command runs without a shell, in a session of its own (killed with its children on
timeout), with the body on its stdin and an allow-listed environment; exit 0 is delivered,
else the last line of its stderr is the error.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import http.client
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from email.message import Message
from typing import IO, Any
from urllib.parse import urlsplit

from workq.domain.gates import refused_env
from workq.nowait import before_waiting
from workq.services.notices.payload import encode
from workq.services.notices.sinks import SECRET_MIN, WEBHOOK, Sink

WEBHOOK_SECONDS = 5.0
COMMAND_SECONDS = 30.0
ERROR_MAX = 300
STDERR_TAIL = 4096
SIGNATURE_HEADER = "X-Workq-Signature-256"
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
# What a command inherits from the delivering process: where programs and the user's files
# are, the locale, the desktop session (a notifier shows there), proxies. Never a variable
# ``refused_env`` names (a token, a secret, a database URL, workq's own settings).
PASSED = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR",
        "DISPLAY", "WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR",
        "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "SSL_CERT_FILE",
        "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
    }
)  # fmt: skip
PASSED_PREFIXES = ("LC_",)


@dataclass(frozen=True)
class Outcome:
    """One attempt's result."""

    ok: bool
    error: str | None = None
    permanent: bool = False  # trying again cannot help (a 4xx answer, a redirect)
    status: int | None = None  # a webhook's HTTP status, a command's exit status
    retry_after: float | None = None  # seconds the receiver asked us to wait
    seconds: float = 0.0


def send(sink: Sink, body: Mapping[str, Any]) -> Outcome:
    """Send ``body`` (a notice, see payload.py) to ``sink``, once, within
    ``WEBHOOK_SECONDS`` or ``COMMAND_SECONDS``."""
    before_waiting("sending a notice")
    data = encode(body)
    event, delivery = str(body.get("event")), str(body.get("delivery"))
    if sink.kind == WEBHOOK:
        assert sink.url is not None
        return post(
            sink.url,
            data,
            event=event,
            delivery_id=delivery,
            secret_env=sink.secret_env,
            timeout=WEBHOOK_SECONDS,
        )
    return run_command(sink.argv, data, timeout=COMMAND_SECONDS)


def signature(secret: str, data: bytes) -> str:
    """The value of ``X-Workq-Signature-256`` for body ``data``."""
    return "sha256=" + hmac.new(secret.encode("utf-8"), data, hashlib.sha256).hexdigest()


@functools.cache
def user_agent() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"workq/{version('workq-mcp')}"
    except PackageNotFoundError:
        return "workq"


def post(
    url: str,
    data: bytes,
    *,
    event: str,
    delivery_id: str,
    secret_env: str | None,
    timeout: float = WEBHOOK_SECONDS,
) -> Outcome:
    """POST ``data`` to ``url``; 2xx is delivered."""
    headers = {
        "Content-Type": "application/json",
        "User-Agent": user_agent(),
        "X-Workq-Event": event,
        "X-Workq-Delivery": delivery_id,
    }
    if secret_env:
        secret = os.environ.get(secret_env) or ""
        if len(secret) < SECRET_MIN:
            missing = "is not set" if not secret else f"holds fewer than {SECRET_MIN} characters"
            return Outcome(
                False,
                f"the signing secret's variable {secret_env} {missing} in the delivering "
                "process: not sent unsigned",
            )
        headers[SIGNATURE_HEADER] = signature(secret, data)
    request = urllib.request.Request(url, data=data, headers=headers, method="POST")
    started = time.monotonic()
    try:
        with _opener(url).open(request, timeout=timeout) as response:
            status = int(response.status)
    except urllib.error.HTTPError as exc:
        return _answered(exc, time.monotonic() - started)
    except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as exc:
        return Outcome(False, _why(exc, timeout), seconds=time.monotonic() - started)
    return Outcome(True, status=status, seconds=time.monotonic() - started)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # the 3xx answer stands, as an error


def _opener(url: str) -> urllib.request.OpenerDirector:
    loopback = (urlsplit(url).hostname or "") in _LOOPBACK
    proxies = urllib.request.ProxyHandler({} if loopback else None)
    return urllib.request.build_opener(proxies, _NoRedirect())


def _answered(exc: urllib.error.HTTPError, seconds: float) -> Outcome:
    """A webhook's answer other than 2xx: 408, 429 and 5xx are tried again; a redirect or
    another 4xx will be answered the same way every time."""
    code = int(exc.code)
    said = f"HTTP {code} {exc.reason}".rstrip()
    with contextlib.suppress(OSError, http.client.HTTPException):
        first = exc.read(200).decode("utf-8", "replace")
        first = " ".join(first.split())
        if first:
            said += f": {first}"
    exc.close()
    permanent = 300 <= code < 400 or (400 <= code < 500 and code not in (408, 429))
    if 300 <= code < 400:
        said += " (redirects are not followed: give the final URL)"
    return Outcome(
        False,
        _clip(said),
        permanent=permanent,
        status=code,
        retry_after=_retry_after(exc.headers) if code in (429, 503) else None,
        seconds=seconds,
    )


def _retry_after(headers: Message | None) -> float | None:
    value = (headers.get("Retry-After") if headers is not None else None) or ""
    return float(value) if value.strip().isdigit() else None


def _why(exc: BaseException, timeout: float) -> str:
    """A failure to exchange with the receiver, in words without the URL."""
    reason: Any = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(reason, TimeoutError):
        return f"no answer in {timeout:g} s"
    if isinstance(reason, socket.gaierror):
        return _clip(f"cannot resolve the host: {reason.strerror or reason}")
    if isinstance(reason, OSError):
        return _clip(reason.strerror or str(reason) or type(reason).__name__)
    if isinstance(reason, http.client.HTTPException):
        return _clip(f"a broken answer ({type(reason).__name__})")
    return _clip(str(reason) or type(reason).__name__)


def _clip(text: str) -> str:
    one = " ".join(text.split())
    return one if len(one) <= ERROR_MAX else one[: ERROR_MAX - 1] + "…"


def environment() -> dict[str, str]:
    """A command's environment: the allow-listed variables of this process."""
    return {
        k: v
        for k, v in os.environ.items()
        if (k in PASSED or k.startswith(PASSED_PREFIXES)) and refused_env(k) is None
    }


def run_command(argv: tuple[str, ...], data: bytes, *, timeout: float = COMMAND_SECONDS) -> Outcome:
    """Run ``argv`` with ``data`` on its stdin; exit 0 is delivered."""
    env = environment()
    name = os.path.basename(argv[0]) if argv else "?"
    program = argv[0] if "/" in argv[0] else shutil.which(argv[0], path=env.get("PATH"))
    if program is None:
        return Outcome(False, f"program {argv[0]!r} not found on the delivering process's PATH")
    started = time.monotonic()
    with tempfile.TemporaryFile() as errors:
        try:
            proc = subprocess.Popen(
                [program, *argv[1:]],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=errors,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            return Outcome(False, _clip(f"cannot start {name}: {exc.strerror or exc}"))
        try:
            proc.communicate(data, timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            proc.wait()
            return Outcome(
                False,
                f"{name} did not finish in {timeout:g} s (killed)",
                seconds=time.monotonic() - started,
            )
        seconds = time.monotonic() - started
        if proc.returncode == 0:
            return Outcome(True, status=0, seconds=seconds)
        last = _last_line(errors)
        said = f"{name} exited with status {proc.returncode}" + (f": {last}" if last else "")
        return Outcome(False, _clip(said), status=proc.returncode, seconds=seconds)


def _last_line(stream: IO[bytes]) -> str:
    size = stream.seek(0, os.SEEK_END)
    stream.seek(max(0, size - STDERR_TAIL))
    lines = [ln.strip() for ln in stream.read().decode("utf-8", "replace").splitlines()]
    return next((ln for ln in reversed(lines) if ln), "")


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
