"""The GitHub tools' start: ``workq serve --profile github-tools`` (or its old name,
``--toolsets github``) checks its link to GitHub before serving and says on the start line
what is off and why; it never refuses to start (workq is offline-first): without a token,
with a token GitHub refuses, with no repository or with GitHub out of reach, each GitHub
call answers why, and works once the cause is gone. ``--toolsets all`` leaves the profile
out and serves without a token. The repository comes from
the setting, the configured mirror, or the git remote.

What ``workq serve`` does before serving (the refusals, the start line on stderr) is this
file's subject: those tests run it as a real process. Where the repository comes from the
configured mirror, a server in this process shows it (``github_server``)."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from tests.github.tools_helpers import (
    clone_with_remote,
    github_server,
    serve_github,
)
from tests.github_fake.server import FakeGitHub
from tests.server.conftest import call_error, call_ok, error_of, text
from workq.config import Settings
from workq.services.runtime import open_queue
from workq.services.sync import mirror_target

pytestmark = pytest.mark.anyio

LIMIT = 120


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _start_line(log: Path) -> str:
    return next(line for line in log.read_text().splitlines() if line.startswith("workq: serving"))


def _gh_shim(where: Path, token_file: Path) -> dict[str, str]:
    """A `gh` whose `gh auth token` prints the token once ``token_file`` holds one, as after
    `gh auth login` in another terminal: the server's environment never changes."""
    shim = where / "bin"
    shim.mkdir()
    gh = shim / "gh"
    gh.write_text(f'#!/bin/sh\n[ -s "{token_file}" ] && exec cat "{token_file}"\nexit 1\n')
    gh.chmod(0o755)
    return {"PATH": f"{shim}{os.pathsep}{os.environ.get('PATH', '')}"}


async def test_without_a_token_the_server_starts_and_the_tools_work_once_there_is_one(
    tmp_path: Path, fake_github: FakeGitHub
) -> None:
    """Offline-first: no token turns the GitHub tools off, not the server. Each GitHub call
    says why (which repository, what to set), the queue works, and the tools work as soon
    as a token can be had, with no restart."""
    fake_github.seed_issue("On GitHub")
    token_file = tmp_path / "token"
    with anyio.fail_after(LIMIT):
        async with serve_github(
            tmp_path,
            fake_github,
            "--github-repo",
            "acme/widgets",
            toolsets="default,github",
            token="",
            env=_gh_shim(tmp_path, token_file),
        ) as client:
            await call_ok(client, "issue_create", title="The queue works")
            refused = await call_error(client, "github_get_issue", issue_number=1)
            said = text(refused)
            assert "GITHUB_SETUP: no GitHub token for acme/widgets; set GITHUB_TOKEN" in said
            assert error_of(refused)["details"]["repo"] == "acme/widgets"
            token_file.write_text(fake_github.token + "\n")
            got = await call_ok(client, "github_get_issue", issue_number=1)
            assert got.structured_content is not None
            assert got.structured_content["title"] == "On GitHub"
    line = _start_line(tmp_path / "serve-run-a.log")
    assert "GitHub tools off until this is fixed (GITHUB_SETUP: no GitHub token for" in line


async def test_while_github_is_out_of_reach_the_server_starts_and_recovers_without_restart(
    tmp_path: Path, fake_github: FakeGitHub
) -> None:
    fake_github.seed_issue("Back online")
    # The check at start and the first call find no GitHub; the second call does.
    fake_github.inject_fault("GET", "/user", kind="disconnect", count=2)
    with anyio.fail_after(LIMIT):
        async with serve_github(
            tmp_path, fake_github, "--github-repo", "acme/widgets", toolsets="github"
        ) as client:
            refused = await call_error(client, "github_get_issue", issue_number=1)
            assert error_of(refused)["code"] == "GITHUB_UNREACHABLE"
            assert f"could not reach GitHub at {fake_github.url} for acme/widgets" in text(refused)
            got = await call_ok(client, "github_get_issue", issue_number=1)
            assert got.structured_content is not None
            assert got.structured_content["title"] == "Back online"
    line = _start_line(tmp_path / "serve-run-a.log")
    assert "GitHub tools off until this is fixed (GITHUB_UNREACHABLE" in line


