"""Real PostgreSQL servers for the fault tests: a private cluster this test may crash, and a
TCP proxy that cuts connections at chosen moments of the wire protocol."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class PrivateServer:
    """A throwaway cluster (scripts/pg_start.sh in a folder of its own) that can crash."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="workq-pg-test-"))
        self.env = {**os.environ, "WORKQ_PG_DIR": str(self.dir)}
        self.url = ""

    def start(self) -> str:
        done = subprocess.run(
            [str(ROOT / "scripts" / "pg_start.sh")],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        found = re.search(r"WORKQ_TEST_PG_URL='([^']+)'", done.stdout)
        assert found, done.stdout + done.stderr
        self.url = found.group(1)
        return self.url

    def crash(self) -> None:
        """Stop at once, as a crash would: every backend exits, recovery runs on restart."""
        pg_ctl = shutil.which("pg_ctl") or "pg_ctl"
        command = [pg_ctl, "-D", str(self.dir / "data"), "-m", "immediate", "-w", "stop"]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, capture_output=True, timeout=60, check=True)

    def remove(self) -> None:
        subprocess.run(
            [str(ROOT / "scripts" / "pg_stop.sh")], env=self.env, capture_output=True, timeout=60
        )
        shutil.rmtree(self.dir, ignore_errors=True)


@dataclass
class Cut:
    """Cut the connection when a client message contains ``marker``. With ``deliver`` the
    message reaches the server first and only its reply is lost."""

    marker: bytes
    deliver: bool
    times: int = 1


class FaultProxy:
    """Forwards 127.0.0.1:port to a PostgreSQL server, message by message from the client,
    and applies armed cuts. ``refusing`` closes every new connection at once."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.refusing = False
        self.cuts: list[Cut] = []
        self.fired = 0
        self.fired_on: list[bytes] = []  # the client messages the cuts fired on
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, server_url: str) -> str:
        """``server_url`` through this proxy, without TLS/GSS negotiation (plain messages)."""
        proxied = re.sub(r"@127\.0\.0\.1:\d+/", f"@127.0.0.1:{self.port}/", server_url)
        return proxied + ("&" if "?" in proxied else "?") + "sslmode=disable&gssencmode=disable"

    def arm(self, marker: bytes, *, deliver: bool, times: int = 1) -> None:
        with self._lock:
            self.cuts.append(Cut(marker, deliver, times))

    def close(self) -> None:
        self._closed = True
        self.listener.close()
        with self._lock:
            for sock in self._sockets:
                _close(sock)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.refusing:
                _close(client)
                continue
            try:
                server = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                _close(client)
                continue
            server.settimeout(None)
            with self._lock:
                self._sockets += [client, server]
            swallow = threading.Event()
            threading.Thread(
                target=self._client_to_server, args=(client, server, swallow), daemon=True
            ).start()
            threading.Thread(
                target=self._server_to_client, args=(server, client, swallow), daemon=True
            ).start()

    def _take_cut(self, message: bytes) -> Cut | None:
        with self._lock:
            for cut in self.cuts:
                if cut.times > 0 and cut.marker in message:
                    cut.times -= 1
                    self.fired += 1
                    self.fired_on.append(message)
                    return cut
        return None

    def _client_to_server(
        self, client: socket.socket, server: socket.socket, swallow: threading.Event
    ) -> None:
        try:
            startup = _read_exact(client, 4)
            (length,) = struct.unpack("!i", startup)
            server.sendall(startup + _read_exact(client, length - 4))
            while True:
                head = _read_exact(client, 5)
                (length,) = struct.unpack("!i", head[1:])
                message = head + _read_exact(client, length - 4)
                cut = self._take_cut(message)
                if cut is not None and not cut.deliver:
                    break
                if cut is not None:
                    swallow.set()  # before sending: the reply must not slip through
                server.sendall(message)
        except OSError:
            pass  # either side closed: the connection is over
        if not swallow.is_set():
            _close(client)
            _close(server)

    @staticmethod
    def _server_to_client(
        server: socket.socket, client: socket.socket, swallow: threading.Event
    ) -> None:
        try:
            while True:
                data = server.recv(65536)
                if not data:
                    break
                if swallow.is_set():
                    break  # the server has answered: the client never hears it
                client.sendall(data)
        except OSError:
            pass
        _close(client)
        _close(server)


def _read_exact(sock: socket.socket, size: int) -> bytes:
    chunks = b""
    while len(chunks) < size:
        data = sock.recv(size - len(chunks))
        if not data:
            raise OSError("closed")
        chunks += data
    return chunks


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
