"""`workq sync ...` against the fake GitHub on 127.0.0.1, run in this process; `workq serve
--sync-github` in a real one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.github.mirror_helpers import REPO, markers
from tests.github_fake.server import PROJECT_ROOT, FakeGitHub
from tests.workq_cli import workq, workq_process

Run = Callable[..., subprocess.CompletedProcess[str]]


SCRUB = ("GITHUB_", "WORKQ_")  # none of the caller's GitHub or workq settings


def _run(
    db: Path, *args: str, env: dict[str, str] | None = None, run: Run = workq
) -> subprocess.CompletedProcess[str]:
    """``workq --db DB ARGS`` in this process (``run=workq_process``: a real one)."""
    return run("--db", db, *args, env=env, scrub=SCRUB)


def _gh_env(fake: FakeGitHub, **extra: str) -> dict[str, str]:
    return {
        "GITHUB_TOKEN": fake.token,
        "GITHUB_API_URL": fake.url,
        "WORKQ_GITHUB_PACE": "0",
        **extra,
    }


def test_sync_once_then_status_and_show(tmp_path: Path, fake_github: FakeGitHub) -> None:
    db = tmp_path / "q.db"
    assert _run(db, "create", "First", "-p", "high").returncode == 0
    assert "No GitHub mirror" in _run(db, "sync", "status").stdout
    done = _run(db, "sync", "github", "--repo", REPO, env=_gh_env(fake_github))
    assert done.returncode == 0, done.stderr
    assert "Mirroring to acme/widgets: 1 issues to push" in done.stdout
    assert "1 created" in done.stdout
    status = json.loads(_run(db, "sync", "status", "--json").stdout)
    assert (status["repo"], status["pending"], status["linked"]) == (REPO, 0, 1)
    assert status["last_push_at"] is not None
    assert "linked issues  1" in _run(db, "sync", "status").stdout
    assert len(markers(fake_github)) == 1
    shown = json.loads(_run(db, "show", "1", "--json").stdout)
    assert shown["github"]["repo"] == REPO and shown["github"]["gh_number"] >= 1
    assert f"{REPO}#{shown['github']['gh_number']}" in _run(db, "show", "1").stdout


def test_the_token_never_appears_in_output_or_logs(tmp_path: Path, fake_github: FakeGitHub) -> None:
    db = tmp_path / "q.db"
    _run(db, "create", "x")
    fake_github.inject_fault("POST", "/repos/*/*/issues", kind="error", status=502, when="after")
    outputs = []
    for args in (("sync", "github", "--repo", REPO), ("sync", "status"), ("-v", "sync", "status")):
        done = _run(db, *args, env=_gh_env(fake_github))
        outputs.append(done.stdout + done.stderr)
    bad = _run(
        db,
        "sync",
        "github",
        "--repo",
        REPO,
        env=_gh_env(fake_github, GITHUB_TOKEN="ghp_secretvalue123"),
    )
    outputs.append(bad.stdout + bad.stderr)
    assert bad.returncode == 1 and "refused the token" in bad.stderr
    for text in outputs:
        assert fake_github.token not in text and "ghp_secretvalue123" not in text


def test_setup_errors_are_one_clear_line(tmp_path: Path, fake_github: FakeGitHub) -> None:
    db = tmp_path / "q.db"
    no_token = _run(
        db,
        "sync",
        "github",
        "--repo",
        REPO,
        env={"GITHUB_API_URL": fake_github.url, "PATH": "/nonexistent"},
    )
    assert no_token.returncode == 1
    assert no_token.stderr.strip().startswith(
        "error: GITHUB_SETUP: no GitHub token; set GITHUB_TOKEN"
    )
    unknown = _run(db, "sync", "github", "--repo", "acme/missing", env=_gh_env(fake_github))
    assert unknown.returncode == 1 and "unknown repository acme/missing" in unknown.stderr
    both = _run(db, "sync", "github", "--repo", REPO, "--once", "--watch", env=_gh_env(fake_github))
    assert both.returncode == 1 and "--once or --watch" in both.stderr


def test_the_token_comes_from_gh_when_github_token_is_unset(
    tmp_path: Path, fake_github: FakeGitHub
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gh = bin_dir / "gh"
    gh.write_text(f'#!/bin/sh\n[ "$1 $2" = "auth token" ] && echo {fake_github.token}\n')
    gh.chmod(0o755)
    db = tmp_path / "q.db"
    _run(db, "create", "x")
    env = {"GITHUB_API_URL": fake_github.url, "WORKQ_GITHUB_PACE": "0"}
    env["PATH"] = f"{bin_dir}:{os.environ.get('PATH', '')}"
    done = _run(db, "sync", "github", "--repo", REPO, env=env)
    assert done.returncode == 0, done.stderr
    assert len(fake_github.issues()) == 1


def test_retry_and_forget(tmp_path: Path, fake_github: FakeGitHub) -> None:
    db = tmp_path / "q.db"
    _run(db, "create", "x")
    fake_github.inject_fault(
        "POST", "/repos/*/*/issues", kind="error", status=422, message="nope", count=1
    )
    fake_github.seed_label("priority:medium")
    fake_github.seed_label("type:task")
    fake_github.seed_label("status:backlog")
    parked = _run(db, "sync", "github", "--repo", REPO, env=_gh_env(fake_github))
    assert "1 parked as dead" in parked.stderr
    status = _run(db, "sync", "status").stdout
    assert "dead           1" in status and "nope" in status
    assert "1 rows due now" in _run(db, "sync", "retry").stdout
    again = _run(db, "sync", "github", "--repo", REPO, env=_gh_env(fake_github))
    assert "1 created" in again.stdout
    forgot = _run(db, "sync", "forget", "--repo", REPO)
    assert "No longer mirroring acme/widgets (1 links dropped)" in forgot.stdout
    assert "No GitHub mirror" in _run(db, "sync", "status").stdout


def test_serve_mirrors_in_the_background(tmp_path: Path, fake_github: FakeGitHub) -> None:
    import anyio
    from mcp import Client, StdioServerParameters

    db = tmp_path / "q.db"
    base = {k: v for k, v in os.environ.items() if not k.startswith(SCRUB)}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "workq.cli.main", "--db", str(db), "serve", "--sync-github", REPO],
        env={**base, "PYTHONPATH": str(PROJECT_ROOT / "src"), **_gh_env(fake_github)},
        cwd=str(tmp_path),
    )

    async def session() -> None:
        async with Client(params) as client:
            made = await client.call_tool("issue_create", {"title": "Mirrored while serving"})
            assert not made.is_error
            with anyio.fail_after(60):
                while not markers(fake_github):
                    await anyio.sleep(0.1)

    anyio.run(session)
    assert [i["title"] for i in fake_github.issues()] == ["Mirrored while serving"]


def test_serve_with_a_bad_token_serves_and_says_the_mirror_is_off(
    tmp_path: Path, fake_github: FakeGitHub
) -> None:
    """Offline-first: a mirror GitHub refuses stops neither the server nor its start."""
    done = _run(
        tmp_path / "q.db",
        "serve",
        "--sync-github",
        REPO,
        env=_gh_env(fake_github, GITHUB_TOKEN="wrong"),
        run=lambda *a, **k: workq_process(*a, **k, stdin=""),  # serves until stdin's EOF
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert f"GitHub mirror to {REPO} off until this is fixed (GITHUB_SETUP:" in done.stderr
    assert "refused the token" in done.stderr and "workq: serving stdio" in done.stderr


def test_sync_github_help_names_the_api_address_and_the_token(tmp_path: Path) -> None:
    said = " ".join(_run(tmp_path / "q.db", "sync", "github", "--help").stdout.split())
    assert "GITHUB_API_URL" in said and "GITHUB_TOKEN" in said
