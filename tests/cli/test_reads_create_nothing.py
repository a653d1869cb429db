"""Reading never creates a database: a command that only reads, run where there is no
database (the wrong folder, a mistyped --db), refuses with one line naming the path it
looked for and how to make or name one, and leaves no file. `workq where` (and --verbose on
any command) says which database the commands use."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.workq_cli import ok, workq, workq_process

# Every command that only reads, as a user would type it where no database is.
READS = (
    ("list",),
    ("show", "1"),
    ("history", "1"),
    ("ready",),
    ("backlog",),
    ("stats",),
    ("watch", "--count", "1"),
    ("doctor",),
    ("export",),
    ("backup", "copy.db"),
    ("plan", "list"),
    ("plan", "show"),
    ("sync", "status"),
    ("context",),
    ("workflow", "show"),
    ("repo", "list"),
    ("repo", "status", "r"),
    ("worktree", "list"),
    ("agents",),
    ("conflicts", "r"),
    ("merge", "1", "--status"),
    ("gates", "evidence", "1"),
    ("gates", "list", "1"),
    ("db", "current"),
    ("db", "check"),
)


@pytest.mark.parametrize("args", READS, ids=lambda a: " ".join(a))
def test_a_read_where_there_is_no_database_refuses_and_creates_nothing(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    done = workq(*args)
    assert done.returncode == 1, done.stdout
    line = done.stderr.strip()
    assert "\n" not in line
    assert line.startswith(f"error: NO_DATABASE: no database at {tmp_path / 'autopilot.db'}; ")
    assert "'workq init'" in line and "--db FILE" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_mistyped_db_is_named_and_not_created(tmp_path: Path) -> None:
    ok("create", "in the real one", "--db", "queue.db")
    done = workq("--db", "queeu.db", "list")
    assert f"no database at {tmp_path / 'queeu.db'}" in done.stderr
    assert not (tmp_path / "queeu.db").exists()
    assert "in the real one" in ok("--db", "queue.db", "list")


def test_writing_commands_still_make_the_database_on_first_use(tmp_path: Path) -> None:
    ok("create", "first")
    assert (tmp_path / "autopilot.db").exists()
    assert "first" in ok("list")


def test_where_says_which_database_and_what_named_it_without_creating_it(
    tmp_path: Path,
) -> None:
    said = ok("where")
    assert f"database: sqlite:///{tmp_path / 'autopilot.db'}" in said
    assert "named by: the default: autopilot.db in the working folder" in said
    assert "exists:   no" in said
    assert not (tmp_path / "autopilot.db").exists()
    ok("--db", "q.db", "init")
    flag = json.loads(ok("--db", "q.db", "where", "--json"))
    assert flag["source"] == "--db" and flag["exists"] is True
    assert flag["schema"].endswith("(head)")
    env = json.loads(ok("where", "--json", env={"ISSUES_DB": "q.db"}))
    assert env["source"] == "ISSUES_DB" and env["database"].endswith("/q.db")


def test_verbose_names_the_database_a_command_reads(tmp_path: Path) -> None:
    ok("init")
    done = workq_process("--verbose", "list", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"workq: database sqlite:///{tmp_path / 'autopilot.db'}" in done.stderr
