"""submit_pr through a real ``workq serve`` in a git work tree whose ``origin`` is a real bare
repository on disk (the fake GitHub reads its branches): the push, the pull request's body
(``Fixes #N`` for the mirrored twin), its number and URL on the issue (issue_get, workflow
status, ``workq show``, the mirror), and a merge upstream completing the issue once across
two syncs.

The first test runs a real ``workq serve`` over stdio in the work tree (this file's end to
end test); the second runs the same server in this process, working in the work tree. The
``workq`` commands run in this process (``tools_helpers.workq``)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from tests.github.tools_helpers import git, github_server, serve_github, workq
from tests.github_fake.server import FakeGitHub
from tests.server.conftest import call_error, call_ok, error_of, text
from workq.config import Settings
from workq.services.queue import notes
from workq.services.runtime import open_queue

pytestmark = pytest.mark.anyio

LIMIT = 180
REPO = "acme/widgets"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def work_tree(root: Path) -> tuple[Path, Path]:
    """A bare ``remote.git`` with main, and a clone ``work`` on branch 1-fix-the-login."""
    bare = root / "remote.git"
    git(root, "init", "-q", "--bare", "-b", "main", str(bare))
    work = root / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    (work / "login.py").write_text("def login():\n    return False\n")
    git(work, "add", "login.py")
    git(work, "commit", "-q", "-m", "first")
    git(work, "remote", "add", "origin", str(bare))
    git(work, "push", "-q", "origin", "main")
    git(work, "checkout", "-q", "-b", "1-fix-the-login")
    (work / "login.py").write_text("def login():\n    return True\n")
    git(work, "commit", "-q", "-am", "Fix the login")
    return bare, work


def merged_events(db: Path, number: int) -> list[str]:
    queue = open_queue(Settings(db_path=db))
    try:
        return [e.kind for e in notes.history(queue, number) if e.kind == "pull_request_merged"]
    finally:
        queue.db.dispose()


async def test_submit_pr_then_a_merge_completes_the_issue_once(
    tmp_path: Path, fake_github: FakeGitHub
) -> None:
    bare, work = work_tree(tmp_path)
    fake_github.set_git_dir(str(bare))
    db = tmp_path / "queue.db"
    workq(db, fake_github, "create", "Fix the login", "-t", "bug")
    workq(db, fake_github, "sync", "github", "--repo", REPO, "--once")
    (twin,) = fake_github.issues()
    toolsets = "default,github,workflow"
    with anyio.fail_after(LIMIT):
        async with serve_github(work, fake_github, toolsets=toolsets, db=db) as client:
            unheld = await call_error(client, "submit_pr", title="fix: the login")
            assert error_of(unheld)["code"] == "INVALID_INPUT"
            assert "this session holds 0 issues" in text(unheld)

            await call_ok(client, "issue_claim", number=1)
            made = await call_ok(
                client,
                "submit_pr",
                title="fix: the login (#1)",
                description="Login returns True now.",
                labels=["ready-for-review"],
            )
            data = made.structured_content
            assert data is not None
            assert data["branch"] == "1-fix-the-login" and data["base"] == "main"
            assert data["fixes"] == twin["number"]
            assert data["reused"] is False
            assert data["labels"] == ["ready-for-review"]
            pr = data["pr_number"]
            assert data["pr_url"] == f"https://github.com/{REPO}/pull/{pr}"
            head = git(work, "rev-parse", "HEAD")
            assert git(bare, "rev-parse", "refs/heads/1-fix-the-login") == head

            (pull,) = fake_github.pulls()
            assert pull["title"] == "fix: the login (#1)"
            assert pull["head"]["sha"] == head
            body = pull["body"]
            assert body.startswith("Login returns True now.\n\nworkq issue #1: Fix the login")
            assert f"Fixes #{twin['number']}" in body
            diff = await call_ok(client, "github_get_pr_diff", pr_number=pr)
            assert "+    return True" in text(diff)

            shown = await call_ok(client, "issue_get", number=1)
            assert json.loads(text(shown))["pull_request"]["url"] == data["pr_url"]
            assert shown.structured_content is not None
            assert shown.structured_content["pull_request"] == {
                "number": pr,
                "url": data["pr_url"],
                "merged": False,
            }
            status = await call_ok(client, "get_workflow_status", issueNumber=1)
            assert status.structured_content is not None
            (flow,) = status.structured_content["workflows"]
            assert (flow["prNumber"], flow["prUrl"]) == (pr, data["pr_url"])

            again = await call_ok(client, "submit_pr", title="fix: the login (#1)")
            assert again.structured_content is not None
            assert again.structured_content["reused"] is True
            assert again.structured_content["pr_number"] == pr
            assert len(fake_github.pulls()) == 1

    show = workq(db, fake_github, "show", "1")
    assert f"{REPO}#{pr} {data['pr_url']}" in show

    first = workq(db, fake_github, "sync", "github", "--repo", REPO, "--once")
    assert "Merged pull requests" not in first
    assert [c["body"] for c in fake_github.comments(twin["number"])][-1].count(
        f"Pull request #{pr}: {data['pr_url']}"
    ) == 1
    assert "in_progress" in workq(db, fake_github, "show", "1", "--json")

    fake_github.merge_pull(pr)
    second = workq(db, fake_github, "sync", "github", "--repo", REPO, "--once")
    assert "Merged pull requests completed #1" in second
    third = workq(db, fake_github, "sync", "github", "--repo", REPO, "--once")
    assert "Merged pull requests" not in third
    assert merged_events(db, 1) == ["pull_request_merged"]
    shown_json = workq(db, fake_github, "show", "1", "--json")
    assert '"status": "done"' in shown_json
    assert '"merged_at": null' not in shown_json
    assert fake_github.issue(twin["number"])["state"] == "closed"


async def test_submit_pr_pushes_the_branch_of_the_issues_worktree(
    tmp_path: Path, fake_github: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server runs in the main checkout, on main; the issue's work is committed in its
    own worktree (a worktree per claim). submit_pr pushes and opens that branch."""
    bare, work = work_tree(tmp_path)
    git(work, "checkout", "-q", "main")
    fake_github.set_git_dir(str(bare))
    db = tmp_path / "queue.db"
    workq(db, fake_github, "create", "Speed up search", "-t", "feature")
    workq(db, fake_github, "repo", "add", "widgets", str(work))
    workq(db, fake_github, "repo", "assign", "1", "widgets")
    workq(db, fake_github, "worktree", "spawn", "1")
    tree = next((work / ".worktrees").iterdir())
    (tree / "search.py").write_text("FAST = True\n")
    git(tree, "add", "search.py")
    git(tree, "commit", "-q", "-m", "Speed up search")
    toolsets = "default,github"
    with anyio.fail_after(LIMIT):
        async with github_server(
            monkeypatch, work, fake_github, github_repo=REPO, toolsets=toolsets, db=db
        ) as client:
            await call_ok(client, "issue_claim", number=1)
            made = await call_ok(client, "submit_pr", title="feat: faster search (#1)")
    data = made.structured_content
    assert data is not None
    assert data["branch"] == "feature/1-speed-up-search"
    assert git(work, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert git(bare, "rev-parse", f"refs/heads/{data['branch']}") == git(tree, "rev-parse", "HEAD")
    (pull,) = fake_github.pulls()
    assert pull["head"]["ref"] == data["branch"]
