"""GitHub failing: unclear creates stay single, rate limits reschedule, auth stops, rows die."""

from __future__ import annotations

import socket
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from tests.conftest import ADMIN
from tests.github.mirror_helpers import FAST, REPO, Mirror, env_for, markers, mirrored
from tests.github_fake.server import FakeGitHub
from workq.db.tables import events, notices
from workq.errors import Conflict
from workq.github.auth import GitHubUnreachable, SyncSetupError
from workq.github.failures import AuthFailed
from workq.github.sync import connect, watch
from workq.github.worker import Options, WorkerBusy
from workq.services.handle import utcnow
from workq.services.notices import sinks
from workq.services.queue import issues, notes
from workq.services.sync import mirror_target, outbox_rows, sync_status, worker_lease
from workq.services.sync.mirror import github_link

ISSUES = "/repos/*/*/issues"


def later(m: Mirror, seconds: float) -> None:
    """Move the queue's clock forward (GitHub's stays put: it is a real server)."""
    shift = timedelta(seconds=seconds)
    before = m.q.clock
    m.q.clock = lambda: before() + shift


def creates(m: Mirror) -> int:
    return sum(1 for w in m.writes() if w.method == "POST" and w.path == f"/repos/{REPO}/issues")


@pytest.mark.parametrize("fault", ["error", "timeout", "disconnect"])
def test_an_unclear_answer_after_the_create_still_ends_with_one_issue(
    tmp_path: Path, fake_github: FakeGitHub, fault: str
) -> None:
    with mirrored(tmp_path, fake_github, timeout=0.5) as m:
        made = issues.create(m.q, title="only once")
        m.fake.inject_fault("POST", ISSUES, kind=fault, status=502, when="after", delay=2.0)
        first = m.sync()
        assert first.pushed.rescheduled == 1
        assert len(m.fake.issues()) == 1  # GitHub did create it
        state = sync_status.status(m.q)
        assert (state.pending, state.uncertain) == (1, 1)
        later(m, 5)
        second = m.sync()
        assert second.pushed.found == 1 and second.pushed.created == 0
        assert creates(m) == 1
        assert markers(m.fake) == [made.id]
        assert sync_status.status(m.q).pending == 0
        assert github_link(m.q, made.number) is not None


def test_an_unclear_answer_before_the_create_creates_on_the_next_pass(
    tmp_path: Path, fake_github: FakeGitHub
) -> None:
    with mirrored(tmp_path, fake_github) as m:
        made = issues.create(m.q, title="not yet")
        m.fake.inject_fault("POST", ISSUES, kind="error", status=502, when="before")
        m.sync()
        assert m.fake.issues() == []
        later(m, 5)
        result = m.sync()
        assert result.pushed.created == 1
        assert markers(m.fake) == [made.id]


def test_a_comment_answered_unclearly_is_posted_once(
    tmp_path: Path, fake_github: FakeGitHub
) -> None:
    with mirrored(tmp_path, fake_github) as m:
        made = issues.create(m.q, title="chatty")
        m.sync()
        notes.comment(m.q, made.number, "hello")
        m.fake.inject_fault("POST", f"{ISSUES}/*/comments", kind="error", status=500, when="after")
        m.sync()
        later(m, 5)
        m.sync()
        gh_number = m.gh_issue_of(made.number)["number"]
        assert len(m.fake.comments(gh_number)) == 1
        assert sync_status.status(m.q).pending == 0


@pytest.mark.parametrize("kind", ["rate_limit", "secondary_rate_limit"])
def test_a_rate_limit_reschedules_the_row_and_the_others_proceed(
    tmp_path: Path, fake_github: FakeGitHub, kind: str
) -> None:
    with mirrored(tmp_path, fake_github) as m:
        made = [issues.create(m.q, title=f"n{n}") for n in range(3)]
        m.fake.inject_fault("POST", ISSUES, kind=kind, retry_after=30, reset_in=60)
        result = m.sync()
        assert (result.pushed.created, result.pushed.rescheduled) == (2, 1)
        assert result.pushed.held_until is None
        state = sync_status.status(m.q)
        assert state.pending == 1 and state.due_now == 0
        waiting = state.problems[0]
        assert waiting.attempts == 0  # a rate limit is not a failure of the row
        assert waiting.next_attempt_at > utcnow() + timedelta(seconds=20)
        assert "rate limit" in (waiting.last_error or "")
        m.fake.clear_requests()
        assert m.sync().pushed.rows == 0  # not due yet: no request at all
        assert m.fake.requests() == []
        later(m, 61)
        assert m.sync().pushed.created == 1
        assert sorted(markers(m.fake)) == sorted(i.id for i in made)


