"""Running the ``workq`` command in tests.

``workq(...)`` runs it in this process: ``workq.cli.main.main`` inside click's CliRunner
isolation (its own stdin, stdout and stderr, environment overrides) and in ``cwd``, so a
command costs milliseconds instead of an interpreter start. ``workq_process(...)`` runs the
installed entry point as a real process, for the tests whose subject is the process itself:
exit codes seen by a shell, stdout and stderr as separate pipes, signals, stdio.

Both answer a ``subprocess.CompletedProcess[str]``, so a test can move between them.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import chdir, contextmanager
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from workq.cli.main import main

WORKQ = str(Path(sys.executable).with_name("workq"))
ACTOR = "tester"
TIMEOUT = 120.0

Env = Mapping[str, str | None]


def _argv(args: Sequence[str | bytes | Path]) -> list[str]:
    # Bytes become what the interpreter makes of such a word in sys.argv (surrogateescape).
    return [os.fsdecode(a) if isinstance(a, bytes) else str(a) for a in args]


def _environment(env: Env | None, scrub: Sequence[str]) -> dict[str, str | None]:
    """Overrides for os.environ: WORKQ_ACTOR, the variables named by a ``scrub`` prefix
    removed, then ``env`` (a None value removes that variable)."""
    changes: dict[str, str | None] = dict.fromkeys(
        (k for k in os.environ if scrub and k.startswith(tuple(scrub))), None
    )
    changes["WORKQ_ACTOR"] = ACTOR
    changes.update(env or {})
    return changes


@contextmanager
def _loggers_kept() -> Iterator[None]:
    """Commands that log (`workq sync run`) add a handler bound to the stderr of their run;
    put every logger back as it was so that none writes into a closed stream later."""
    managed = logging.Logger.manager.loggerDict
    before = {
        name: (log.handlers[:], log.level, log.propagate)
        for name, log in [("", logging.getLogger()), *managed.items()]
        if isinstance(log, logging.Logger)
    }
    try:
        yield
    finally:
        for name, log in [("", logging.getLogger()), *list(managed.items())]:
            if not isinstance(log, logging.Logger):
                continue
            handlers, level, propagate = before.get(name, ([], logging.NOTSET, True))
            if log.handlers != handlers:
                log.handlers[:] = handlers
            if log.level != level:  # setLevel clears every logger's cache: ~5 ms a call
                log.setLevel(level)
            log.propagate = propagate


def workq(
    *args: str | bytes | Path,
    cwd: Path | None = None,
    env: Env | None = None,
    stdin: str | bytes | None = None,
    scrub: Sequence[str] = (),
) -> subprocess.CompletedProcess[str]:
    """``workq ARGS`` run in this process in ``cwd`` (default: the current directory), as the
    actor ``tester`` unless ``env`` says otherwise; stdout and stderr kept apart."""
    argv = _argv(args)
    runner = CliRunner()
    with (
        chdir(cwd or Path.cwd()),
        _loggers_kept(),
        runner.isolation(input=stdin, env=_environment(env, scrub)) as (out, err, _),
    ):
        code = main(argv)
        sys.stdout.flush()
        sys.stderr.flush()
        stdout, stderr = out.getvalue(), err.getvalue()
    return subprocess.CompletedProcess(
        ["workq", *argv],
        code,
        stdout.decode("utf-8", "replace"),
        stderr.decode("utf-8", "backslashreplace"),
    )


def workq_process(
    *args: str | bytes | Path,
    cwd: Path | None = None,
    env: Env | None = None,
    stdin: str | None = None,
    scrub: Sequence[str] = (),
    timeout: float = TIMEOUT,
) -> subprocess.CompletedProcess[str]:
    """``workq ARGS`` as a real process of the installed entry point."""
    environment = {**os.environ}
    for key, value in _environment(env, scrub).items():
        if value is None:
            environment.pop(key, None)
        else:
            environment[key] = value
    return subprocess.run(
        [WORKQ, *(a if isinstance(a, bytes) else str(a) for a in args)],
        cwd=cwd,
        env=environment,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def ok(*args: str | bytes | Path, **options: Any) -> str:
    """``workq(...)``'s stdout, after asserting that it succeeded."""
    done = workq(*args, **options)
    assert done.returncode == 0, (done.args, done.stdout, done.stderr)
    return done.stdout


def data(*args: str | bytes | Path, **options: Any) -> Any:
    """``workq ARGS --json``'s output, parsed."""
    return json.loads(ok(*args, "--json", **options))
