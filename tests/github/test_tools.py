"""Seed 001's seven GitHub tools through ``workq serve --toolsets github`` against the fake
GitHub: every tool's success and failure, GitHub's own error text kept, rate limits with
retry-after and no retry, a large diff cut with a warning, closing twice.

The pull request tools run against a real ``workq serve`` over stdio (this file's end to
end test: its diffs of 100-200 KB cross the wire); the others against the same server in
this process (``github_server``)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.github.tools_helpers import github_server, serve_github
from tests.github_fake.server import FakeGitHub
from tests.server.conftest import call_error, call_ok, error_of, text

pytestmark = pytest.mark.anyio

LIMIT = 120
REPO = ("--github-repo", "acme/widgets")
SEED_001 = {
    "github_create_pr",
    "github_list_issues",
    "github_get_issue",
    "github_pr_status",
    "github_get_pr_diff",
    "github_add_labels",
    "github_close_issue",
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def big_diff(size: int) -> str:
    lines = ["diff --git a/big.txt b/big.txt", "--- a/big.txt", "+++ b/big.txt", "@@ -0,0 +1 @@"]
    n = 0
    while sum(len(x) + 1 for x in lines) < size:
        lines.append(f"+line {n:08d} of a large generated file")
        n += 1
    return "\n".join(lines) + "\n"


async def test_pull_request_tools(tmp_path: Path, fake_github: FakeGitHub) -> None:
    fake_github.seed_branch("main")
    fake_github.seed_branch("feature")
    with anyio.fail_after(LIMIT):
        async with serve_github(tmp_path, fake_github, *REPO) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert names >= SEED_001

            made = await call_ok(
                client,
                "github_create_pr",
                title="Add the widget",
                body="Fixes #1",
                base="main",
                head="feature",
                draft=True,
            )
            data = made.structured_content
            assert data is not None
            assert data["draft"] is True
            assert (data["head"], data["base"]) == ("feature", "main")
            number = data["pr_number"]
            assert data["url"] == f"https://github.com/acme/widgets/pull/{number}"
            sent = [r for r in fake_github.requests() if r.method == "POST"]
            assert sent[-1].path == "/repos/acme/widgets/pulls"
            assert sent[-1].body == {
                "title": "Add the widget",
                "body": "Fixes #1",
                "head": "feature",
                "base": "main",
                "draft": True,
            }

            refused = await call_error(
                client, "github_create_pr", title="x", body="", base="main", head="nowhere"
            )
            error = error_of(refused)
            assert error["code"] == "GITHUB_REJECTED"
            assert error["details"]["github_message"] == "Validation Failed"
            assert error["details"]["errors"] == [
                {"resource": "PullRequest", "code": "invalid", "field": "head"}
            ]
            assert "Validation Failed" in text(refused)

            pull = fake_github.pulls()[0]
            sha = pull["head"]["sha"]
            fake_github.set_pull(number, mergeable=False, mergeable_state="dirty", draft=False)
            fake_github.add_check_run(sha, "tests", conclusion="success")
            fake_github.add_check_run(sha, "lint", conclusion="failure")
            fake_github.add_check_run(sha, "build", status="in_progress", conclusion=None)
            fake_github.add_status(sha, "ci/legacy", "success")
            fake_github.add_review(number, "APPROVED", user="alice")
            fake_github.add_review(number, "CHANGES_REQUESTED", user="bob")
            status = await call_ok(client, "github_pr_status", pr_number=number)
            found = status.structured_content
            assert found is not None
            assert found["mergeable"] is False
            assert found["mergeable_state"] == "dirty"
            assert {(c["name"], c["conclusion"]) for c in found["checks"]} == {
                ("tests", "success"),
                ("lint", "failure"),
                ("build", None),
                ("ci/legacy", "success"),
            }
            assert (found["checks_passed"], found["checks_failed"], found["checks_pending"]) == (
                2,
                1,
                1,
            )
            assert (found["approvals"], found["changes_requested"]) == (1, 1)
            reasons = found["not_mergeable_because"]
            assert "merge conflicts with main" in reasons
            assert "failing checks: lint" in reasons
            assert "1 review(s) request changes" in reasons
            assert "lint: failure" in text(status)

            fake_github.add_review(number, "APPROVED", user="bob")
            fake_github.set_pull(number, mergeable=True, mergeable_state="clean")
            clean_sha = fake_github.pulls()[0]["head"]["sha"]
            assert clean_sha == sha
            again = await call_ok(client, "github_pr_status", pr_number=number)
            assert again.structured_content is not None
            assert again.structured_content["approvals"] == 2
            assert (
                "merge conflicts with main" not in again.structured_content["not_mergeable_because"]
            )

            missing = await call_error(client, "github_pr_status", pr_number=999)
            assert error_of(missing)["code"] == "GITHUB_NOT_FOUND"
            assert "Not Found" in text(missing)

            small = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"
            fake_github.set_pull(number, diff=small)
            diff = await call_ok(client, "github_get_pr_diff", pr_number=number)
            assert diff.structured_content is not None
            assert diff.structured_content["diff"] == small
            assert diff.structured_content["truncated"] is False
            assert diff.structured_content["warning"] is None
            diffs = [r for r in fake_github.requests() if r.path.endswith(f"/pulls/{number}")]
            assert diffs[-1].headers["accept"] == "application/vnd.github.diff"

            large = big_diff(150_000)
            fake_github.set_pull(number, diff=large)
            cut = await call_ok(client, "github_get_pr_diff", pr_number=number)
            data = cut.structured_content
            assert data is not None
            assert data["truncated"] is True
            assert data["size"] == len(large.encode())
            assert len(data["diff"].encode()) <= 100_000
            assert large.startswith(data["diff"]) and data["diff"].endswith("\n")
            assert "diff truncated" in data["warning"] and "max_size=100000" in data["warning"]
            assert text(cut).startswith("WARNING: diff truncated")
            wider = await call_ok(client, "github_get_pr_diff", pr_number=number, max_size=200_000)
            assert wider.structured_content is not None
            assert wider.structured_content["diff"] == large
            nothing = await call_error(client, "github_get_pr_diff", pr_number=999)
            assert error_of(nothing)["code"] == "GITHUB_NOT_FOUND"


async def test_issue_tools(
    tmp_path: Path, fake_github: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_github.seed_issue("Fix the login", labels=["bug"], body="It fails")
    fake_github.seed_issue("Write docs", labels=["docs"])
    fake_github.seed_pull_request("A pull request is not an issue", labels=["bug"])
    fake_github.seed_issue("Old", state="closed", labels=["bug"])
    fake_github.seed_label("existing")
    with anyio.fail_after(LIMIT):
        async with github_server(monkeypatch, tmp_path, fake_github, github_repo=REPO[1]) as client:
            listed = await call_ok(client, "github_list_issues")
            data = listed.structured_content
            assert data is not None
            assert [i["number"] for i in data["issues"]] == [2, 1]
            assert data["has_more"] is False
            bugs = await call_ok(client, "github_list_issues", label="bug", state="all")
            assert bugs.structured_content is not None
            assert [i["number"] for i in bugs.structured_content["issues"]] == [4, 1]
            one = await call_ok(client, "github_list_issues", limit=1)
            assert one.structured_content is not None
            assert one.structured_content["count"] == 1
            assert one.structured_content["has_more"] is True

            got = await call_ok(client, "github_get_issue", issue_number=1)
            issue = got.structured_content
            assert issue is not None
            assert (issue["title"], issue["body"], issue["labels"]) == (
                "Fix the login",
                "It fails",
                ["bug"],
            )
            assert issue["assignees"] == [] and issue["comments"] == 0
            absent = await call_error(client, "github_get_issue", issue_number=99)
            assert error_of(absent)["code"] == "GITHUB_NOT_FOUND"
            assert error_of(absent)["details"]["github_message"] == "Not Found"

            labelled = await call_ok(
                client, "github_add_labels", issue_number=1, labels=["Existing", "needs-review"]
            )
            data = labelled.structured_content
            assert data is not None
            assert data["created"] == ["needs-review"]
            assert data["labels"] == ["bug", "existing", "needs-review"]
            assert {lb["name"] for lb in fake_github.labels()} >= {"existing", "needs-review"}
            bad = await call_error(client, "github_add_labels", issue_number=99, labels=["x"])
            assert error_of(bad)["code"] == "GITHUB_NOT_FOUND"

            closed = await call_ok(
                client, "github_close_issue", issue_number=1, comment="Fixed in #3"
            )
            assert closed.structured_content is not None
            assert closed.structured_content["already_closed"] is False
            assert closed.structured_content["comment_url"]
            assert fake_github.issue(1)["state"] == "closed"
            assert fake_github.issue(1)["state_reason"] == "completed"
            writes = len(fake_github.writes())
            twice = await call_ok(
                client, "github_close_issue", issue_number=1, comment="Fixed in #3"
            )
            assert twice.structured_content is not None
            assert twice.structured_content["already_closed"] is True
            assert text(twice) == "Issue #1 was already closed"
            assert len(fake_github.writes()) == writes
            assert [c["body"] for c in fake_github.comments(1)] == ["Fixed in #3"]
            plain = await call_ok(client, "github_close_issue", issue_number=2)
            assert plain.structured_content is not None
            assert plain.structured_content["comment_url"] is None
            assert fake_github.comments(2) == []
            gone = await call_error(client, "github_close_issue", issue_number=99)
            assert error_of(gone)["code"] == "GITHUB_NOT_FOUND"


async def test_rate_limits_answer_retry_after_and_are_not_retried(
    tmp_path: Path, fake_github: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_github.seed_issue("One")
    with anyio.fail_after(LIMIT):
        async with github_server(monkeypatch, tmp_path, fake_github, github_repo=REPO[1]) as client:
            fake_github.clear_requests()
            fake_github.inject_fault("GET", "/repos/*/*/issues", kind="rate_limit", reset_in=600)
            primary = await call_error(client, "github_list_issues")
            error = error_of(primary)
            assert error["code"] == "GITHUB_RATE_LIMITED"
            assert error["details"]["secondary"] is False
            assert 590 <= error["details"]["retry_after"] <= 601
            assert "API rate limit exceeded" in error["details"]["github_message"]
            assert "retry_after=" in text(primary)
            assert len([r for r in fake_github.requests() if r.path.endswith("/issues")]) == 1

            fake_github.inject_fault(
                "POST", "/repos/*/*/issues/*/labels", kind="secondary_rate_limit", retry_after=42
            )
            secondary = await call_error(client, "github_add_labels", issue_number=1, labels=["a"])
            error = error_of(secondary)
            assert error["code"] == "GITHUB_RATE_LIMITED"
            assert error["details"]["secondary"] is True
            assert 41 <= error["details"]["retry_after"] <= 42
            assert "secondary rate limit" in error["details"]["github_message"]
            posts = [r for r in fake_github.requests() if r.path.endswith("/1/labels")]
            assert len(posts) == 1
            # The next call goes through: nothing was held back or queued.
            fine = await call_ok(client, "github_list_issues")
            assert fine.structured_content is not None
            assert fine.structured_content["count"] == 1
