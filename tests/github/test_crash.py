"""kill -9 of the worker at random points, then a restart: the mirror converges with no
duplicate and no lost change. The worker is the real command (`workq sync github --watch`)
in a subprocess; GitHub is the fake in another process, with faults injected now and then."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ADMIN
from tests.github.mirror_helpers import MARKER, REPO, open_file_queue
from tests.github_fake.server import PROJECT_ROOT, FakeGitHubProcess
from tests.storage import assert_intact
from workq.domain.authority import Authority
from workq.github.render import desired, marker
from workq.services.handle import Queue
from workq.services.queue import claims, issues, listing, notes
from workq.services.sync import sync_status
from workq.services.sync.mirror import github_link

pytestmark = pytest.mark.slow

ROUNDS = 14
FAULTS: list[dict[str, Any]] = [
    {
        "method": "POST",
        "path": "/repos/*/*/issues",
        "kind": "error",
        "status": 502,
        "when": "after",
    },
    {"method": "POST", "path": "/repos/*/*/issues", "kind": "timeout", "when": "after", "delay": 2},
    {"method": "PATCH", "path": "/repos/*/*/issues/*", "kind": "error", "status": 500},
    {
        "method": "POST",
        "path": "/repos/*/*/issues/*/comments",
        "kind": "error",
        "status": 502,
        "when": "after",
    },
    {
        "method": "POST",
        "path": "/repos/*/*/issues",
        "kind": "secondary_rate_limit",
        "retry_after": 1,
    },
]


def _cli(db: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "workq.cli.main", "--db", str(db), *args]


def _env(fake: FakeGitHubProcess) -> dict[str, str]:
    return {
        **os.environ,
        "GITHUB_TOKEN": fake.token,
        "GITHUB_API_URL": fake.url,
        "WORKQ_GITHUB_PACE": "0",
        "PYTHONPATH": str(PROJECT_ROOT / "src"),
    }


def _mutate(q: Queue, rng: random.Random, step: int) -> None:
    """A few random local changes, as agents and people make them."""
    live = [i.number for i in listing.list_issues(q, limit=200).items]
    for _ in range(rng.randint(2, 5)):
        action = rng.choice(
            ["create", "create", "rename", "label", "comment", "claim", "done", "reopen", "delete"]
        )
        if action == "create" or not live:
            live.append(
                issues.create(q, title=f"task {step}", priority=rng.choice(["high", "low"])).number
            )
            continue
        n = rng.choice(live)
        issue = issues.get(q, n)
        if action == "rename":
            issues.update_issue(q, n, title=f"{issue.title} +{step}", by=ADMIN)
        elif action == "label":
            issues.update_issue(
                q,
                n,
                add_labels=[f"l{rng.randint(1, 3)}"],
                by=ADMIN,
            )
        elif action == "comment":
            notes.comment(q, n, f"note {step}")
        elif action == "claim" and issue.status == "open" and not issue.claimed_by:
            claims.claim(q, n, Authority.of({f"run-{step}"}))
        elif action == "done" and issue.status != "done":
            claims.complete(q, n, Authority.overriding("admin", who="admin"))
        elif action == "reopen" and issue.status == "done":
            issues.reopen(q, n)
        elif action == "delete" and len(live) > 3:
            issues.delete_issue(q, n, by=ADMIN)
            live.remove(n)


def _converge(db: Path, env: dict[str, str], q: Queue) -> None:
    for _ in range(6):
        subprocess.run(
            _cli(db, "sync", "retry", "--all"), env=env, check=True, capture_output=True, timeout=60
        )
        done = subprocess.run(
            _cli(db, "sync", "github", "--repo", REPO, "--once"),
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        state = sync_status.status(q)
        if state.pending == 0 and state.uncertain == 0 and state.dead == 0:
            return
    raise AssertionError(f"the mirror did not converge: {sync_status.status(q)}")


def test_kill_9_at_random_points_then_restart_converges(tmp_path: Path) -> None:
    rng = random.Random(int(os.environ.get("WORKQ_CRASH_SEED", "20261122")))
    db = tmp_path / "queue.db"
    log = (tmp_path / "worker.log").open("a")
    with FakeGitHubProcess() as fake:
        env = _env(fake)
        q = open_file_queue(db)
        try:
            for n in range(3):
                issues.create(q, title=f"seed {n}")
            for step in range(ROUNDS):
                _mutate(q, rng, step)
                if rng.random() < 0.5:
                    fake.inject_fault(**rng.choice(FAULTS))
                worker = subprocess.Popen(
                    _cli(db, "sync", "github", "--repo", REPO, "--watch", "--timeout", "1"),
                    env=env,
                    stdout=log,
                    stderr=log,
                )
                time.sleep(rng.uniform(0.3, 1.5))
                _mutate(q, rng, step)  # changes while the worker runs
                time.sleep(rng.uniform(0.0, 0.5))
                worker.kill()  # SIGKILL: no cleanup of any kind
                worker.wait(10)
            fake.clear_faults()
            _converge(db, env, q)
            _check_mirror(q, fake)
        finally:
            q.db.dispose()
            log.close()
    assert_intact(db)


def _check_mirror(q: Queue, fake: FakeGitHubProcess) -> None:
    on_github = fake.issues()
    by_marker: dict[str, list[dict[str, Any]]] = {}
    for gh in on_github:
        found = MARKER.search(gh.get("body") or "")
        assert found, f"GitHub #{gh['number']} has no marker"
        by_marker.setdefault(found.group(1), []).append(gh)
    duplicates = {k: [g["number"] for g in v] for k, v in by_marker.items() if len(v) > 1}
    assert not duplicates, f"duplicated on GitHub: {duplicates}"

    local = listing.list_issues(q, limit=200).items
    assert local
    for summary in local:
        issue = issues.get(q, summary.number)
        link = github_link(q, issue.number)
        assert link is not None, f"#{issue.number} never reached GitHub"
        gh = fake.issue(link.gh_number)
        assert marker(issue.id) in gh["body"]
        want = desired(issue, None)
        assert gh["title"] == want.title
        assert gh["state"] == want.state, f"#{issue.number}"
        assert {lb["name"].lower() for lb in gh["labels"]} == {lb.lower() for lb in want.labels}
        comments = notes.comments(q, issue.number, limit=200)
        bodies = [c["body"] for c in fake.comments(link.gh_number)]
        for comment in comments:
            tag = f"<!-- workq:comment={issue.id}/{comment.id} -->"
            assert sum(tag in b for b in bodies) == 1, f"comment {comment.id} of #{issue.number}"
        assert len(bodies) == len(comments)
    # Issues deleted here are closed there; nothing else is left open.
    mirrored = {issues.get(q, i.number).id for i in local}
    for local_id, (gh,) in by_marker.items():
        if local_id not in mirrored:
            assert gh["state"] == "closed", f"GitHub #{gh['number']} of a deleted issue is open"
