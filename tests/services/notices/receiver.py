"""A real webhook receiver on 127.0.0.1 (``http.server`` in a thread) for the notice tests:
it checks each request's signature, keeps what it was sent, and answers as told (2xx, an
error status, or not at all until let go)."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SECRET = "a-shared-secret-of-32-characters"
SECRET_VAR = "WORKQ_TEST_NOTIFY_SECRET"


@dataclass
class Received:
    delivery: str
    event: str
    body: dict[str, Any]
    raw: bytes
    headers: dict[str, str]
    signed_ok: bool | None  # None: no signature header


@dataclass
class Receiver:
    """What the server was sent, and how it answers: ``status`` (a code, or a callable of
    the request's count), ``hold`` (each request waits for ``release`` before its answer),
    ``delay`` (seconds before each answer)."""

    url: str = ""
    status: int | Callable[[int], int] = 204
    hold: bool = False
    received: list[Received] = field(default_factory=list)
    in_flight: dict[str, int] = field(default_factory=dict)
    overlaps: list[str] = field(default_factory=list)  # ids sent twice at the same time
    release: threading.Event = field(default_factory=threading.Event)
    arrived: threading.Event = field(default_factory=threading.Event)
    delay: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def ids(self) -> list[str]:
        with self.lock:
            return [r.delivery for r in self.received]

    def seen_once(self) -> set[str]:
        """The delivery ids, each once: what a receiver that drops repeats keeps."""
        return set(self.ids())

    def wait_for(self, count: int, timeout: float = 30.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.received) >= count:
                    return list(self.received)
            time.sleep(0.02)
        raise AssertionError(f"{count} requests expected, {len(self.received)} came")


def _handler(state: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            given = self.headers.get("X-Workq-Signature-256")
            expected = "sha256=" + hmac.new(SECRET.encode(), raw, hashlib.sha256).hexdigest()
            delivery = self.headers.get("X-Workq-Delivery") or ""
            with state.lock:
                state.received.append(
                    Received(
                        delivery=delivery,
                        event=self.headers.get("X-Workq-Event") or "",
                        body=json.loads(raw),
                        raw=raw,
                        headers=dict(self.headers.items()),
                        signed_ok=None if given is None else hmac.compare_digest(given, expected),
                    )
                )
                number = len(state.received)
                state.in_flight[delivery] = state.in_flight.get(delivery, 0) + 1
                if state.in_flight[delivery] > 1:
                    state.overlaps.append(delivery)
            state.arrived.set()
            try:
                if state.hold:
                    state.release.wait(60)
                if state.delay:
                    time.sleep(state.delay)
                status = state.status(number) if callable(state.status) else state.status
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"no" if status >= 300 else b"ok")
            except OSError:
                pass  # the sender gave up on us
            finally:
                with state.lock:
                    state.in_flight[delivery] -= 1

    return Handler


@contextmanager
def receiver(**options: Any) -> Iterator[Receiver]:
    """A receiver listening on 127.0.0.1 (a free port) until the block ends."""
    state = Receiver(**options)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/secret-path"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()