def test_an_exhausted_primary_limit_holds_every_request(
    tmp_path: Path, fake_github: FakeGitHub
) -> None:
    with mirrored(tmp_path, fake_github) as m:
        for n in range(3):
            issues.create(m.q, title=f"n{n}")
        m.sync()
        m.fake.set_rate_limit(limit=5000, remaining=0, reset_in=120)
        for n in range(3):
            issues.update_issue(m.q, n + 1, title=f"renamed {n}", by=ADMIN)
        m.fake.clear_requests()
        result = m.sync()
        assert result.pushed.held_until is not None
        # One refused PATCH and the free /rate_limit check; the other rows were not tried.
        assert [r.path for r in m.fake.requests()] == [f"/repos/{REPO}/issues/1", "/rate_limit"]
        assert sync_status.status(m.q).pending == 3


@pytest.mark.slow
def test_repeated_secondary_limits_pause_the_worker(
    tmp_path: Path, fake_github: FakeGitHub
) -> None:
    with mirrored(tmp_path, fake_github) as m:
        for n in range(6):
            issues.create(m.q, title=f"n{n}")
        m.session.worker.labels.ensure(["priority:medium", "type:task", "status:backlog"])
        m.fake.set_write_budget(2, window=60)
        m.fake.clear_requests()
        result = m.sync()
        assert result.pushed.created == 2
        assert result.pushed.held_until is not None
        refused = [w for w in m.writes() if w.status == 403]
        assert len(refused) == 2  # the second refusal in a row stops the pass
        assert sync_status.status(m.q).pending == 4
        m.fake.advance_clock(61)
        later(m, 61)
        assert m.sync().pushed.created == 2


def test_a_refused_token_stops_the_worker(tmp_path: Path, fake_github: FakeGitHub) -> None:
    with mirrored(tmp_path, fake_github) as m:
        issues.create(m.q, title="x")
        m.fake.set_token("ghp_rotated")
        with pytest.raises(AuthFailed):
            m.sync()
        state = sync_status.status(m.q)
        assert state.pending == 1 and state.dead == 0
        assert "401" in (state.last_error or "")


def test_a_worker_stopped_by_a_refused_token_tells_a_person(
    tmp_path: Path, fake_github: FakeGitHub
) -> None:
    with mirrored(tmp_path, fake_github) as m:
        sinks.add(m.q, "ops", command="true", events="github_stopped")
        issues.create(m.q, title="x")
        m.fake.set_token("ghp_rotated")
        with pytest.raises(AuthFailed):
            watch(m.session, with_import=False)
        with m.q.db.read() as conn:
            stopped = (
                conn.execute(select(events.c.after).where(events.c.kind == "sync_stopped"))
                .scalars()
                .all()
            )
            queued = conn.execute(select(notices.c.event, notices.c.number)).all()
        assert len(stopped) == 1 and "401" in stopped[0] and "ghp_" not in stopped[0]
        assert [tuple(r) for r in queued] == [("github_stopped", None)]


def test_a_forbidden_write_stops_the_worker(tmp_path: Path, fake_github: FakeGitHub) -> None:
    with mirrored(tmp_path, fake_github) as m:
        issues.create(m.q, title="x")
        m.session.worker.labels.ensure(["priority:medium", "type:task", "status:backlog"])
        m.fake.inject_fault(
            "POST",
            ISSUES,
            kind="error",
            status=403,
            message="Resource not accessible by integration",
        )
        with pytest.raises(AuthFailed, match="403"):
            m.sync()
        assert sync_status.status(m.q).pending == 1


def test_a_row_failing_again_and_again_is_parked_then_revived(
    tmp_path: Path, fake_github: FakeGitHub
) -> None:
    options = Options(write_interval=0, backoff_base=1.0, max_attempts=3)
    with mirrored(tmp_path, fake_github, options=options) as m:
        made = issues.create(m.q, title="doomed")
        m.session.worker.labels.ensure(["priority:medium", "type:task", "status:backlog"])
        m.fake.inject_fault("POST", ISSUES, kind="error", status=503, count=3)
        for _ in range(3):
            m.sync()
            later(m, 60)
        state = sync_status.status(m.q)
        assert (state.pending, state.dead) == (0, 1)
        assert state.problems[0].attempts == 3
        assert "503" in (state.problems[0].last_error or "")
        # A new change revives it.
        issues.update_issue(m.q, made.number, title="doomed, again", by=ADMIN)
        assert m.sync().pushed.created == 1
        assert sync_status.status(m.q).dead == 0


