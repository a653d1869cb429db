"""The admin CLI against a real SQLite file, run in this process (tests/workq_cli.py); a few
tests run the installed ``workq`` as a real process: that it starts, that its exit status
reaches the shell, and that stdout and stderr are apart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.workq_cli import data, ok, workq, workq_process
from workq.db import sqlite


def test_default_database_is_autopilot_db_in_the_working_directory(tmp_path: Path) -> None:
    # The installed entry point, as a real process: it starts and exits 0.
    done = workq_process("create", "First", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Created issue #1: First (agent: claude)" in done.stdout
    assert (tmp_path / "autopilot.db").exists()


def test_issues_db_env_and_db_flag_select_the_file(tmp_path: Path) -> None:
    ok("create", "via env", env={"ISSUES_DB": str(tmp_path / "env.db")})
    ok("--db", str(tmp_path / "flag.db"), "create", "via flag")
    assert (tmp_path / "env.db").exists() and (tmp_path / "flag.db").exists()
    assert not (tmp_path / "autopilot.db").exists()


def test_the_autopilot_loop_through_the_cli() -> None:
    ok("create", "Fix login", "-p", "urgent", "-t", "bug", "-l", "auth")
    ok("create", "Docs", "--criterion", "quick start works")
    ok("depend", "2", "--on", "1")
    assert [i["number"] for i in data("ready")] == [1]
    claim = data("claim-next", "--run-id", "agent-1")
    assert claim["number"] == 1 and claim["claimed_by"] == "agent-1"
    refused = workq("claim", "1", "--run-id", "agent-2")
    assert refused.returncode == 1
    assert refused.stderr.startswith("error: ALREADY_CLAIMED: Issue #1 is held by agent-1")
    assert "Traceback" not in refused.stderr
    done = data("complete", "1", "--run-id", "agent-1")
    assert done["unblocked"] == [2]
    issue = data("show", "2")
    assert issue["blocked_by"] == [1]
    assert "## Acceptance Criteria\n- [ ] quick start works" in issue["description"]
    page = data("list", "--limit", "1")
    assert page["has_more"] and page["next_cursor"]
    second = data("list", "--limit", "1", "--cursor", page["next_cursor"])
    assert [i["number"] for i in second["items"]] == [2]
    assert [e["kind"] for e in data("history", "1")] == [
        "created",
        "claimed",
        "completed",
    ]
    assert [e["kind"] for e in data("history", "2")] == ["created", "dependency_added"]
    stats = data("stats")
    assert stats["by_status"]["done"] == 1 and stats["ready"] == 1
    assert data("backlog")["total"] == 1


def test_claim_next_on_an_empty_queue_exits_2(tmp_path: Path) -> None:
    # A real process: exit status 2 reaches the shell, the message is on stdout alone.
    done = workq_process("claim-next", cwd=tmp_path)
    assert done.returncode == 2 and "No ready issues available" in done.stdout
    assert "No ready issues available" not in done.stderr


def test_errors_are_one_line_with_a_code_and_no_traceback() -> None:
    ok("init")
    for args, code in (
        (("show", "42"), "NOT_FOUND"),
        (("create", ""), "INVALID_INPUT"),
        (("create", "x" * 300), "INVALID_INPUT"),
        (("force-claim", "1", "--confirm", "sure"), "INVALID_CONFIRMATION"),
    ):
        done = workq(*args)
        assert done.returncode == 1, args
        assert done.stderr.startswith(f"error: {code}: "), done.stderr
        assert "Traceback" not in done.stderr
    # A real process: -v lets the error through, and the interpreter prints its traceback.
    verbose = workq_process("--verbose", "show", "42")
    assert "Traceback" in verbose.stderr


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    # A real process: a usage error exits 2 with its message on stderr, nothing on stdout.
    done = workq_process("create", "x", "--priority", "asap", cwd=tmp_path)
    assert done.returncode == 2 and "asap" in done.stderr
    assert "asap" not in done.stdout


def test_export_import_round_trip_is_lossless(tmp_path: Path) -> None:
    ok("create", "one", "-l", "a")
    ok("create", "two")
    ok("depend", "2", "--on", "1")
    ok("comment", "1", "progress note", "--kind", "progress")
    ok("claim", "1", "--run-id", "r")
    ok("workflow", "advance", "1", "research", "--run-id", "r")
    ok("plan", "enter", "roadmap", "Plan the next release", "--run-id", "p")
    ok("delete", "2", "--yes")
    exported = ok("export")
    kinds = {json.loads(line)["type"] for line in exported.splitlines()}
    assert {"issues", "labels", "comments", "events", "counters", "plans", "workflows"} <= kinds
    (tmp_path / "queue.jsonl").write_text(exported)
    ok("--db", "copy.db", "import", "queue.jsonl")
    assert ok("--db", "copy.db", "export") == exported
    again = workq("--db", "copy.db", "import", "queue.jsonl")
    assert again.returncode == 1 and "not empty" in again.stderr
    assert ok("--db", "copy.db", "create", "three").startswith("Created issue #3")


def test_backup_is_a_usable_copy(tmp_path: Path) -> None:
    ok("create", "one")
    ok("backup", "backup.db")
    with sqlite.connect(tmp_path / "backup.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert ok("--db", "backup.db", "export") == ok("export")
    refused = workq("backup", "backup.db")
    assert refused.returncode == 1 and "exists already" in refused.stderr


def test_doctor_reports_and_repairs(tmp_path: Path) -> None:
    ok("create", "one")
    ok("create", "two")
    ok("depend", "2", "--on", "1")
    ok("claim", "1", "--run-id", "r")
    with sqlite.connect(tmp_path / "autopilot.db") as conn:
        conn.execute("UPDATE issues SET open_blockers = 0")
        conn.execute("UPDATE issues SET lease_expires_at = '2000-01-01 00:00:00' WHERE number = 1")
    found = workq("doctor", "--json")
    assert found.returncode == 1
    checks = sorted(f["check"] for f in json.loads(found.stdout)["findings"])
    assert checks == ["blocked_count", "stale_claim"]
    repaired = data("doctor", "--repair")
    assert repaired["repaired"] == 2
    assert "All checks passed" in ok("doctor")


def test_db_commands(tmp_path: Path) -> None:
    ok("init")
    current = data("db", "current")
    assert current["state"] == "current" and current["revision"] == current["head"]
    assert "head" in ok("db", "check")
    ok("db", "downgrade", "base")
    behind = workq("db", "check")
    assert behind.returncode == 1 and "workq db upgrade" in behind.stderr
    ok("db", "upgrade")
    assert "head" in ok("db", "check")
    # --db also after the db command, as people type it
    ok("db", "upgrade", "--db", "other.db")
    assert data("db", "current", "--db", "other.db")["state"] == "current"
    assert (tmp_path / "other.db").exists()


@pytest.mark.parametrize("command", ["create", "list", "ready", "claim-next", "doctor", "db"])
def test_help_is_there(command: str) -> None:
    assert "Usage" in ok(command, "--help")


def test_at_80_columns_titles_stay_readable_and_lines_fit(tmp_path: Path) -> None:
    db = str(tmp_path / "q.db")
    title = "A fairly long title for an issue that needs room to be read"
    ok("create", title, "--db", db)
    ok("claim", "1", "--run-id", "agent-with-a-long-name", "--db", db)
    for command in (["list"], ["backlog"], ["history", "1"]):
        done = workq_process(*command, "--db", db, env={"COLUMNS": "80"})
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert max(len(line) for line in lines) <= 80, done.stdout
        if command != ["history", "1"]:
            assert "A fairly long" in done.stdout  # the title keeps 16 characters a line


def test_agents_lists_run_ids_that_hold_claims_without_registering(tmp_path: Path) -> None:
    db = str(tmp_path / "q.db")
    ok("create", "one", "--db", db)
    ok("create", "two", "--db", db)
    ok("claim", "2", "--run-id", "autopilot-7", "--db", db)
    roster = data("agents", "--db", db)
    assert [(a["agent_id"], a["type"], a["claims"]) for a in roster] == [
        ("autopilot-7", "run id", [2])
    ]
    shown = workq("agents", "--db", db)
    assert "autopilot-7" in shown.stdout and "No agents" not in shown.stdout
