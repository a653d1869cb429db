"""The runner of gate commands (services/coding/commands.py), with real subprocesses: a timeout
kills the command and its children, output is bounded, a missing program is an answer."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workq.services.coding import commands

HANG = """\
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
open("child.pid", "w").write(str(child.pid))
print("started", flush=True)
time.sleep(600)
"""


def _gone(pid: int) -> bool:
    """Whether ``pid`` has ended (gone, or a zombie waiting for its reaper)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


def test_a_hanging_command_is_killed_with_its_children(tmp_path: Path) -> None:
    (tmp_path / "hang.py").write_text(HANG)
    out = commands.run([sys.executable, "hang.py"], cwd=tmp_path, timeout=2)
    assert out.timed_out and out.exit_code is None and not out.ok
    assert "started" in out.output
    child = int((tmp_path / "child.pid").read_text())
    deadline = time.monotonic() + 30  # a bound on the wait for the kernel, not a measure
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(child)


def test_megabytes_of_output_are_cut_to_a_head_and_a_tail(tmp_path: Path) -> None:
    code = (
        "import sys\nfor i in range(200_000): sys.stdout.write(f'line {i:07d} ' + 'x' * 90 + '\\n')"
    )
    out = commands.run(
        [sys.executable, "-c", code], cwd=tmp_path, timeout=120, head=4096, tail=4096
    )
    assert out.ok
    assert out.total_bytes == 200_000 * 104
    assert out.cut_bytes == out.total_bytes - 8192
    assert len(out.output) < 9000
    assert out.output.startswith("line 0000000 ")
    assert out.output.rstrip().endswith("line 0199999 " + "x" * 90)
    assert f"[... {out.cut_bytes} bytes of output cut ...]" in out.output


def test_a_missing_program_is_reported_not_raised(tmp_path: Path) -> None:
    out = commands.run(["workq-no-such-program", "--x"], cwd=tmp_path, timeout=5)
    assert out.missing == "program 'workq-no-such-program' not found"
    assert not out.ok and out.exit_code is None
    relative = commands.run(["./nothing.sh"], cwd=tmp_path, timeout=5)
    assert relative.missing == "program './nothing.sh' not found"


def test_stdin_is_closed_and_workq_settings_are_not_inherited(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("WORKQ_DB", "/secret.db")
    code = "import os, sys; print(repr(sys.stdin.read()), os.environ.get('WORKQ_DB'))"
    out = commands.run([sys.executable, "-c", code], cwd=tmp_path, timeout=60)
    assert out.ok and out.output.strip() == "'' None"
    assert os.environ["WORKQ_DB"] == "/secret.db"


def test_the_exit_code_and_stderr_are_kept(tmp_path: Path) -> None:
    code = "import sys; sys.stderr.write('boom\\n'); sys.exit(3)"
    out = commands.run([sys.executable, "-c", code], cwd=tmp_path, timeout=60)
    assert out.exit_code == 3 and not out.timed_out and "boom" in out.output


SERVER = """\
import sys
from pathlib import Path
from workq.services.coding import commands
commands.run([sys.executable, "-c", sys.argv[1]], cwd=Path("."), timeout=600)
"""
GATE = "import os, time; open('gate.pid', 'w').write(str(os.getpid())); time.sleep(600)"


def test_a_gate_dies_with_the_server_that_ran_it(tmp_path: Path) -> None:
    """kill -9 of the server: no gate runs on (it would have run out its timeout, burning
    a core), thanks to the parent-death signal the command starts with."""
    if not commands._dies_with_us():
        pytest.skip("no setpriv with --pdeathsig on this machine (util-linux 2.33 or newer)")
    server = subprocess.Popen([sys.executable, "-c", SERVER, GATE], cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60  # a bound on the wait, not a measure
        while not (tmp_path / "gate.pid").exists() or not (tmp_path / "gate.pid").read_text():
            assert time.monotonic() < deadline and server.poll() is None
            time.sleep(0.05)
        gate = int((tmp_path / "gate.pid").read_text())
        assert not _gone(gate)
    finally:
        server.kill()
        server.wait()
    deadline = time.monotonic() + 30
    while not _gone(gate) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(gate)
