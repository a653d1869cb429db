"""Small wrongs a new user met (issue 41), each through the command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.workq_cli import ok, workq


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


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("show", "abc"), "Invalid value for 'NUMBER': 'abc' is not a whole number"),
        (("ready", "--wait", "soon"), "'soon' is not a whole number"),
        (("list", "--status", "bogus"), "'bogus' is not one of 'open', 'in_progress', 'done'"),
        (("create", "x", "-t", "bogus"), "'bogus' is not one of 'task', 'bug'"),
    ],
)
def test_a_refused_value_is_said_in_workqs_words_not_pydantics(
    args: tuple[str, ...], said: str
) -> None:
    done = workq(*args)
    assert done.returncode == 2
    line = done.stderr.strip()
    assert line.startswith("error: USAGE: ") and said in line, line
    for leak in ("Value error", "unable to parse", "Input should"):
        assert leak not in line


def test_a_setting_of_fixed_words_names_them() -> None:
    line = workq("list", env={"WORKQ_RESERVATIONS": "bogus"}).stderr
    assert "WORKQ_RESERVATIONS takes enforce or warn" in line
