"""The GitHub tools' fail-fast start (contract C): ``workq serve --profile github-tools``
(or its old name, ``--toolsets github``) refuses to start without a token, with a token
GitHub refuses, or with no repository; ``--toolsets all`` leaves the profile out and
serves without a token. The repository comes from
the setting, the configured mirror, or the git remote.

What ``workq serve`` does before serving (the refusals, the start line on stderr) is this
file's subject: those tests run it as a real process. Where the repository comes from the
configured mirror, a server in this process shows it (``github_server``)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.github.tools_helpers import (
    clone_with_remote,
    github_server,
    serve_github,
    start_refused,
)
from tests.github_fake.server import FakeGitHub
from tests.server.conftest import call_error, call_ok, error_of, text
from workq.config import Settings
from workq.services.runtime import open_queue
from workq.services.sync import outbox

pytestmark = pytest.mark.anyio

LIMIT = 120


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_start_refused_without_a_token(tmp_path: Path, fake_github: FakeGitHub) -> None:
    said = start_refused(
        tmp_path, fake_github, "--toolsets", "github", "--github-repo", "acme/widgets", token=""
    )
    assert "GITHUB_SETUP: no GitHub token; set GITHUB_TOKEN" in said
    assert fake_github.requests() == []


def test_start_refused_with_a_wrong_token(tmp_path: Path, fake_github: FakeGitHub) -> None:
    said = start_refused(
        tmp_path,
        fake_github,
        "--toolsets",
        "default,github",
        "--github-repo",
        "acme/widgets",
        token="ghp_wrong",
    )
    assert f"GitHub at {fake_github.url} refused the token (401): Bad credentials" in said
    assert "set GITHUB_TOKEN to a valid token" in said


def test_start_refused_outside_a_git_repository(tmp_path: Path, fake_github: FakeGitHub) -> None:
    said = start_refused(tmp_path, fake_github, "--toolsets", "github")
    assert f"no GitHub repository: {tmp_path} is not in a git repository" in said
    assert "--github-repo OWNER/NAME" in said


def test_start_refused_for_an_unknown_repository(tmp_path: Path, fake_github: FakeGitHub) -> None:
    work = clone_with_remote(tmp_path, "git@github.com:acme/nothing.git")
    said = start_refused(work, fake_github, "--toolsets", "github")
    assert "unknown repository acme/nothing" in said


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
        outbox.configure(queue, "acme/mirrored")
    finally:
        queue.db.dispose()
    with anyio.fail_after(LIMIT):
        async with github_server(monkeypatch, tmp_path, fake_github, toolsets="github") as client:
            got = await call_ok(client, "github_get_issue", issue_number=1)
            assert got.structured_content is not None
            assert got.structured_content["title"] == "Mirrored"
