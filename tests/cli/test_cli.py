"""The admin CLI, run as a real process against a real SQLite file."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest


def run(
    cwd: Path, *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "workq.cli.main", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        input=stdin,
        env={**os.environ, "WORKQ_ACTOR": "tester", **(env or {})},
    )


def ok(cwd: Path, *args: str, **kw: Any) -> str:
    done = run(cwd, *args, **kw)
    assert done.returncode == 0, done.stderr
    return done.stdout


def data(cwd: Path, *args: str) -> Any:
    return json.loads(ok(cwd, *args, "--json"))


def test_default_database_is_autopilot_db_in_the_working_directory(tmp_path: Path) -> None:
    assert "Created issue #1: First (agent: claude)" in ok(tmp_path, "create", "First")
    assert (tmp_path / "autopilot.db").exists()


def test_issues_db_env_and_db_flag_select_the_file(tmp_path: Path) -> None:
    ok(tmp_path, "create", "via env", env={"ISSUES_DB": str(tmp_path / "env.db")})
    ok(tmp_path, "--db", str(tmp_path / "flag.db"), "create", "via flag")
    assert (tmp_path / "env.db").exists() and (tmp_path / "flag.db").exists()
    assert not (tmp_path / "autopilot.db").exists()


def test_the_autopilot_loop_through_the_cli(tmp_path: Path) -> None:
    ok(tmp_path, "create", "Fix login", "-p", "urgent", "-t", "bug", "-l", "auth")
    ok(tmp_path, "create", "Docs", "--criterion", "quick start works")
    ok(tmp_path, "depend", "2", "--on", "1")
    assert [i["number"] for i in data(tmp_path, "ready")] == [1]
    claim = data(tmp_path, "claim-next", "--run-id", "agent-1")["issue"]
    assert claim["number"] == 1 and claim["claimed_by"] == "agent-1"
    refused = run(tmp_path, "claim", "1", "--run-id", "agent-2")
    assert refused.returncode == 1
    assert refused.stderr.startswith("error: ALREADY_CLAIMED: Issue #1 is held by agent-1")
    assert "Traceback" not in refused.stderr
    done = data(tmp_path, "complete", "1", "--run-id", "agent-1")
    assert done["unblocked"] == [2]
    issue = data(tmp_path, "show", "2")
    assert issue["blocked_by"] == [1]
    assert "## Acceptance Criteria\n- [ ] quick start works" in issue["description"]
    page = data(tmp_path, "list", "--limit", "1")
    assert page["has_more"] and page["next_cursor"]
    second = data(tmp_path, "list", "--limit", "1", "--cursor", page["next_cursor"])
    assert [i["number"] for i in second["items"]] == [2]
    assert [e["kind"] for e in data(tmp_path, "history", "1")] == [
        "created",
        "claimed",
        "completed",
    ]
    assert [e["kind"] for e in data(tmp_path, "history", "2")] == ["created", "dependency_added"]
    stats = data(tmp_path, "stats")
    assert stats["by_status"]["done"] == 1 and stats["ready"] == 1
    assert data(tmp_path, "backlog")["total"] == 1


def test_claim_next_on_an_empty_queue_exits_2(tmp_path: Path) -> None:
    done = run(tmp_path, "claim-next")
    assert done.returncode == 2 and "No ready issues available" in done.stdout


def test_errors_are_one_line_with_a_code_and_no_traceback(tmp_path: Path) -> None:
    for args, code in (
        (("show", "42"), "NOT_FOUND"),
        (("create", ""), "INVALID_INPUT"),
        (("create", "x" * 300), "INVALID_INPUT"),
        (("force-claim", "1", "--confirm", "sure"), "INVALID_CONFIRMATION"),
    ):
        done = run(tmp_path, *args)
        assert done.returncode == 1, args
        assert done.stderr.startswith(f"error: {code}: "), done.stderr
        assert "Traceback" not in done.stderr
    verbose = run(tmp_path, "--verbose", "show", "42")
    assert "Traceback" in verbose.stderr


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    done = run(tmp_path, "create", "x", "--priority", "asap")
    assert done.returncode == 2 and "asap" in done.stderr


def test_export_import_round_trip_is_lossless(tmp_path: Path) -> None:
    ok(tmp_path, "create", "one", "-l", "a")
    ok(tmp_path, "create", "two")
    ok(tmp_path, "depend", "2", "--on", "1")
    ok(tmp_path, "comment", "1", "progress note", "--kind", "progress")
    ok(tmp_path, "claim", "1", "--run-id", "r")
    ok(tmp_path, "workflow", "advance", "1", "research", "--run-id", "r")
    ok(tmp_path, "plan", "enter", "roadmap", "Plan the next release", "--run-id", "p")
    ok(tmp_path, "delete", "2", "--yes")
    exported = ok(tmp_path, "export")
    kinds = {json.loads(line)["type"] for line in exported.splitlines()}
    assert {"issues", "labels", "comments", "events", "counters", "plans", "workflows"} <= kinds
    (tmp_path / "queue.jsonl").write_text(exported)
    ok(tmp_path, "--db", "copy.db", "import", "queue.jsonl")
    assert ok(tmp_path, "--db", "copy.db", "export") == exported
    again = run(tmp_path, "--db", "copy.db", "import", "queue.jsonl")
    assert again.returncode == 1 and "not empty" in again.stderr
    assert ok(tmp_path, "--db", "copy.db", "create", "three").startswith("Created issue #3")


def test_backup_is_a_usable_copy(tmp_path: Path) -> None:
    ok(tmp_path, "create", "one")
    ok(tmp_path, "backup", "backup.db")
    with sqlite3.connect(tmp_path / "backup.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert ok(tmp_path, "--db", "backup.db", "export") == ok(tmp_path, "export")
    refused = run(tmp_path, "backup", "backup.db")
    assert refused.returncode == 1 and "exists already" in refused.stderr


def test_doctor_reports_and_repairs(tmp_path: Path) -> None:
    ok(tmp_path, "create", "one")
    ok(tmp_path, "create", "two")
    ok(tmp_path, "depend", "2", "--on", "1")
    ok(tmp_path, "claim", "1", "--run-id", "r")
    with sqlite3.connect(tmp_path / "autopilot.db") as conn:
        conn.execute("UPDATE issues SET open_blockers = 0")
        conn.execute("UPDATE issues SET lease_expires_at = '2000-01-01 00:00:00' WHERE number = 1")
    found = run(tmp_path, "doctor", "--json")
    assert found.returncode == 1
    checks = sorted(f["check"] for f in json.loads(found.stdout)["findings"])
    assert checks == ["blocked_count", "stale_claim"]
    repaired = data(tmp_path, "doctor", "--repair")
    assert repaired["repaired"] == 2
    assert "All checks passed" in ok(tmp_path, "doctor")


def test_db_commands(tmp_path: Path) -> None:
    ok(tmp_path, "init")
    current = data(tmp_path, "db", "current")
    assert current["state"] == "current" and current["revision"] == current["head"]
    assert "head" in ok(tmp_path, "db", "check")
    ok(tmp_path, "db", "downgrade", "base")
    behind = run(tmp_path, "db", "check")
    assert behind.returncode == 1 and "workq db upgrade" in behind.stderr
    ok(tmp_path, "db", "upgrade")
    assert "head" in ok(tmp_path, "db", "check")
    # --db also after the db command, as people type it
    ok(tmp_path, "db", "upgrade", "--db", "other.db")
    assert data(tmp_path, "db", "current", "--db", "other.db")["state"] == "current"
    assert (tmp_path / "other.db").exists()


@pytest.mark.parametrize("command", ["create", "list", "ready", "claim-next", "doctor", "db"])
def test_help_is_there(tmp_path: Path, command: str) -> None:
    assert "Usage" in ok(tmp_path, command, "--help")
