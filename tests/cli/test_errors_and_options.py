"""What a person at the CLI meets first: one-line errors worded for the CLI, global options
on either side of the command, and output that reads right. The CLI runs in this process
(tests/workq_cli.py), as a real process where the process is the subject: ``workq serve``,
an interpreter that cannot import psycopg, a traceback, a reader that closes the pipe."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer

from tests.workq_cli import data, ok, workq, workq_process
from workq.cli.main import app, load_commands
from workq.cli.steps import COMMANDS
from workq.errors import Step


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


# --- item 6: settings and the missing driver ----------------------------------------------

BAD_SETTINGS = [
    ("WORKQ_LEASE_SECONDS", "1", "from 5 to 604800"),
    ("WORKQ_LEASE_SECONDS", "abc", "from 5 to 604800"),
    ("WORKQ_SYNCHRONOUS", "bogus", "NORMAL or FULL"),
    ("WORKQ_BUSY_TIMEOUT_MS", "-5", "from 100 to 600000"),
    ("WORKQ_POOL_TIMEOUT", "0", "above 0, up to 300"),
    ("WORKQ_AUTO_MIGRATE", "maybe", "true or false"),
]


@pytest.mark.parametrize("command", [["list"], ["serve"]])
@pytest.mark.parametrize(("variable", "value", "accepted"), BAD_SETTINGS)
def test_a_bad_setting_is_one_line_naming_the_variable_and_its_range(
    tmp_path: Path, command: list[str], variable: str, value: str, accepted: str
) -> None:
    run = workq_process if command == ["serve"] else workq  # never `workq serve` in-process
    line = one_line_error(run(*command, env={variable: value}, stdin=""))
    assert line.startswith(f"error: INVALID_INPUT: {variable}='{value}' is not valid")
    assert accepted in line
    assert not (tmp_path / "autopilot.db").exists()


def test_the_two_names_of_the_sqlite_file_both_work_and_an_empty_one_is_refused(
    tmp_path: Path,
) -> None:
    ok("create", "a", env={"WORKQ_DB": "w.db"})
    ok("create", "b", env={"ISSUES_DB": "i.db"})
    assert (tmp_path / "w.db").exists() and (tmp_path / "i.db").exists()
    assert "ISSUES_DB=''" in one_line_error(workq("list", env={"ISSUES_DB": ""}))


def test_postgresql_without_its_driver_has_its_own_code_and_the_exact_install_line(
    tmp_path: Path,
) -> None:
    shim = tmp_path / "shim"
    shim.mkdir()
    # A process where psycopg cannot be imported, as after `pip install workq-mcp`: a real one,
    # since this process may have imported psycopg already.
    (shim / "psycopg.py").write_text("raise ImportError('psycopg is not installed')\n")
    env = {"PYTHONPATH": os.pathsep.join([str(shim), os.environ.get("PYTHONPATH", "")])}
    url = "postgresql+psycopg://workq:secret@127.0.0.1:9/workq"
    for command in (["list"], ["serve"]):
        done = workq_process("--database-url", url, *command, env=env, stdin="")
        line = one_line_error(done)
        assert line.startswith("error: DRIVER_MISSING: PostgreSQL needs the psycopg driver")
        # The distribution of its own (`workq` on PyPI is another project), into the
        # environment this workq runs in.
        assert f"{sys.executable} -m pip install 'workq-mcp[postgres]'" in line, line


# --- item 7: an empty database URL ------------------------------------------------------------


def test_an_empty_database_url_is_refused_not_taken_for_sqlite(tmp_path: Path) -> None:
    flag = one_line_error(workq("--database-url", "", "list"))
    assert "--database-url=''" in flag
    env = one_line_error(workq("list", env={"WORKQ_DATABASE_URL": ""}))
    assert "WORKQ_DATABASE_URL=''" in env
    assert not (tmp_path / "autopilot.db").exists()


# --- item 8: global options on either side ----------------------------------------------------


def test_every_global_option_works_after_the_command(tmp_path: Path) -> None:
    db = str(tmp_path / "after.db")
    url = f"sqlite:///{tmp_path / 'url.db'}"
    ok("create", "first", "--db", db)
    ok("create", "-d", "--db", "title", "--db", db)  # -d's value stays the description
    assert [i["number"] for i in data("list", "--db", db)["items"]] == [1, 2]
    assert data("show", "2", "--db", db)["description"] == "--db"
    assert data("ready", f"--db={db}")[0]["number"] == 1
    claim = data("claim-next", "--db", db, "--as", "bob")
    assert claim["claimed_by"] == "bob"
    assert data("history", "1", "--db", db, "--as", "x")[-1]["actor"] == "bob"
    assert data("db", "current", "--db", db)["state"] == "current"
    assert data("plan", "list", "--db", db) == []
    ok("create", "via url", "--database-url", url)
    assert data("stats", "--database-url", url)["total"] == 1
    # --json before the command means the command's --json
    assert [i["number"] for i in json.loads(ok("--json", "ready", "--db", db))] == [2]
    assert json.loads(ok("--db", db, "--json", "show", "2"))["number"] == 2
    refused = workq("--json", "delete", "1", "--db", db)
    assert refused.returncode == 2 and "prints no JSON" in refused.stderr
    # -v after the command: the traceback, as before it
    # a real process: -v lets the error through, and the interpreter prints its traceback
    loud = workq_process("show", "99", "--db", db, "-v")
    assert loud.returncode != 0 and "Traceback" in loud.stderr
    assert not (tmp_path / "autopilot.db").exists()


def test_a_global_option_without_its_value_is_a_usage_error(tmp_path: Path) -> None:
    done = workq("show", "1", "--db")
    assert done.returncode == 2 and "'--db'" in done.stderr and "requires a value" in done.stderr
    assert not list(tmp_path.iterdir())


# --- item 9: hints name what the caller can type here ----------------------------------------


def test_cli_errors_name_cli_commands_not_tools(tmp_path: Path) -> None:
    ok("init")
    missing = one_line_error(workq("show", "9999"))
    assert "'workq list'" in missing and "issue_list" not in missing
    no_plan = one_line_error(workq("plan", "exit", "--run-id", "r"))
    assert "'workq plan enter SLUG GOAL'" in no_plan and "enter_plan_mode" not in no_plan
    ok("create", "held")
    ok("claim", "1", "--run-id", "agent-1")
    refused = one_line_error(workq("complete", "1", "--as", "carol"))
    assert "held by agent-1, not by you (carol)" in refused
    assert "'workq complete 1 --force'" in refused
    taken = one_line_error(workq("claim", "1", "--run-id", "agent-2"))
    assert "'workq ready'" in taken and "issue_ready" not in taken


def test_every_step_a_hint_can_name_has_a_cli_command_that_exists() -> None:
    assert set(COMMANDS) == set(Step)
    load_commands()
    root: Any = typer.main.get_command(app)
    for step, spelled in COMMANDS.items():
        if not spelled.startswith("workq "):
            continue
        command = root
        for word in spelled.split()[1:]:
            if not hasattr(command, "commands") or word not in command.commands:
                break
            command = command.commands[word]
        assert command is not root and not hasattr(command, "commands"), step


# --- item 10: errors that blamed the wrong thing -------------------------------------------


def test_a_read_against_an_unreachable_server_does_not_speak_of_writes(tmp_path: Path) -> None:
    pytest.importorskip("psycopg")
    url = "postgresql+psycopg://workq:secret@127.0.0.1:9/workq"  # the discard port: closed
    line = one_line_error(workq("--database-url", url, "list", env={"WORKQ_CONNECT_TIMEOUT": "2"}))
    assert "CONNECTION_LOST" in line
    assert "may or may not" not in line and "write" not in line


def test_backup_into_a_missing_folder_names_the_folder(tmp_path: Path) -> None:
    ok("create", "x")
    line = one_line_error(workq("backup", str(tmp_path / "nope" / "x.db")))
    assert f"the backup's folder {tmp_path / 'nope'} does not exist" in line


def test_a_failed_import_leaves_no_new_database_behind(tmp_path: Path) -> None:
    (tmp_path / "bad.txt").write_text("not an export\n")
    one_line_error(workq("--db", "fresh.db", "import", "bad.txt"))
    one_line_error(workq("--db", "fresh.db", "import", "missing.txt"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.txt"]
    # an existing database stays, whatever the import did
    ok("--db", "kept.db", "create", "mine")
    one_line_error(workq("--db", "kept.db", "import", "bad.txt"))
    assert data("--db", "kept.db", "show", "1")["title"] == "mine"


# --- item 11: output ----------------------------------------------------------------------------


def test_import_counts_read_as_words(tmp_path: Path) -> None:
    ok("create", "a")
    ok("export", "out.jsonl")
    said = ok("--db", "new.db", "import", "out.jsonl")
    assert said.strip() == "Imported counters: 1, events: 1, issues: 1"


def test_help_shows_arguments_in_capitals_and_flags_without_a_type(tmp_path: Path) -> None:
    shown = ok("complete", "--help", env={"COLUMNS": "120", "NO_COLOR": "1"})
    assert "workq complete [OPTIONS] NUMBER" in shown
    assert "{number}" not in shown and "<bool>" not in shown
    assert "<bool>" not in ok("--help", env={"COLUMNS": "120"})


def test_export_dash_writes_stdout_not_a_file(tmp_path: Path) -> None:
    ok("create", "a")
    lines = ok("export", "-").splitlines()
    assert json.loads(lines[0])["type"] and len(lines) == 4
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize("command", [["export"], ["show", "1"], ["show", "1", "--json"]])
def test_a_reader_that_leaves_early_is_not_an_error(tmp_path: Path, command: list[str]) -> None:
    ok("create", "long", "-d", "\n".join(["x" * 100] * 600))  # > a pipe's buffer
    reader = subprocess.Popen(
        [sys.executable, "-m", "workq.cli.main", *command],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert reader.stdout is not None and reader.stderr is not None
    reader.stdout.readline()
    reader.stdout.close()  # as `| head -1` does
    with reader.stderr:
        err = reader.stderr.read()
    assert reader.wait(timeout=60) == 0, err
    assert err == b""


def test_update_without_fields_is_refused_and_lists_say_what_an_issue_waits_on(
    tmp_path: Path,
) -> None:
    ok("create", "first")
    ok("create", "second")
    refused = one_line_error(workq("update", "1"))
    assert "nothing to change" in refused
    assert [e["kind"] for e in data("history", "1")] == ["created"]
    ok("depend", "2", "--on", "1")
    item = data("list")["items"][1]
    assert item["waiting_on"] == [1] and item["blocked_reason"] is None
    assert "#1" in ok("list", env={"COLUMNS": "200"}).splitlines()[-1]


# --- item 12: plan exit through the CLI -----------------------------------------------------


def test_plan_exit_refuses_only_a_template_and_warns_of_empty_sections(tmp_path: Path) -> None:
    ok("plan", "enter", "p", "A goal", "--run-id", "r")
    plan = tmp_path / "plans" / "p.md"
    refused = one_line_error(workq("plan", "exit", "--run-id", "r"))
    assert "PLAN_EMPTY" in refused and "nothing beyond its template" in refused
    assert "'workq plan exit'" in refused and "exit_plan_mode" not in refused
    plan.write_text(plan.read_text() + "\n## Notes\nThe parser lives in src/parse.py.\n")
    said = ok("plan", "exit", "--run-id", "r")
    assert "Exited plan mode" in said
    assert "Warning: left empty: Findings, Approach, Risks, Tasks" in said


def test_a_usage_error_is_one_line_naming_the_help_to_read(tmp_path: Path) -> None:
    for args, says in (
        (["create", "x", "-p", "asap"], "'asap' is not a priority"),
        (["create"], "Missing argument 'TITLE'"),
        (["list", "--nope"], "No such option: --nope"),
    ):
        done = workq(*args, "--db", str(tmp_path / "q.db"))
        assert done.returncode == 2, args
        (line,) = done.stderr.splitlines()
        assert line.startswith("error: USAGE: ") and says in line, line
        assert line.endswith(f"; see 'workq {args[0]} --help'"), line


def test_critical_is_urgent(tmp_path: Path) -> None:
    db = str(tmp_path / "q.db")
    ok("create", "fire", "-p", "critical", "--db", db)
    ok("create", "smoke", "--priority", "HIGH", "--db", db)
    assert [i["priority"] for i in data("list", "--db", db)["items"]] == ["urgent", "high"]
    assert [i["number"] for i in data("list", "--priority", "critical", "--db", db)["items"]] == [1]


def test_cli_hints_name_workq_commands_not_tool_calls(tmp_path: Path) -> None:
    db = str(tmp_path / "q.db")
    empty = workq("create", "  ", "--db", db)
    assert empty.returncode == 1
    assert empty.stderr.rstrip().endswith("; see 'workq create --help'"), empty.stderr
    assert "call again" not in empty.stderr
    cursor = workq("list", "--cursor", "zzz", "--db", db)
    assert cursor.returncode == 1 and "server" not in cursor.stderr
    entered = workq("plan", "enter", "p1", "a goal", "--run-id", "planner", "--db", db)
    assert entered.returncode == 0, entered.stderr
    assert "Next: run 'workq plan advance'" in entered.stdout
    assert "advance_plan_phase" not in entered.stdout
