"""A ``workq serve`` killed with -9 while it holds a repository's merge lease does not stall
the merge queue: the next agent's merge (another real server) takes the dead holder's lease
at once instead of waiting out its length, and the killed merge lands exactly once when run
again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import IO, Any

import pytest

from tests.server.conftest import serve_argv
from tests.services.workspaces.gitrepo import commit, make_repo
from tests.storage import assert_intact
from tests.workq_cli import workq
from workq.config import Settings
from workq.db import sqlite
from workq.domain.authority import Authority
from workq.services.queue import issues
from workq.services.runtime import open_queue
from workq.services.workspaces import claiming, repositories
from workq.vcs import git

# A lease far longer than any wait here: without the takeover the next merge would sit
# behind it (MERGE_BUSY after 300 s), and the deadline below fails the test instead.
LEASE = {"WORKQ_MERGE_LEASE_SECONDS": "600"}
DEADLINE = 90.0
INITIALIZE = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "crash-test", "version": "0"},
}


def _send(stdin: IO[str], message: dict[str, Any]) -> None:
    stdin.write(json.dumps(message) + "\n")
    stdin.flush()


def _server(db: Path, run_id: str, env: dict[str, str]) -> subprocess.Popen[str]:
    server = subprocess.Popen(
        [sys.executable, *serve_argv("--toolsets", "default,agit", "--run-id", run_id, db=db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=db.parent,
        env={**os.environ, "WORKQ_TESTS_GATE": "trust", **LEASE, **env},
        start_new_session=True,
    )
    assert server.stdin is not None
    _send(server.stdin, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INITIALIZE})
    _send(server.stdin, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    return server


def _merge(server: subprocess.Popen[str], worktree_id: str) -> None:
    assert server.stdin is not None
    arguments = {"repo": "app", "worktree_id": worktree_id}
    call = {"name": "agit_merge_worktree", "arguments": arguments}
    _send(server.stdin, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call})


def _answer(server: subprocess.Popen[str]) -> dict[str, Any]:
    """The answer to request 1."""
    assert server.stdout is not None
    for line in server.stdout:
        message = json.loads(line)
        if message.get("id") == 1:
            return dict(message["result"])
    raise AssertionError("the server ended without answering")


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + DEADLINE
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


@pytest.mark.slow
def test_the_next_merge_takes_the_lease_of_a_server_killed_mid_merge(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    repo = make_repo(tmp_path / "app")
    queue = open_queue(Settings(db_path=db))
    ids = {}
    try:
        repositories.add(queue, "app", repo)
        for agent, name in (("agent-a", "a"), ("agent-b", "b")):
            number = issues.create(queue, title=f"piece {name}", repository="app").number
            taken = claiming.claim(queue, number, Authority.of({agent}), worktree=True).worktree
            assert taken is not None
            commit(Path(taken.path), {f"{name}.txt": f"{name}\n"}, f"work on #{number}")
            ids[agent] = (number, taken.worktree_id, Path(taken.path))
    finally:
        queue.db.dispose()
    commit(repo, {"trunk.txt": "moved\n"}, "main moves")  # each merge makes a merge commit

    # Agent A's git stops inside the lease, where the merge fast-forwards main's checkout.
    shim, parked = tmp_path / "bin", tmp_path / "parked"
    shim.mkdir()
    (shim / "git").write_text(
        "#!/bin/sh\n"
        f'case " $* " in *" merge --ff-only "*) echo $$ > "{parked}"; sleep 600;; esac\n'
        f'exec "{git.executable()}" "$@"\n'
    )
    (shim / "git").chmod(0o755)
    with _server(db, "agent-a", {"PATH": f"{shim}{os.pathsep}{os.environ['PATH']}"}) as a:
        try:
            _merge(a, ids["agent-a"][1])
            _wait_for(parked)
            os.kill(a.pid, signal.SIGKILL)
            a.wait(timeout=30)
        finally:
            a.kill()
            with open(parked) as f:  # its parked git: killed with it, as a real one ends
                os.kill(int(f.read()), signal.SIGKILL)
    rows = _sql(db, "SELECT merge_holder, merge_expires_at FROM repositories")
    assert rows[0][0].split(":")[1] == str(a.pid)  # the dead server still holds the lease

    with _server(db, "agent-b", {}) as b:
        watchdog = threading.Timer(DEADLINE, b.kill)
        watchdog.start()
        try:
            _merge(b, ids["agent-b"][1])
            answer = _answer(b)
        finally:
            watchdog.cancel()
            b.kill()
    assert not answer.get("isError"), answer
    assert answer["structuredContent"]["merged"] is True
    takeovers = _sql(db, "SELECT before FROM events WHERE kind = 'merge_lease_taken_over'")
    assert len(takeovers) == 1 and str(a.pid) in takeovers[0][0]

    # A's merge, run again, lands exactly once.
    number, _, path = ids["agent-a"]
    rerun = workq("--db", db, "merge", str(number), "--run-id", "agent-a")
    assert rerun.returncode == 0, rerun.stderr
    log = git.run(["log", "--format=%s", "main"], cwd=repo).lines
    landed = sorted(line for line in log if line.startswith("work on #"))
    assert landed == sorted(f"work on #{n}" for n, _, _ in ids.values())
    assert not path.exists() and git.dirty_paths(repo) == []
    assert_intact(db)


def _sql(db: Path, statement: str) -> list[tuple[Any, ...]]:
    with closing(sqlite.connect(db)) as conn:
        return list(conn.execute(statement).fetchall())
