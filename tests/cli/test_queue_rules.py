"""Queue rules an adversarial review broke, through the ``workq`` CLI: claims that
come to wait on an unfinished issue, self-renewals, blocking another's claim, and what text
may be stored (its characters, its unit, its normal form)."""

from __future__ import annotations

from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests import storage
from tests.workq_cli import data, ok, workq
from workq.config import Settings
from workq.db import sqlite
from workq.domain.authority import Authority
from workq.schemas import DESCRIPTION_MAX, TITLE_MAX
from workq.services.queue import claims
from workq.services.runtime import open_queue


def dump(cwd: Path) -> list[str]:
    return storage.dump(cwd / "autopilot.db")


def events(number: int) -> list[dict[str, object]]:
    found: list[dict[str, object]] = data("history", str(number))
    return found


# --- a claim that comes to wait ------------------------------------------------------------


def test_a_dependency_added_to_a_claimed_issue_stops_its_completion(tmp_path: Path) -> None:
    ok("create", "blocker")
    ok("create", "dependent")
    ok("claim", "2", "--run-id", "r1")
    said = ok("depend", "2", "--on", "1")
    assert "r1 keeps its claim on #2 but cannot complete it" in said

    before = dump(tmp_path)
    refused = workq("complete", "2", "--run-id", "r1")
    assert refused.returncode == 1
    assert refused.stderr.startswith(
        "error: OPEN_BLOCKERS: Issue #2 waits on #1, which is not done; finish those first"
    ), refused.stderr
    assert "--force" in refused.stderr and "issue_" not in refused.stderr  # CLI words
    assert dump(tmp_path) == before

    # The claim stays the holder's: its re-claim is a renewal that says what changed.
    again = workq("claim", "2", "--run-id", "r1")
    assert again.returncode == 0, again.stderr
    assert "Issue #2 now waits on #1, not done yet" in again.stdout
    renewal = data("claim", "2", "--run-id", "r1")
    assert renewal["already_held"] is True and renewal["waits_on"] == [1]
    beat = ok("heartbeat", "2", "--run-id", "r1")
    assert "Issue #2 now waits on #1" in beat

    ok("claim", "1", "--run-id", "r2")
    ok("complete", "1", "--run-id", "r2")
    done = data("complete", "2", "--run-id", "r1")
    assert done["already_done"] is False
    assert data("show", "2")["status"] == "done"


def test_a_reopened_blocker_holds_back_its_claimed_dependent(tmp_path: Path) -> None:
    ok("create", "blocker")
    ok("create", "dependent")
    ok("depend", "2", "--on", "1")
    ok("claim", "1", "--run-id", "r1")
    ok("complete", "1", "--run-id", "r1")
    ok("claim", "2", "--run-id", "r2")
    ok("reopen", "1")

    refused = workq("complete", "2", "--run-id", "r2")
    assert refused.returncode == 1
    assert "OPEN_BLOCKERS: Issue #2 waits on #1" in refused.stderr
    assert data("claim", "2", "--run-id", "r2")["waits_on"] == [1]

    # An admin may still force it; the history says so, with what it waited on.
    ok("complete", "2", "--force")
    completed = [e for e in events(2) if e["kind"] == "completed"]
    assert completed[-1]["after"] == {
        "status": "done",
        "forced": True,
        "waits_on": [1],
        "override": "workq complete --force",
        "by": "tester",  # the person (--as, WORKQ_ACTOR)
    }


def test_claim_next_of_its_own_expired_claim_is_a_renewal(tmp_path: Path) -> None:
    ok("create", "only")
    first = data("claim", "1", "--run-id", "r1")
    with closing(sqlite.connect(tmp_path / "autopilot.db")) as conn, conn:
        conn.execute("UPDATE issues SET lease_expires_at = '2000-01-01 00:00:00.000000'")

    again = data("claim-next", "--run-id", "r1")
    assert again["number"] == 1
    assert again["already_held"] is True and again["previous_holder"] is None
    assert again["claimed_at"] == first["claimed_at"]
    kinds = [e["kind"] for e in events(1)]
    assert "claim_takeover" not in kinds and kinds.count("claimed") == 1


# --- block by someone else ---------------------------------------------------------------


def test_blocking_another_runs_live_claim_needs_force(tmp_path: Path) -> None:
    ok("create", "held")
    ok("claim", "1", "--run-id", "r1")
    before = dump(tmp_path)
    refused = workq("--as", "r2", "block", "1", "not yours")
    assert refused.returncode == 1
    assert refused.stderr.startswith("error: NOT_HOLDER: Issue #1 is held by r1"), refused.stderr
    assert "--force" in refused.stderr
    assert dump(tmp_path) == before

    ok("--as", "r2", "block", "1", "stuck", "--force")
    issue = data("show", "1")
    assert issue["is_blocked"] and issue["claimed_by"] is None
    blocked = [e for e in events(1) if e["kind"] == "blocked"][-1]
    assert blocked["actor"] == "r2"
    assert blocked["after"] == {
        "blocked_reason": "stuck",
        "forced": True,
        "override": "workq block --force",
        "by": "r2",
    }


def test_the_holder_and_anyone_on_an_unclaimed_issue_block_without_force(tmp_path: Path) -> None:
    ok("create", "held")
    ok("create", "free")
    ok("claim", "1", "--run-id", "r1")
    ok("--as", "r1", "block", "1", "my own")
    ok("--as", "r2", "block", "2", "nobody's")
    for number in (1, 2):
        last = [e for e in events(number) if e["kind"] == "blocked"][-1]
        after = last["after"]
        assert after is None or "forced" not in after  # type: ignore[operator]