@pytest.mark.parametrize("case", ["wrong token", "no git repository", "unknown repository"])
async def test_a_github_setup_that_cannot_work_leaves_the_server_serving(
    tmp_path: Path, fake_github: FakeGitHub, case: str
) -> None:
    args: tuple[str, ...] = ()
    token = None
    where = tmp_path
    if case == "wrong token":
        args, token = ("--github-repo", "acme/widgets"), "ghp_wrong"
        expected = (
            f"GitHub at {fake_github.url} refused the token (401) for acme/widgets: "
            "Bad credentials; set GITHUB_TOKEN to a valid token"
        )
    elif case == "no git repository":
        expected = f"no GitHub repository: {tmp_path} is not in a git repository"
    else:
        where = clone_with_remote(tmp_path, "git@github.com:acme/nothing.git")
        expected = "unknown repository acme/nothing"
    with anyio.fail_after(LIMIT):
        async with serve_github(
            where, fake_github, *args, toolsets="default,github", token=token
        ) as c:
            await call_ok(c, "issue_create", title="served")
            refused = await call_error(c, "github_list_issues")
            assert error_of(refused)["code"] == "GITHUB_SETUP"
            assert expected in text(refused)
    assert expected in _start_line(where / "serve-run-a.log")


async def test_all_toolsets_serve_without_a_token(tmp_path: Path, fake_github: FakeGitHub) -> None:
    """The GitHub tools are a profile, which ``all`` leaves out: no token is needed, and a
    GitHub tool's name tells the agent which profile holds it."""
    with anyio.fail_after(LIMIT):
        async with serve_github(tmp_path, fake_github, token="", toolsets="all") as client:
            await call_ok(client, "issue_create", title="The queue still works")
            refused = await call_error(client, "github_get_issue", issue_number=1)
            assert error_of(refused)["code"] == "UNKNOWN_TOOL"
            assert "'github-tools' profile" in text(refused)
            assert error_of(refused)["hint"].startswith(
                "start the server with --profile github-tools"
            )


async def test_the_repository_comes_from_the_git_remote(
    tmp_path: Path, fake_github: FakeGitHub
) -> None:
    fake_github.seed_issue("From the remote's repository")
    work = clone_with_remote(tmp_path, "https://github.com/acme/widgets.git")
    with anyio.fail_after(LIMIT):
        async with serve_github(work, fake_github, toolsets="github") as client:
            got = await call_ok(client, "github_get_issue", issue_number=1)
            assert got.structured_content is not None
            assert got.structured_content["title"] == "From the remote's repository"
    log = (work / "serve-run-a.log").read_text()
    assert f"GitHub tools on acme/widgets as {fake_github.login}" in log


async def test_the_repository_comes_from_the_configured_mirror(
    tmp_path: Path, fake_github: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_github.add_repo("acme/mirrored")
    fake_github.seed_issue("Mirrored", repo="acme/mirrored")
    queue = open_queue(Settings(db_path=tmp_path / "queue.db"))
    try:
        mirror_target.configure(queue, "acme/mirrored")
    finally:
        queue.db.dispose()
    with anyio.fail_after(LIMIT):
        async with github_server(monkeypatch, tmp_path, fake_github, toolsets="github") as client:
            got = await call_ok(client, "github_get_issue", issue_number=1)
            assert got.structured_content is not None
            assert got.structured_content["title"] == "Mirrored"


async def test_serve_with_a_mirror_but_no_token_serves_and_says_the_mirror_is_off(
    tmp_path: Path, fake_github: FakeGitHub
) -> None:
    """`workq serve --sync-github` is offline-first too: the mirror that cannot start says
    so on stderr and keeps trying; the queue serves (the change is queued for GitHub)."""
    with anyio.fail_after(LIMIT):
        async with serve_github(
            tmp_path,
            fake_github,
            "--sync-github",
            "acme/widgets",
            toolsets="default",
            token="",
            env=_gh_shim(tmp_path, tmp_path / "no-token"),
        ) as client:
            await call_ok(client, "issue_create", title="Mirrored later")
    log = (tmp_path / "serve-run-a.log").read_text()
    assert "GitHub mirror to acme/widgets off until this is fixed (GITHUB_SETUP: no GitHub" in log
    assert "workq: serving stdio" in log
    assert fake_github.requests() == []
