"""Small wrongs a new user met (issue 41), each through the command line."""

from __future__ import annotations

from pathlib import Path

from tests.workq_cli import ok


def _field(shown: str, name: str) -> str:
    line = next(line for line in shown.splitlines() if line.startswith(name + " "))
    return line[len(name) :].strip()


def test_show_says_waits_on_only_for_unfinished_blockers(tmp_path: Path) -> None:
    ok("create", "first")
    ok("create", "second")
    ok("depend", "2", "--on", "1")
    assert _field(ok("show", "2"), "waits on") == "#1"
    ok("claim", "1", "--run-id", "r")
    ok("complete", "1", "--run-id", "r")
    after = ok("show", "2")
    assert _field(after, "waits on") == "-"
    assert _field(after, "came after") == "#1 (done)"