def test_a_rejected_request_parks_the_row(tmp_path: Path, fake_github: FakeGitHub) -> None:
    with mirrored(tmp_path, fake_github) as m:
        issues.create(m.q, title="x")
        m.session.worker.labels.ensure(["priority:medium", "type:task", "status:backlog"])
        m.fake.inject_fault("POST", ISSUES, kind="error", status=422, message="Validation Failed")
        result = m.sync()
        assert result.pushed.dead == 1
        assert outbox_rows.revive(m.q) == 1
        assert m.sync().pushed.created == 1


def test_an_issue_deleted_on_github_is_left_alone(tmp_path: Path, fake_github: FakeGitHub) -> None:
    with mirrored(tmp_path, fake_github) as m:
        made = issues.create(m.q, title="x")
        m.sync()
        m.fake.delete_issue(m.gh_issue_of(made.number)["number"])
        issues.update_issue(m.q, made.number, title="y", by=ADMIN)
        result = m.sync()
        assert result.pushed.gone == 1 and sync_status.status(m.q).pending == 0
        issues.update_issue(m.q, made.number, title="z", by=ADMIN)
        m.fake.clear_requests()
        m.sync()
        assert m.fake.requests() == []  # not recreated, not retried
        from workq.services.queue.notes import history

        assert "github_gone" in [e.kind for e in history(m.q, made.number)]


def test_start_checks_token_repository_and_access(tmp_path: Path, fake_github: FakeGitHub) -> None:
    from tests.github.mirror_helpers import open_file_queue

    q = open_file_queue(tmp_path / "q.db")
    env = env_for(fake_github, fake_github.url)
    try:
        with pytest.raises(SyncSetupError, match="no GitHub token"):
            connect(q, REPO, env={"GITHUB_API_URL": fake_github.url, "PATH": ""})
        with pytest.raises(SyncSetupError, match="refused the token"):
            connect(q, REPO, env={**env, "GITHUB_TOKEN": "ghp_wrong"})
        with pytest.raises(SyncSetupError, match="GITHUB_TOKEN is not a token") as pasted:
            connect(q, REPO, env={**env, "GITHUB_TOKEN": "ghp_one\nghp_two"})
        assert "ghp_one" not in str(pasted.value)
        with pytest.raises(SyncSetupError, match="unknown repository acme/nothing"):
            connect(q, "acme/nothing", env=env)
        fake_github.add_repo("acme/readonly", push=False)
        with pytest.raises(SyncSetupError, match="no push access"):
            connect(q, "acme/readonly", env=env)
        with pytest.raises(SyncSetupError, match="OWNER/NAME"):
            connect(q, "widgets", env=env)
        with pytest.raises(GitHubUnreachable):
            connect(q, REPO, env={**env, "GITHUB_API_URL": "http://127.0.0.1:9"}, timeout=1)
        assert mirror_target.mirror(q) is None  # nothing was configured by failed starts
        connect(q, REPO, env=env, options=FAST).close()
        fake_github.add_repo("acme/other")
        with pytest.raises(Conflict, match="already mirrors acme/widgets"):
            connect(q, "acme/other", env=env)
    finally:
        q.db.dispose()


def test_one_worker_per_mirror(tmp_path: Path, fake_github: FakeGitHub) -> None:
    from tests.github.mirror_helpers import open_file_queue

    q = open_file_queue(tmp_path / "q.db")
    env = env_for(fake_github, fake_github.url)
    until = utcnow() + timedelta(minutes=1)
    try:
        connect(q, REPO, env=env, options=FAST).close()
        # A live worker elsewhere holds the mirror.
        assert worker_lease.take(q, REPO, "elsewhere:1", until, holder_is_gone=_alive) is None
        with pytest.raises(WorkerBusy, match="elsewhere:1"):
            connect(q, REPO, env=env, options=FAST)
        worker_lease.release(q, REPO, "elsewhere:1")
        # A worker of this host that died (kill -9) does not block a restart, whether it was
        # named host:pid:nonce or, by an older workq, host:pid.
        host = socket.gethostname()
        for named in (lambda pid: f"{host[:60]}:{pid}:cafe0001", lambda pid: f"{host}:{pid}"):
            dead = subprocess.Popen([sys.executable, "-c", "pass"])
            dead.wait()
            holder = named(dead.pid)
            assert worker_lease.take(q, REPO, holder, until, holder_is_gone=_alive) is None
            connect(q, REPO, env=env, options=FAST).close()
            assert sync_status.status(q).worker is None
    finally:
        q.db.dispose()


def _alive(worker: str) -> bool:
    return False
