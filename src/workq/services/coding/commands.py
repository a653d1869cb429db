"""Running a checking command (a quality gate) the one way workq runs it.

An argument list, never a shell; stdin closed; stdout and stderr read together in chunks,
keeping the first ``head`` and the last ``tail`` bytes and counting what was cut, so a
command printing megabytes costs a bounded amount of memory. The command runs in a new
session (its own process group): on timeout the whole group is killed, children
included, and whatever the command left running when it exited is killed as well; if the
server itself is killed, the command gets the parent-death signal. Nothing reaches the
server's own stdout. A process the command puts in a session of its own (``setsid`` after a
double fork) leaves the group and outlives it: a documented limit (docs/coding-loop.md).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from workq.domain.gates import refused_env
from workq.nowait import before_waiting

HEAD_BYTES = 24 * 1024
TAIL_BYTES = 24 * 1024
CHUNK_BYTES = 64 * 1024
# How long to wait for the output pipe to close once the command is gone.
DRAIN_SECONDS = 5.0
# What a checked project's command inherits from the server's environment: where programs
# and the user's files are, the locale, the Python or Node environment it runs in. Nothing
# else; a gate table names more with ``env``, but never a token or another secret, a
# database URL or workq's own WORKQ_* settings (domain/gates.py ``refused_env``): those are
# left out whatever asks for them.
PASSED = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR",
        "VIRTUAL_ENV", "CONDA_PREFIX", "PYENV_VERSION", "PYENV_ROOT", "PYTHONPATH",
        "NODE_PATH", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "SSL_CERT_FILE",
    }
)  # fmt: skip
PASSED_PREFIXES = ("LC_",)
# Variables whose values are secrets: cut out of every output workq keeps or answers.
_SECRET = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|PRIVATE_KEY|CREDENTIAL", re.I)
_SECRET_MIN = 6


@dataclass(frozen=True)
class Outcome:
    argv: tuple[str, ...]
    exit_code: int | None
    """None when the command did not start or was killed on timeout."""
    timed_out: bool
    missing: str | None
    """Why the program could not be started (not found, not executable), if so."""
    output: str
    """The first and last part of stdout and stderr together; a cut is marked inline."""
    total_bytes: int
    cut_bytes: int
    seconds: float

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


def environment(
    extra: Mapping[str, str] | None = None, passed: Collection[str] = ()
) -> dict[str, str]:
    """The environment of a checking command: the allow-listed variables of the server's
    (``PASSED``, ``LC_*``, and the names in ``passed``), no colour, then ``extra``; never
    a variable ``refused_env`` names, whichever of them lists it."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k in PASSED or k.startswith(PASSED_PREFIXES) or k in passed
    }
    env.update(NO_COLOR="1", TERM="dumb", PYTHONDONTWRITEBYTECODE="1")
    env.pop("FORCE_COLOR", None)
    if extra:
        env.update(extra)
    return {k: v for k, v in env.items() if refused_env(k) is None}


def redact(text: str) -> str:
    """``text`` with the value of every secret-named variable of this process replaced by
    ``[NAME redacted]``: a failing command that prints a token must not store it."""
    secrets = [
        (value, name)
        for name, value in os.environ.items()
        if len(value) >= _SECRET_MIN and _SECRET.search(name)
    ]
    for value, name in sorted(secrets, key=lambda s: -len(s[0])):  # a longer one first
        text = text.replace(value, f"[{name} redacted]")
    return text


def resolve(program: str, cwd: Path, env: Mapping[str, str]) -> str | None:
    """The executable ``program`` names: a path (relative to ``cwd``) or a name on PATH."""
    if "/" in program:
        path = Path(program) if Path(program).is_absolute() else cwd / program
        return str(path) if path.is_file() and os.access(path, os.X_OK) else None
    return shutil.which(program, path=env.get("PATH", os.defpath))


class _Collector:
    """Keeps the head and the tail of a byte stream."""

    def __init__(self, head: int, tail: int) -> None:
        self.head_limit, self.tail_limit = head, tail
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk and self.tail_limit:
            self.tail += chunk
            if len(self.tail) > self.tail_limit:
                del self.tail[: len(self.tail) - self.tail_limit]

    def text(self) -> tuple[str, int]:
        cut = self.total - len(self.head) - len(self.tail)
        head = self.head.decode("utf-8", "replace")
        tail = self.tail.decode("utf-8", "replace")
        if cut > 0:
            return f"{head}\n[... {cut} bytes of output cut ...]\n{tail}", cut
        return head + tail, 0


@functools.cache
def _dies_with_us() -> tuple[str, ...]:
    """A prefix that makes the command die with the thread that started it (the parent-death
    signal, util-linux ``setpriv``): a server killed with -9 leaves no gate running on past
    its timeout. Empty where there is no such tool; a clean exit or a timeout still kills
    the whole group."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return ()
    try:
        probe = subprocess.run(
            [setpriv, "--pdeathsig", "KILL", "--", "true"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return ()
    return (setpriv, "--pdeathsig", "KILL", "--") if probe.returncode == 0 else ()


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def run(
    args: Sequence[str],
    *,
    cwd: Path,
    timeout: float,
    env: Mapping[str, str] | None = None,
    head: int = HEAD_BYTES,
    tail: int = TAIL_BYTES,
) -> Outcome:
    """Run ``args`` in ``cwd`` for at most ``timeout`` seconds; never raises for the
    command's own failure (a missing program is ``Outcome.missing``). ``env`` (default:
    ``environment()``) loses every variable ``refused_env`` names."""
    given = env if env is not None else environment()
    before_waiting("a command")
    environ = {k: v for k, v in given.items() if refused_env(k) is None}
    started = time.monotonic()
    program = resolve(args[0], cwd, environ)
    if program is None:
        return Outcome(tuple(args), None, False, f"program {args[0]!r} not found", "", 0, 0, 0.0)
    try:
        proc = subprocess.Popen(
            [*_dies_with_us(), program, *args[1:]],
            cwd=cwd,
            env=environ,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        reason = f"cannot start {args[0]!r}: {exc.strerror or exc}"
        return Outcome(tuple(args), None, False, reason, "", 0, 0, 0.0)
    collector = _Collector(head, tail)
    assert proc.stdout is not None
    fd = proc.stdout.fileno()

    def read() -> None:
        while chunk := os.read(fd, CHUNK_BYTES):
            collector.add(chunk)

    reader = threading.Thread(target=read, name="workq-gate-output", daemon=True)
    reader.start()
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        _kill_group(proc.pid)  # on timeout the command; else what it left running
        proc.wait()
    reader.join(DRAIN_SECONDS)
    if not reader.is_alive():  # else a process that left the group holds the pipe
        proc.stdout.close()
    output, cut = collector.text()
    output = redact(output)
    return Outcome(
        tuple(args),
        None if timed_out else proc.returncode,
        timed_out,
        None,
        output,
        collector.total,
        cut,
        time.monotonic() - started,
    )
