"""`workq import`, `export` and `db copy`: all or nothing, and progress shown on a terminal
only. Progress is tested in real processes (stderr a pseudo-terminal, or a pipe); the rest
runs in this process."""

from __future__ import annotations

import json
import os
import pty
import subprocess
from pathlib import Path

import pytest

from tests.services.maintenance.test_transfer import ISSUES, export_of
from tests.workq_cli import WORKQ, ok, workq, workq_process


def test_a_bad_line_near_the_end_leaves_the_database_as_it_was(tmp_path: Path) -> None:
    ok("init")
    before = ok("export")
    lines = export_of(ISSUES)
    row = json.loads(lines[-2])
    row[{"labels": "name", "comments": "body"}[row["type"]]] = "bad\x00text"
    lines[-2] = json.dumps(row)
    (tmp_path / "bad.jsonl").write_text("\n".join(lines) + "\n")
    refused = workq("import", "bad.jsonl")
    assert refused.returncode == 1
    assert f"line {len(lines) - 1}:" in refused.stderr
    assert ok("export") == before


def test_a_large_import_from_stdin_round_trips(tmp_path: Path) -> None:
    text = "\n".join(export_of(ISSUES)) + "\n"
    done = workq("import", "-", stdin=text)
    assert done.returncode == 0, done.stderr
    assert f"issues: {ISSUES}" in done.stdout
    assert done.stderr == ""  # no progress where stderr is not a terminal
    assert ok("export") == text
    ok("export", "again.jsonl")
    assert (tmp_path / "again.jsonl").read_text() == text


def test_bytes_that_are_not_utf8_are_refused_with_their_line(tmp_path: Path) -> None:
    lines = [line.encode() for line in export_of(2)]
    lines[-1] = lines[-1].replace(b"bulk", b"bu\xfflk")
    (tmp_path / "bad.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    refused = workq("import", "bad.jsonl")
    assert refused.returncode == 1
    assert f"line {len(lines)} is not UTF-8" in refused.stderr


def _on_a_terminal(cwd: Path, *args: str) -> tuple[int, str]:
    """Run workq with stderr on a pseudo-terminal; its exit status and what the terminal got."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FORCE_", "TTY_"))}
    env.update(TERM="xterm-256color", COLUMNS="100", WORKQ_ACTOR="tester")
    env.pop("NO_COLOR", None)
    controller, terminal = pty.openpty()
    child = subprocess.Popen(
        [WORKQ, *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=terminal,
        env=env,
    )
    os.close(terminal)
    shown = b""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    os.close(controller)
    return child.wait(timeout=120), shown.decode(errors="replace")


@pytest.mark.slow
def test_progress_is_shown_on_a_terminal_and_not_into_a_pipe(tmp_path: Path) -> None:
    (tmp_path / "queue.jsonl").write_text("\n".join(export_of(50)) + "\n")
    status, shown = _on_a_terminal(tmp_path, "import", "queue.jsonl")
    assert status == 0, shown
    assert "Importing" in shown
    status, shown = _on_a_terminal(tmp_path, "export", "again.jsonl")
    assert status == 0, shown
    assert "Exporting rows" in shown
    status, shown = _on_a_terminal(tmp_path, "db", "copy", "--from", "autopilot.db", "--to", "b.db")
    assert status == 0, shown
    assert "Copying rows" in shown

    piped = workq_process("export", "third.jsonl")
    assert piped.returncode == 0 and piped.stderr.startswith("Wrote ")
    assert "Exporting" not in piped.stderr and "\x1b" not in piped.stderr
    copied = workq_process("db", "copy", "--from", "autopilot.db", "--to", "c.db")
    assert copied.returncode == 0 and copied.stderr == ""
