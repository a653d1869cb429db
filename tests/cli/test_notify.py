"""`workq notify`: its commands, their output and --json, one-line errors, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.services.notices.receiver import SECRET, SECRET_VAR, receiver
from tests.workq_cli import data, ok, workq


@pytest.fixture(autouse=True)
def _secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_VAR, SECRET)


def test_add_list_test_deliver_and_remove() -> None:
    with receiver() as r:
        said = ok(
            "notify", "add", "team", "--url", r.url, "--events", "blocked,stalled",
            "--secret-env", SECRET_VAR,
        )  # fmt: skip
        assert "Added webhook sink team (http://127.0.0.1:" in said
        assert "secret-path" not in said and SECRET not in said
        assert "Next: workq notify test team" in said
        listed = data("notify", "list")
        assert [s["name"] for s in listed] == ["team"]
        assert listed[0]["target"].endswith("/…") and listed[0]["events"] == ["stalled", "blocked"]
        assert "secret-path" not in ok("notify", "list")
        assert "Sent a test notice to team (status 204)" in ok("notify", "test", "team")
        ok("create", "Fix the login page")
        ok("block", "1", "needs a person")
        shown = data("notify", "deliveries")
        assert shown["counts"] == {"pending": 1, "delivered": 0, "failed": 0}
        [pending] = shown["notices"]
        assert pending["sink"] == "team" and pending["event"] == "blocked"
        assert pending["number"] == 1 and pending["state"] == "pending"
        once = data("notify", "run", "--once")
        assert once["delivered"] == 1
        assert "1 delivered" not in ok("notify", "run", "--once")  # nothing due again
    assert [got.event for got in r.received] == ["test", "blocked"]
    assert all(got.signed_ok for got in r.received)
    table = ok("notify", "deliveries")
    assert "Notices: 0 pending, 1 delivered, 0 failed" in table
    assert ok("notify", "remove", "team") == "Removed sink team (1 notices dropped)\n"
    assert data("notify", "list") == []
    assert "No sinks" in ok("notify", "list")


def test_a_command_sink_from_the_command_line() -> None:
    added = data("notify", "add", "desk", "--command", "cat", "--events", "all")
    assert added["kind"] == "command" and added["target"] == "cat"
    assert "Sent a test notice to desk (status 0)" in ok("notify", "test", "desk")
    assert "all" in ok("notify", "list")


def test_a_failed_test_exits_1_with_one_line() -> None:
    with receiver(status=500) as r:
        ok("notify", "add", "down", "--url", r.url, "--events", "all")
        done = workq("notify", "test", "down")
    assert done.returncode == 1
    assert done.stderr.strip().count("\n") == 0
    assert done.stderr.startswith("error: the test notice to down failed: HTTP 500")
    as_json = workq("notify", "test", "down", "--json")
    assert as_json.returncode == 1 and json.loads(as_json.stdout)["ok"] is False


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("add", "x", "--events", "all"), "INVALID_INPUT: a sink is a webhook or a command"),
        (("add", "x", "--command", "cat", "--events", "oops"), "unknown event 'oops'"),
        (("add", "x", "--url", "http://127.0.0.1:1/x", "--events", "all"), "cannot reach 127.0"),
        (("add", "x", "--command", "nope-not-here", "--events", "all"), "not found on PATH"),
        (
            ("add", "x", "--url", "http://h/", "--no-check", "--events", "all", "--secret-env",
             "NOT_SET_ANYWHERE"),
            "the variable NOT_SET_ANYWHERE is not set here",
        ),
        (("add", "kept", "--command", "cat", "--events", "all"), "CONFLICT: a sink named 'kept'"),
        (("remove", "nobody"), "NOT_FOUND: no sink named 'nobody'; see the sinks with"),
        (("test", "nobody"), "NOT_FOUND: no sink named 'nobody'"),
        (("deliveries", "--state", "lost"), "--state 'lost' is not a state"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_changes_nothing(args: tuple[str, ...], said: str) -> None:
    ok("notify", "add", "kept", "--command", "cat", "--events", "blocked")
    before = ok("notify", "list", "--json")
    done = workq("notify", *args)
    assert done.returncode == 1, done
    assert done.stderr.startswith("error: ") and said in done.stderr
    assert done.stderr.strip().count("\n") == 0
    assert ok("notify", "list", "--json") == before


def test_json_as_a_global_option_and_help() -> None:
    ok("notify", "add", "a", "--command", "cat", "--events", "drained")
    assert [s["name"] for s in json.loads(ok("--json", "notify", "list"))] == ["a"]
    for command in ("add", "list", "remove", "test", "deliveries", "run"):
        assert "Usage: workq notify " + command in ok("notify", command, "--help")


def test_run_on_a_database_that_does_not_exist_creates_none(tmp_path: Path) -> None:
    done = workq("--db", tmp_path / "typo.db", "notify", "run", "--once")
    assert done.returncode == 1 and done.stderr.startswith("error: NO_DATABASE")
    assert not (tmp_path / "typo.db").exists()
