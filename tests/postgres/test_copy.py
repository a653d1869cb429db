"""`workq db copy`: a queue moves SQLite -> PostgreSQL -> SQLite with nothing lost."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Table, create_engine, insert, select, text

from tests.conftest import ADMIN
from tests.workq_cli import workq
from workq.config import Settings
from workq.db import migrate, models
from workq.domain.authority import Authority
from workq.errors import InvalidInput, SchemaMismatch
from workq.services.handle import Queue
from workq.services.maintenance import maintenance, transfer
from workq.services.queue import blocking, claims, dependencies, issues, notes, ready_queue
from workq.services.runtime import open_database, open_queue


def _fill(queue: Queue) -> None:
    """A queue with a bit of everything: labels, edges, comments, claims, history."""
    issues.create(queue, title="Fix login ünïcödé 🚀", priority="urgent", labels=["auth", "bug"])
    issues.create(queue, title="Docs", description="multi\nline\n\ttabbed", issue_type="chore")
    issues.create(queue, title="Deleted later")
    issues.create(queue, title="Blocked", agent="other-agent")
    issues.create(queue, title="Waits on 1 and 2")
    dependencies.depend(queue, blocker=1, blocked=5)
    dependencies.depend(queue, blocker=2, blocked=5)
    claims.claim(queue, 1, Authority.of({"run-a"}))
    notes.comment(queue, 1, "working on it", kind="progress", author="run-a")
    claims.complete(queue, 1, Authority.of({"run-a"}))
    claims.claim(queue, 2, Authority.of({"run-b"}))
    blocking.block(queue, 4, "needs a decision", by=Authority.overriding("admin", who="admin"))
    notes.comment(queue, 4, "why?", kind="question")
    issues.delete_issue(queue, 3, by=ADMIN)
    issues.update_issue(
        queue,
        2,
        add_labels=["docs"],
        priority="high",
        by=ADMIN,
    )


def _fill_the_rest(queue: Queue) -> None:
    """Rows in the tables the export leaves out: the GitHub mirror's, plans, workflows, pull
    requests, notice sinks and their outbox, policies, tasks."""
    now = datetime(2026, 3, 1, 12, 30, 15, 123456, tzinfo=UTC)
    issue_id = issues.get(queue, 2).id
    comment_id = notes.comments(queue, 4)[0].id
    rows: dict[Table, dict[str, Any]] = {
        models.github_mirror: {"repo": "acme/app", "created_at": now, "import_etag": 'W/"x"'},
        models.github_links: {
            "issue_id": issue_id,
            "number": 2,
            "repo": "acme/app",
            "gh_number": 17,
            "url": "https://github.com/acme/app/issues/17",
            "snapshot": "{}",
            "linked_at": now,
        },
        models.github_comments: {
            "comment_id": comment_id,
            "gh_comment_id": 2**40,
            "started_at": now,
        },
        models.plans: {
            "id": "p1",
            "run_id": "run-a",
            "slug": "big-plan",
            "goal": "ship",
            "phase": "design",
            "status": "active",
            "path": "/plans/big-plan.md",
            "active_run": "run-a",
            "active_slug": "big-plan",
            "created_at": now,
            "updated_at": now,
        },
        models.plan_issues: {"plan_id": "p1", "task": 1, "issue_id": issue_id},
        models.touches: {"issue_id": issue_id, "position": 0, "glob": "src/auth/**"},
        models.reservations: {
            "issue_id": issue_id,
            "glob": "docs/*.md",
            "holder": "run-b",
            "fence": 1,
            "mode": "shared",
            "created_at": now,
        },
        models.workflows: {
            "issue_id": issue_id,
            "phase": "testing",
            "tests_passed": False,
            "started_by": "run-b",
            "started_at": now,
            "updated_at": now,
        },
        models.github_pulls: {
            "issue_id": issue_id,
            "number": 2,
            "repo": "acme/app",
            "pr_number": 18,
            "url": "https://github.com/acme/app/pull/18",
            "branch": "2-mirrored",
            "opened_at": now,
            "merged_at": None,
        },
        models.issue_branches: {
            "issue_id": issue_id,
            "number": 2,
            "branch": "feature/2-mirrored",
            "checkout": "/src/app",
            "base_commit": "a" * 40,
            "merge_commit": None,
            "linked_by": "run-b",
            "linked_at": now,
        },
        models.gate_runs: {
            "issue_id": issue_id,
            "number": 2,
            "commit_sha": "b" * 40,
            "dirty": False,
            "whole_checkout": True,
            "gate": "tests",
            "gate_number": 5,
            "tests": True,
            "passed": True,
            "score": "10/10",
            "issues_found": 0,
            "tests_passed": 12,
            "tests_failed": 0,
            "tests_errors": 0,
            "exit_code": 0,
            "timed_out": False,
            "summary": '{"issues": []}',
            "started_at": now,
            "finished_at": now,
            "actor": "run-b",
        },
        models.repositories: {
            "name": "app",
            "path": "/src/app",
            "default_branch": "main",
            "worktree_dir": "/src/app/.worktrees",
            "auto_worktree": True,
            "merge_mode": "squash",
            "merge_holder": "host:1:abc",
            "merge_expires_at": now,
            "created_at": now,
            "land": "pr",
            "github_repo": "acme/app",
            "on_refused": "block",
            "update_branch": False,
        },
        models.worktrees: {
            "id": "w1",
            "repository": "app",
            "issue_id": issue_id,
            "number": 2,
            "path": "/src/app/.worktrees/task-2-x",
            "branch": "task/2-x",
            "base_commit": "a" * 40,
            "state": "active",
            "agent": "agent-1",
            "created_at": now,
            "updated_at": now,
        },
        models.landings: {
            "issue_id": issue_id,
            "number": 2,
            "repository": "app",
            "worktree_id": "w1",
            "branch": "task/2-x",
            "requested_by": "run-b",
            "fence": 1,
            "head_sha": "b" * 40,
            "state": "open",
            "detail": "waiting for checks: ci",
            "pr_number": 18,
            "pr_url": "https://github.com/acme/app/pull/18",
            "attempts": 2,
            "next_attempt_at": now,
            "created_at": now,
            "updated_at": now,
            "failure": '{"reason": "ci failed"}',
            "rounds": 2,
        },
        models.notify_sinks: {
            "id": "s1",
            "name": "ops",
            "kind": "webhook",
            "target": "https://hooks.example.org/x",
            "secret_env": "OPS_SECRET",
            "events": "stalled,blocked",
            "created_by": "admin",
            "created_at": now,
        },
        models.notices: {
            "sink_id": "s1",
            "event_id": 1,
            "event": "blocked",
            "number": 4,
            "delivery_id": "5f0c9a64-1f8e-4a53-9d55-7d0f0e7d2a11",
            "state": "failed",
            "attempts": 8,
            "next_attempt_at": now,
            "holder": None,
            "lease_until": None,
            "last_error": "HTTP 500",
            "created_at": now,
            "delivered_at": None,
        },
        models.policies: {
            "scope": "",
            "name": "stall_after",
            "value": "20m",
            "set_by": "admin",
            "set_at": now,
        },
        models.tasks: {
            "id": "x" * 32,
            "owner": "run-b",
            "kind": "claim_next",
            "arguments": '{"run_id": "run-b"}',
            "status": "completed",
            "status_message": "Claimed issue #2",
            "result": '{"value": {"claimed": true, "number": 2}}',
            "error": None,
            "created_at": now,
            "updated_at": now,
            "ttl_ms": 2**33,
            "poll_interval_ms": 1000,
            "deadline": now,
            "number": 2,
            "fence": 1,
            "read_at": now,
            "released": True,
        },
        models.agents: {
            "id": "agent-1",
            "name": "claude-1",
            "agent_type": "claude",
            "created_at": now,
            "last_seen_at": now,
        },
        models.run_bindings: {
            "run_id": "run-b",
            "server": "host:1:abc",
            "bound_at": now,
            "expires_at": now,
        },
    }
    with queue.db.engine.begin() as conn:
        for table, values in rows.items():
            conn.execute(insert(table), values)
    issues.update_issue(queue, 2, description="mirrored", by=ADMIN)  # queues an outbox row


def _every_row(url: str) -> dict[str, list[tuple[object, ...]]]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return {
                table.name: sorted((tuple(row) for row in conn.execute(select(table))), key=repr)
                for table in models.metadata.sorted_tables
            }
    finally:
        engine.dispose()


def _export(queue: Queue) -> list[str]:
    return list(transfer.export_lines(queue))


def test_round_trip_sqlite_postgresql_sqlite_is_identical(tmp_path: Path, pg_url: str) -> None:
    first = tmp_path / "first.db"
    source = open_queue(Settings(db_path=first))
    _fill(source)
    _fill_the_rest(source)
    original = _export(source)
    source.db.dispose()

    there = transfer.copy_queue(Settings(), str(first), pg_url)
    assert there.counts["issues"] == 4 and there.counts["comments"] == 2
    assert all(there.counts[t.name] for t in models.metadata.sorted_tables)
    assert "workq:***@" in there.target  # no password in what is printed
    back = transfer.copy_queue(Settings(), pg_url, str(tmp_path / "back.db"))
    assert back.digest == there.digest

    rows = _every_row(f"sqlite:///{first}")
    assert _every_row(f"sqlite:///{tmp_path / 'back.db'}") == rows
    pg = open_queue(Settings(database_url=pg_url))
    again = open_queue(Settings(db_path=tmp_path / "back.db"))
    try:
        assert _export(pg) == original
        assert _export(again) == original
        # Counters and id sequences continue where the source left off, on both engines.
        for queue in (pg, again):
            assert issues.create(queue, title="next").number == 6  # 3 stays retired
            assert notes.comment(queue, 2, "more").id == 3
            assert issues.get(queue, 2).claimed_by == "run-b"
    finally:
        pg.db.dispose()
        again.db.dispose()


def test_copy_keeps_leases_and_the_blocked_state_working(tmp_path: Path, pg_url: str) -> None:
    first = tmp_path / "first.db"
    source = open_queue(Settings(db_path=first, lease_seconds=60))
    _fill(source)
    source.db.dispose()
    transfer.copy_queue(Settings(), str(first), pg_url)
    pg = open_queue(Settings(database_url=pg_url, lease_seconds=60))
    try:
        assert [r.number for r in ready_queue.ready(pg, limit=10)] == []  # 5 waits on 2, 4 blocked
        claims.complete(pg, 2, Authority.of({"run-b"}))
        assert [r.number for r in ready_queue.ready(pg, limit=10)] == [5]
        assert maintenance.doctor(pg).ok
    finally:
        pg.db.dispose()


def test_the_target_must_be_empty_and_stays_untouched(tmp_path: Path, pg_url: str) -> None:
    first = tmp_path / "first.db"
    source = open_queue(Settings(db_path=first))
    _fill(source)
    source.db.dispose()
    target = open_queue(Settings(database_url=pg_url), migrate=True)
    issues.create(target, title="already here")
    before = _export(target)
    with pytest.raises(InvalidInput, match="already holds a queue"):
        transfer.copy_queue(Settings(), str(first), pg_url)
    assert _export(target) == before
    target.db.dispose()


def test_the_source_is_read_only_and_must_be_at_head(tmp_path: Path, pg_url: str) -> None:
    old = open_database(Settings(database_url=pg_url))
    migrate.upgrade(old, migrate.REVISIONS[0])
    old.dispose()
    with pytest.raises(SchemaMismatch, match="the copy reads it unchanged") as behind:
        transfer.copy_queue(Settings(), pg_url, str(tmp_path / "new.db"))
    assert "db upgrade" in (behind.value.hint or "")
    assert not (tmp_path / "new.db").exists()
    with pytest.raises(InvalidInput, match="no SQLite database"):
        transfer.copy_queue(Settings(), str(tmp_path / "missing.db"), pg_url)
    with pytest.raises(InvalidInput, match="same database"):
        transfer.copy_queue(Settings(), pg_url, pg_url.replace("postgresql+psycopg", "postgres"))


def test_the_target_is_migrated_first(tmp_path: Path, pg_url: str) -> None:
    first = tmp_path / "first.db"
    open_queue(Settings(db_path=first)).db.dispose()
    transfer.copy_queue(Settings(), str(first), pg_url)
    engine = create_engine(pg_url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == (
            migrate.HEAD
        )
    engine.dispose()


def test_db_copy_command(tmp_path: Path, pg_url: str) -> None:
    first = tmp_path / "first.db"
    source = open_queue(Settings(db_path=first))
    _fill(source)
    source.db.dispose()
    done = workq("db", "copy", "--from", first, "--to", pg_url, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["counts"]["issues"] == 4 and "***" in report["target"]
    again = workq("db", "copy", "--from", first, "--to", pg_url, cwd=tmp_path)
    assert again.returncode == 1
    assert "INVALID_INPUT" in again.stderr and "already holds a queue" in again.stderr
    shown = workq("--database-url", pg_url, "show", "2", cwd=tmp_path)
    assert shown.returncode == 0 and "Docs" in shown.stdout


def test_the_check_after_the_copy_sees_a_single_changed_value(tmp_path: Path, pg_url: str) -> None:
    first = tmp_path / "first.db"
    source = open_queue(Settings(db_path=first))
    _fill(source)
    transfer.copy_queue(Settings(), str(first), pg_url)
    target = open_queue(Settings(database_url=pg_url))
    try:
        assert transfer._digests(source.db) == transfer._digests(target.db)
        with target.db.engine.begin() as conn:
            conn.execute(text("UPDATE comments SET body = 'why!' WHERE body = 'why?'"))
        differ = transfer._digests(target.db)
        assert {n for n, d in transfer._digests(source.db).items() if differ[n] != d} == {
            "comments"
        }
    finally:
        source.db.dispose()
        target.db.dispose()
