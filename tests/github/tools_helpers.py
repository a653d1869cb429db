"""``workq serve --toolsets github`` pointed at the fake GitHub, as a real subprocess
(``serve_github``) or the same server in this process (``github_server``), the ``workq``
command against the fake, and git repositories on disk for them to stand in."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.github_fake.server import FakeGitHub
from tests.server.conftest import CALL_TIMEOUT
from tests.workq_cli import workq as run_workq
from workq.config import Settings
from workq.server.app import build_server

WORKQ = str(Path(sys.executable).with_name("workq"))
# What a real server or command started here gets of the test's environment is only the
# fake's (``fake_env``): an in-process one has these removed.
SCRUB = ("GITHUB_", "WORKQ_", "GH_")


def fake_env(fake: FakeGitHub, token: str | None = None) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", ""), "WORKQ_ACTOR": "tests"}
    env["GITHUB_API_URL"] = fake.url
    if token != "":
        env["GITHUB_TOKEN"] = token or fake.token
    return env


def serve_args(db: Path, run_id: str, *args: str) -> list[str]:
    return ["--db", str(db), "serve", "--run-id", run_id, *args]


@asynccontextmanager
async def serve_github(
    workdir: Path,
    fake: FakeGitHub,
    *args: str,
    run_id: str = "run-a",
    token: str | None = None,
    toolsets: str = "default,github",
    db: Path | None = None,
    env: dict[str, str] | None = None,
) -> AsyncIterator[Client]:
    """A client of ``workq serve --toolsets TOOLSETS ARGS`` in ``workdir``; stderr to a log;
    ``env`` added to the fake's environment."""
    params = StdioServerParameters(
        command=WORKQ,
        args=serve_args(db or workdir / "queue.db", run_id, "--toolsets", toolsets, *args),
        env={**fake_env(fake, token), **(env or {})},
        cwd=workdir,
    )
    with ((db.parent if db else workdir) / f"serve-{run_id}.log").open("a") as log:
        async with Client(
            stdio_client(params, errlog=log), read_timeout_seconds=CALL_TIMEOUT
        ) as client:
            yield client


@asynccontextmanager
async def github_server(
    monkeypatch: pytest.MonkeyPatch,
    workdir: Path,
    fake: FakeGitHub,
    *,
    run_id: str = "run-a",
    token: str | None = None,
    toolsets: str = "default,github",
    github_repo: str | None = None,
    db: Path | None = None,
) -> AsyncIterator[Client]:
    """The server ``serve_github`` starts, built and run in this process: working in
    ``workdir`` (its checkout), with the fake's environment (``fake_env``) and no other
    GITHUB_, GH_ or WORKQ_ variable. Unlike ``workq serve`` it checks its link to GitHub at
    the first GitHub call, not before serving (see server/github_link.py)."""
    for key in [k for k in os.environ if k.startswith(SCRUB)]:
        monkeypatch.delenv(key)
    for key, value in fake_env(fake, token).items():
        if key != "PATH":
            monkeypatch.setenv(key, value)
    monkeypatch.chdir(workdir)
    settings = Settings(
        db_path=db or workdir / "queue.db",
        run_id=run_id,
        toolsets=toolsets,
        github_repo=github_repo,
    )
    async with Client(build_server(settings)) as client:
        yield client


def git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout.strip()


def clone_with_remote(root: Path, remote_url: str) -> Path:
    """A work tree with one commit on main and ``origin`` set to ``remote_url``."""
    work = root / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    (work / "README").write_text("hello\n")
    git(work, "add", "README")
    git(work, "commit", "-q", "-m", "first")
    git(work, "remote", "add", "origin", remote_url)
    return work


def workq(db: Path, fake: FakeGitHub, *args: str, cwd: Path | None = None) -> str:
    """A ``workq --db DB ARGS`` command against the fake (writes unpaced), run in this process
    with the fake's environment and no other GITHUB_, GH_ or WORKQ_ variable; its stdout."""
    env = {**fake_env(fake), "WORKQ_GITHUB_PACE": "0"}
    done = run_workq("--db", db, *args, cwd=cwd or db.parent, env=env, scrub=SCRUB)
    assert done.returncode == 0, done.stderr
    return done.stdout