# --- text --------------------------------------------------------------------------------

C1_AND_SEPARATORS = {
    "CSI (C1)": "red\x9b31m",
    "NEL (C1)": "one\x85two",
    "C1 high end": "x\x9f",
    "line separator": "one\u2028two",
    "paragraph separator": "one\u2029two",
}


@pytest.mark.parametrize("value", C1_AND_SEPARATORS.values(), ids=C1_AND_SEPARATORS.keys())
def test_c1_controls_and_separators_stay_out_of_one_line_text(tmp_path: Path, value: str) -> None:
    ok("create", "first")
    before = dump(tmp_path)
    for args in (
        ("create", value),
        ("update", "1", "--title", value),
        ("create", "t", "-l", value),
        ("claim", "1", "--run-id", value),
        ("create", "t", "--agent", value),
    ):
        done = workq(*args)
        assert done.returncode == 1, (args, done.stdout)
        assert done.stderr.startswith("error: INVALID_INPUT: "), done.stderr
    assert dump(tmp_path) == before


def test_a_name_with_a_trailing_newline_is_refused(tmp_path: Path) -> None:
    ok("create", "first")
    before = dump(tmp_path)
    for args in (("create", "t", "-l", "bug\n"), ("claim", "1", "--run-id", "r1\n")):
        done = workq(*args)
        assert done.returncode == 1 and "INVALID_INPUT" in done.stderr, done.stderr
    assert dump(tmp_path) == before


def test_multi_line_text_refuses_c1_and_keeps_line_separators(tmp_path: Path) -> None:
    ok("create", "first")
    for c1 in ("\x9b2J", "a\x85b"):
        for args in (("create", "t", "-d", c1), ("comment", "1", c1), ("block", "1", c1)):
            done = workq(*args)
            assert done.returncode == 1 and "INVALID_INPUT" in done.stderr, (args, done.stderr)
    text = "line one\u2028line two\u2029para\ttab\r\nend"
    ok("create", "kept", "-d", text)
    assert data("show", "2")["description"] == text


def test_a_title_is_measured_once_trimmed(tmp_path: Path) -> None:
    padded = " " + "x" * TITLE_MAX + " "
    made = data("create", padded)
    assert made["title"] == "x" * TITLE_MAX
    data("update", "1", "--title", "\u3000" + "y" * TITLE_MAX + "\u00a0")
    assert data("show", "1")["title"] == "y" * TITLE_MAX
    refused = workq("create", " " + "x" * (TITLE_MAX + 1) + " ")
    assert refused.returncode == 1
    assert f"title is {TITLE_MAX + 1} characters long; the limit is {TITLE_MAX}" in refused.stderr


def test_descriptions_and_comments_are_limited_in_characters_not_bytes(tmp_path: Path) -> None:
    # 65,536 characters of which half take two bytes: 96 KiB of UTF-8, past "64 KiB" but
    # within the limit, which counts characters (an argument may hold 128 KiB at most).
    at_limit = ("é" + "a") * (DESCRIPTION_MAX // 2)
    assert len(at_limit) == DESCRIPTION_MAX and len(at_limit.encode()) > 64 * 1024
    made = data("create", "t", "-d", at_limit)
    assert len(made["description"]) == DESCRIPTION_MAX
    ok("comment", "1", at_limit)
    before = dump(tmp_path)
    for args in (("create", "t", "-d", at_limit + "a"), ("comment", "1", at_limit + "a")):
        done = workq(*args)
        assert done.returncode == 1
        assert f"is {DESCRIPTION_MAX + 1} characters long; the limit is {DESCRIPTION_MAX}" in (
            done.stderr
        ), done.stderr
    assert dump(tmp_path) == before


def test_the_limits_are_documented_in_the_unit_the_code_counts() -> None:
    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text()
    mcp = (root / "docs" / "mcp.md").read_text()
    assert f"| title | {TITLE_MAX} characters, one line |" in readme
    assert f"| description, comment | {DESCRIPTION_MAX:,} characters" in readme
    assert f"descriptions and comments {DESCRIPTION_MAX:,}" in mcp
    for doc in (readme, mcp):
        assert "KiB |" not in doc and "64 KiB" not in doc


# --- a lease that lapsed ---------------------------------------------------------------------


def test_a_heartbeat_does_not_revive_a_lapsed_lease(tmp_path: Path) -> None:
    """r1 claimed #1 (src/**) an hour ago with a 30-minute lease; r2 then claimed #2
    (src/auth/**). r1's heartbeat is refused, nothing changes, and both exclusive
    reservations are never live at once: r1 must claim again, and that is refused too."""
    ok("create", "wide", "--touch", "src/**")
    ok("create", "narrow", "--touch", "src/auth/**")
    queue = open_queue(Settings(db_path=tmp_path / "autopilot.db"))
    try:
        queue.clock = lambda: datetime.now(UTC) - timedelta(hours=1)
        claims.claim(queue, 1, Authority.of({"r1"}))
    finally:
        queue.db.dispose()
    ok("claim", "2", "--run-id", "r2")

    before = dump(tmp_path)
    refused = workq("heartbeat", "1", "--run-id", "r1")
    assert refused.returncode == 1
    assert refused.stderr.startswith("error: LEASE_LAPSED: Your claim on issue #1 lapsed at ")
    assert "workq claim 1" in refused.stderr, refused.stderr  # the next step, in CLI words
    assert dump(tmp_path) == before
    again = workq("claim", "1", "--run-id", "r1")
    assert again.returncode == 1 and "PATHS_RESERVED" in again.stderr, again.stderr
    assert dump(tmp_path) == before
