"""The GitHub client against the fake GitHub over real HTTP on 127.0.0.1, and the fake itself."""

from __future__ import annotations

import json
import logging
import re
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx2
import pytest

from tests.github_fake.server import (
    PROJECT_ROOT,
    FakeGitHub,
    FakeGitHubProcess,
    RemoteFakeGitHub,
    _path_matches,
)
from workq.errors import GitHubError
from workq.github import (
    API_VERSION,
    AuthFailed,
    GitHubClient,
    GitHubRejected,
    MovedOnGitHub,
    NotFoundOnGitHub,
    RateLimited,
    Unclear,
    rate_limit_retry_at,
)

REPO = "acme/widgets"


def _close_to(moment: datetime, expected: datetime, slack: float = 3.0) -> bool:
    return abs((moment - expected).total_seconds()) <= slack


@pytest.fixture
def fast_client(fake_github: FakeGitHub) -> Iterator[GitHubClient]:
    """A client with a short timeout, for the timeout faults."""
    with GitHubClient(
        fake_github.token, base_url=fake_github.url, timeout=0.3, trust_env=False
    ) as client:
        yield client


def _raw(fake: FakeGitHub) -> httpx2.Client:
    return httpx2.Client(base_url=fake.url, trust_env=False, timeout=5.0)


# --------------------------------------------------------------------------------------------
# Endpoints


def test_get_user_sends_the_github_headers(fake_github: FakeGitHub, gh_client: GitHubClient):
    user = gh_client.get_user()

    assert user.login == fake_github.login
    [request] = fake_github.requests()
    assert (request.method, request.path) == ("GET", "/user")
    assert request.headers["accept"] == "application/vnd.github+json"
    assert request.headers["x-github-api-version"] == API_VERSION
    assert request.headers["user-agent"].startswith("workq/")
    assert request.headers["authorization"] == "Bearer ***"


def test_get_repo_reports_push_permission(fake_github: FakeGitHub, gh_client: GitHubClient):
    fake_github.add_repo("acme/readonly", push=False)

    repo = gh_client.get_repo(REPO)
    assert repo.full_name == REPO
    assert repo.can_push
    assert repo.permissions is not None and repo.permissions.push

    assert not gh_client.get_repo("acme/readonly").can_push


def test_create_get_and_patch_an_issue(fake_github: FakeGitHub, gh_client: GitHubClient):
    created = gh_client.create_issue(
        REPO, title="Fix it", body="body <!-- workq:id=7 -->", labels=["priority:1", "type:bug"]
    )
    assert created.number == 1
    assert created.state == "open" and created.state_reason is None
    assert created.label_names == ["priority:1", "type:bug"]
    assert created.user is not None and created.user.login == fake_github.login
    assert created.html_url.endswith("/acme/widgets/issues/1")
    assert not created.is_pull_request

    fetched = gh_client.get_issue(REPO, 1)
    assert fetched.body == "body <!-- workq:id=7 -->"
    assert fetched.created_at.tzinfo is not None

    patched = gh_client.update_issue(REPO, 1, title="Fixed it", labels=["status:done"])
    assert patched.title == "Fixed it"
    assert patched.label_names == ["status:done"]

    closed = gh_client.update_issue(REPO, 1, state="closed", state_reason="not_planned")
    assert (closed.state, closed.state_reason) == ("closed", "not_planned")
    assert closed.closed_at is not None

    # state_reason alone (state unchanged) is ignored, as on GitHub
    same = gh_client.update_issue(REPO, 1, state_reason="completed")
    assert same.state_reason == "not_planned"

    reopened = gh_client.update_issue(REPO, 1, state="open")
    assert (reopened.state, reopened.state_reason) == ("open", "reopened")

    patch = fake_github.writes()[-1]
    assert (patch.method, patch.path, patch.body) == (
        "PATCH",
        "/repos/acme/widgets/issues/1",
        {"state": "open"},
    )


def test_update_issue_needs_a_field(gh_client: GitHubClient):
    with pytest.raises(ValueError):
        gh_client.update_issue(REPO, 1)


def test_list_and_create_labels(fake_github: FakeGitHub, gh_client: GitHubClient):
    for n in range(130):
        fake_github.seed_label(f"label-{n:03d}")

    created = gh_client.create_label(REPO, "priority:1", color="#B60205", description="urgent")
    assert created is not None
    assert (created.name, created.color, created.description) == ("priority:1", "b60205", "urgent")

    labels = gh_client.list_labels(REPO)
    assert len(labels) == 131
    assert len({label.name for label in labels}) == 131
    assert len([r for r in fake_github.requests() if r.path.endswith("/labels")]) == 3


def test_create_label_already_exists_is_success(fake_github: FakeGitHub, gh_client: GitHubClient):
    # someone else created it between our list and our create (different case, too)
    fake_github.seed_label("Priority:1", color="ff0000")

    assert gh_client.create_label(REPO, "priority:1", color="00ff00") is None
    assert [lb["name"] for lb in fake_github.labels()] == ["Priority:1"]
    assert fake_github.requests()[-1].status == 422


def test_create_label_other_422_is_rejected(gh_client: GitHubClient):
    with pytest.raises(GitHubRejected) as info:
        gh_client.create_label(REPO, "x", color="not-a-colour")
    assert info.value.status == 422
    assert info.value.errors[0]["code"] == "invalid"
    assert info.value.github_message == "Validation Failed"


def test_comments(fake_github: FakeGitHub, gh_client: GitHubClient):
    fake_github.seed_issue("x")

    comment = gh_client.create_comment(REPO, 1, "first <!-- workq:comment=1 -->")
    gh_client.create_comment(REPO, 1, "second")

    assert comment.body == "first <!-- workq:comment=1 -->"
    assert comment.user is not None and comment.user.login == fake_github.login
    page = gh_client.list_comments(REPO, 1, per_page=1)
    assert [c.body for c in page.items] == ["first <!-- workq:comment=1 -->"]
    assert page.has_more and page.next_url is not None
    second = gh_client.list_comments(REPO, 1, page_url=page.next_url)
    assert [c.body for c in second.items] == ["second"]
    assert not second.has_more
    assert fake_github.issue(1)["comments"] == 2


def test_get_rate_limit(fake_github: FakeGitHub, gh_client: GitHubClient):
    fake_github.set_rate_limit(limit=5000, remaining=1234)

    info = gh_client.get_rate_limit()

    assert (info.limit, info.remaining) == (5000, 1234)
    assert info.reset > datetime.now(UTC)
    assert gh_client.last_rate_limit is not None
    assert gh_client.last_rate_limit.remaining == 1234  # /rate_limit costs nothing


def test_rate_limit_headers_are_tracked(fake_github: FakeGitHub, gh_client: GitHubClient):
    gh_client.get_user()
    first = gh_client.last_rate_limit
    gh_client.get_user()
    second = gh_client.last_rate_limit

    assert first is not None and second is not None
    assert second.remaining == first.remaining - 1
    assert second.used == 2 and second.resource == "core"


def test_base_url_with_a_path_prefix():
    # GitHub Enterprise serves the API under /api/v3
    with (
        FakeGitHub(path_prefix="/api/v3") as fake,
        GitHubClient(fake.token, base_url=fake.url + "/", trust_env=False) as client,
    ):
        assert fake.url.endswith("/api/v3")
        client.create_issue(REPO, title="a")
        client.create_issue(REPO, title="b")
        page = client.list_issues(REPO, per_page=1)
        assert page.next_url is not None and "/api/v3/repos/" in page.next_url
        assert [i.title for i in client.list_issues(REPO, page_url=page.next_url).items] == ["a"]


# --------------------------------------------------------------------------------------------
# Listing issues: pagination, filters, ETags, pull requests


def test_pagination_follows_link_past_page_one(fake_github: FakeGitHub, gh_client: GitHubClient):
    for n in range(250):
        fake_github.seed_issue(f"issue {n}", state="closed" if n % 5 == 0 else "open")

    numbers: list[int] = []
    page = gh_client.list_issues(REPO, state="all", sort="created", direction="asc")
    pages = 1
    numbers += [i.number for i in page.items]
    while page.next_url:
        page = gh_client.list_issues(REPO, page_url=page.next_url)
        numbers += [i.number for i in page.items]
        pages += 1

    assert pages == 3
    assert numbers == list(range(1, 251))
    gets = [r for r in fake_github.requests() if r.path == "/repos/acme/widgets/issues"]
    assert [r.param("page") for r in gets] == [None, "2", "3"]
    assert all(r.param("state") == "all" and r.param("direction") == "asc" for r in gets)


def test_pagination_with_opaque_cursor_links(fake_github: FakeGitHub, gh_client: GitHubClient):
    fake_github.set_options(cursor_links=True)
    for n in range(5):
        fake_github.seed_issue(f"issue {n}")

    seen: list[int] = []
    page = gh_client.list_issues(REPO, per_page=2, direction="asc")
    seen += [i.number for i in page.items]
    while page.next_url:
        assert "after=" in page.next_url
        assert not re.search(r"[?&]page=", page.next_url)
        page = gh_client.list_issues(REPO, page_url=page.next_url)
        seen += [i.number for i in page.items]

    assert seen == [1, 2, 3, 4, 5]


def test_link_outside_the_api_is_refused(fake_github: FakeGitHub, gh_client: GitHubClient):
    with pytest.raises(GitHubRejected):
        gh_client.list_issues(REPO, page_url="http://127.0.0.2:9/repos/acme/widgets/issues")
    with pytest.raises(GitHubRejected):
        gh_client.list_issues(REPO, page_url="https://evil.example/repos/acme/widgets/issues")
    assert fake_github.requests() == []


def test_list_filters_since_creator_labels_sort(fake_github: FakeGitHub, gh_client: GitHubClient):
    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    fake_github.seed_issue("old", created_at=t0, updated_at=t0, labels=["type:bug"])
    fake_github.seed_issue(
        "mine",
        created_at=t0 + timedelta(hours=1),
        updated_at=t0 + timedelta(hours=3),
        labels=["type:bug", "priority:1"],
    )
    fake_github.seed_issue(
        "theirs",
        user="a-human",
        created_at=t0 + timedelta(hours=2),
        updated_at=t0 + timedelta(hours=2),
        state="closed",
    )

    page = gh_client.list_issues(
        REPO, state="all", since=t0 + timedelta(hours=1), sort="updated", direction="asc"
    )
    assert [i.title for i in page.items] == ["theirs", "mine"]

    mine = gh_client.list_issues(REPO, state="all", creator=fake_github.login)
    assert [i.title for i in mine.items] == ["mine", "old"]

    labelled = gh_client.list_issues(REPO, labels=["TYPE:bug", "priority:1"])
    assert [i.title for i in labelled.items] == ["mine"]

    assert [i.title for i in gh_client.list_issues(REPO, state="closed").items] == ["theirs"]
    assert [i.title for i in gh_client.list_issues(REPO).items] == ["mine", "old"]

    first = fake_github.requests()[0]
    assert first.param("since") == "2025-01-01T01:00:00Z"
    assert first.param("per_page") == "100"


def test_etag_gives_not_modified_until_something_changes(
    fake_github: FakeGitHub, gh_client: GitHubClient
):
    fake_github.seed_issue("a")
    first = gh_client.list_issues(REPO, state="all")
    assert first.etag is not None and first.etag.startswith('W/"')
    assert not first.not_modified
    remaining = gh_client.last_rate_limit.remaining if gh_client.last_rate_limit else None

    again = gh_client.list_issues(REPO, state="all", etag=first.etag)
    assert again.not_modified
    assert again.items == [] and again.etag == first.etag and not again.has_more
    assert fake_github.requests()[-1].status == 304
    assert fake_github.requests()[-1].headers["if-none-match"] == first.etag
    assert gh_client.last_rate_limit is not None
    assert gh_client.last_rate_limit.remaining == remaining  # a 304 costs no quota

    gh_client.update_issue(REPO, 1, title="changed")
    changed = gh_client.list_issues(REPO, state="all", etag=first.etag)
    assert not changed.not_modified
    assert [i.title for i in changed.items] == ["changed"]
    assert changed.etag != first.etag


def test_pull_requests_are_flagged(fake_github: FakeGitHub, gh_client: GitHubClient):
    fake_github.seed_issue("an issue")
    fake_github.seed_pull_request("a pull request")

    items = gh_client.list_issues(REPO, state="all", direction="asc").items

    assert [(i.title, i.is_pull_request) for i in items] == [
        ("an issue", False),
        ("a pull request", True),
    ]
    assert gh_client.get_issue(REPO, 2).is_pull_request


# --------------------------------------------------------------------------------------------
# Errors


def test_bad_token_is_auth_failed_and_never_shown(
    fake_github: FakeGitHub, caplog: pytest.LogCaptureFixture
):
    secret = "ghp_this_is_not_the_right_token_0123456789"
    caplog.set_level(logging.DEBUG)
    with GitHubClient(secret, base_url=fake_github.url, trust_env=False) as client:
        with pytest.raises(AuthFailed) as info:
            client.get_user()
        text = " ".join([str(info.value), repr(info.value), json.dumps(info.value.to_dict())])
        assert secret not in text
        assert secret not in repr(client)
    assert info.value.status == 401
    assert info.value.github_message == "Bad credentials"
    assert isinstance(info.value, GitHubError)
    assert secret not in caplog.text


def test_the_good_token_is_never_logged(
    fake_github: FakeGitHub, gh_client: GitHubClient, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.DEBUG)
    gh_client.create_issue(REPO, title="x")
    fake_github.inject_fault("GET", "**", status=500)
    with pytest.raises(Unclear) as info:
        gh_client.get_issue(REPO, 1)
    assert fake_github.token not in caplog.text
    assert fake_github.token not in json.dumps(info.value.to_dict())
    assert fake_github.token not in repr(gh_client)


def test_forbidden_without_rate_limit_is_auth_failed(
    fake_github: FakeGitHub, gh_client: GitHubClient
):
    fake_github.add_repo("acme/readonly", push=False)

    with pytest.raises(AuthFailed) as info:
        gh_client.create_issue("acme/readonly", title="x")

    assert info.value.status == 403
    assert fake_github.issues(repo="acme/readonly") == []


def test_unknown_repo_and_issue_are_not_found(fake_github: FakeGitHub, gh_client: GitHubClient):
    with pytest.raises(NotFoundOnGitHub) as info:
        gh_client.get_repo("acme/nothing-here")
    assert info.value.status == 404 and not info.value.gone

    with pytest.raises(NotFoundOnGitHub):
        gh_client.get_issue(REPO, 99)


def test_deleted_issue_is_gone(fake_github: FakeGitHub, gh_client: GitHubClient):
    fake_github.seed_issue("x")
    fake_github.delete_issue(1)

    with pytest.raises(NotFoundOnGitHub) as info:
        gh_client.update_issue(REPO, 1, state="closed")

    assert info.value.status == 410 and info.value.gone
    assert gh_client.list_issues(REPO, state="all").items == []


def test_transferred_issue_is_moved(fake_github: FakeGitHub, gh_client: GitHubClient):
    fake_github.add_repo("acme/other")
    fake_github.seed_issue("x")
    moved = fake_github.transfer_issue(1, "acme/other")

    with pytest.raises(MovedOnGitHub) as info:
        gh_client.get_issue(REPO, 1)

    assert info.value.status == 301
    assert info.value.location == moved["url"]
    assert gh_client.get_issue("acme/other", moved["number"]).title == "x"


def test_primary_rate_limit(fake_github: FakeGitHub, gh_client: GitHubClient):
    fake_github.inject_fault("GET", "/user", kind="rate_limit", reset_in=120)

    with pytest.raises(RateLimited) as info:
        gh_client.get_user()

    assert not info.value.secondary
    assert info.value.status == 403
    assert _close_to(info.value.retry_at, datetime.now(UTC) + timedelta(seconds=120))
    assert gh_client.get_user().login == fake_github.login  # only the next request


def test_primary_rate_limit_when_quota_runs_out(fake_github: FakeGitHub, gh_client: GitHubClient):
    fake_github.set_rate_limit(limit=60, remaining=1, reset_in=900)
    gh_client.get_user()

    with pytest.raises(RateLimited) as info:
        gh_client.get_user()

    assert not info.value.secondary
    assert _close_to(info.value.retry_at, datetime.now(UTC) + timedelta(seconds=900))


def test_secondary_rate_limit_with_retry_after(fake_github: FakeGitHub, gh_client: GitHubClient):
    fake_github.inject_fault(
        "POST", "/repos/*/*/issues", kind="secondary_rate_limit", retry_after=30
    )

    with pytest.raises(RateLimited) as info:
        gh_client.create_issue(REPO, title="x")

    assert info.value.secondary
    assert _close_to(info.value.retry_at, datetime.now(UTC) + timedelta(seconds=30))
    assert fake_github.issues() == []


@pytest.mark.parametrize("status", [403, 429])
def test_secondary_rate_limit_without_retry_after_waits_a_minute(
    fake_github: FakeGitHub, gh_client: GitHubClient, status: int
):
    fake_github.inject_fault("POST", "**", kind="secondary_rate_limit", status=status)

    with pytest.raises(RateLimited) as info:
        gh_client.create_issue(REPO, title="x")

    assert info.value.secondary and info.value.status == status
    assert info.value.retry_at >= datetime.now(UTC) + timedelta(seconds=58)


def test_write_budget_gives_secondary_limits(fake_github: FakeGitHub, gh_client: GitHubClient):
    fake_github.set_write_budget(3, window=60)
    for n in range(3):
        gh_client.create_issue(REPO, title=f"t{n}")

    with pytest.raises(RateLimited) as info:
        gh_client.create_issue(REPO, title="one too many")

    assert info.value.secondary
    assert _close_to(info.value.retry_at, datetime.now(UTC) + timedelta(seconds=60))
    assert gh_client.get_issue(REPO, 1).title == "t0"  # reads are not limited
    fake_github.advance_clock(61)
    gh_client.create_issue(REPO, title="later")
    assert len(fake_github.issues()) == 4


def test_502_after_apply_is_unclear_and_the_issue_exists(
    fake_github: FakeGitHub, gh_client: GitHubClient
):
    fake_github.inject_fault("POST", "/repos/*/*/issues", status=502, when="after")

    with pytest.raises(Unclear) as info:
        gh_client.create_issue(REPO, title="created anyway", body="<!-- workq:id=1 -->")

    assert info.value.status == 502 and info.value.maybe_applied
    assert [i["title"] for i in fake_github.issues()] == ["created anyway"]
    assert len(fake_github.writes()) == 1  # the client did not retry


def test_500_before_apply_is_unclear_and_nothing_changed(
    fake_github: FakeGitHub, gh_client: GitHubClient
):
    fake_github.inject_fault("POST", "**", status=500, when="before")

    with pytest.raises(Unclear) as info:
        gh_client.create_issue(REPO, title="x")

    assert info.value.status == 500
    assert info.value.github_message == "Server Error"
    assert fake_github.issues() == []
    assert len(fake_github.requests()) == 1


def test_503_retry_after_is_reported(fake_github: FakeGitHub, gh_client: GitHubClient):
    fake_github.inject_fault("GET", "/user", status=503)
    with pytest.raises(Unclear) as info:
        gh_client.get_user()
    assert info.value.status == 503 and info.value.retry_at is None


def test_timeout_after_apply_is_unclear(fake_github: FakeGitHub, fast_client: GitHubClient):
    # The fake holds the request far longer than the client's 0.3 s (then drops it: a client
    # that waited that long would report a dropped connection, not its own timeout).
    fake_github.inject_fault("POST", "/repos/*/*/issues", kind="timeout", when="after", delay=60)

    answered = r"^GitHub did not answer POST /repos/acme/widgets/issues within 0\.3 s$"
    with pytest.raises(Unclear, match=answered) as info:
        fast_client.create_issue(REPO, title="slow")

    assert isinstance(info.value.__cause__, httpx2.ReadTimeout)
    assert info.value.maybe_applied and info.value.status is None
    assert [i["title"] for i in fake_github.issues()] == ["slow"]
    assert len(fake_github.writes()) == 1


def test_timeout_before_apply_is_unclear(fake_github: FakeGitHub, fast_client: GitHubClient):
    fake_github.inject_fault("PATCH", "**", kind="timeout", when="before", delay=3)
    fake_github.seed_issue("x")

    with pytest.raises(Unclear):
        fast_client.update_issue(REPO, 1, state="closed")

    assert fake_github.issue(1)["state"] == "open"
    assert fast_client.get_issue(REPO, 1).state == "open"  # the client still works


def test_dropped_connection_is_unclear(fake_github: FakeGitHub, gh_client: GitHubClient):
    fake_github.inject_fault("POST", "**", kind="disconnect", when="after")

    with pytest.raises(Unclear) as info:
        gh_client.create_comment(REPO, fake_github.seed_issue("x")["number"], "hello")

    assert info.value.maybe_applied
    assert [c["body"] for c in fake_github.comments(1)] == ["hello"]


def test_connection_refused_is_unclear_but_not_applied():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with (
        GitHubClient("t", base_url=f"http://127.0.0.1:{port}", trust_env=False) as client,
        pytest.raises(Unclear) as info,
    ):
        client.get_user()
    assert not info.value.maybe_applied


def test_the_client_never_retries(fake_github: FakeGitHub, gh_client: GitHubClient):
    fake_github.inject_fault("*", "**", status=502, count=10)

    for call in (
        lambda: gh_client.get_user(),
        lambda: gh_client.create_issue(REPO, title="x"),
        lambda: gh_client.create_label(REPO, "x", color="ffffff"),
    ):
        with pytest.raises(Unclear):
            call()

    assert len(fake_github.requests()) == 3


def test_unreadable_success_is_unclear(fake_github: FakeGitHub):
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(201, text="<html>proxy page</html>")

    with (
        GitHubClient("t", transport=httpx2.MockTransport(handler)) as client,
        pytest.raises(Unclear) as info,
    ):
        client.create_issue(REPO, title="x")
    assert info.value.status == 201


# --------------------------------------------------------------------------------------------
# Pure helpers


def test_rate_limit_rule():
    now = datetime(2025, 1, 1, tzinfo=UTC)
    reset = int((now + timedelta(minutes=10)).timestamp())
    primary = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)}

    # retry-after wins over the reset
    assert rate_limit_retry_at(403, {**primary, "retry-after": "5"}, None, now) == (
        now + timedelta(seconds=5),
        False,
    )
    assert rate_limit_retry_at(403, primary, "API rate limit exceeded", now) == (
        now + timedelta(minutes=10),
        False,
    )
    assert rate_limit_retry_at(
        403, {"x-ratelimit-remaining": "42"}, "You have exceeded a secondary rate limit", now
    ) == (now + timedelta(seconds=60), True)
    assert rate_limit_retry_at(429, {}, None, now) == (now + timedelta(seconds=60), True)
    assert rate_limit_retry_at(403, {"x-ratelimit-remaining": "42"}, "Forbidden", now) is None
    assert rate_limit_retry_at(500, primary, None, now) is None
    http_date = {"retry-after": "Wed, 01 Jan 2025 00:02:00 GMT"}
    assert rate_limit_retry_at(429, http_date, None, now) == (now + timedelta(minutes=2), True)


def test_bad_arguments(gh_client: GitHubClient):
    with pytest.raises(ValueError):
        GitHubClient("")
    with pytest.raises(ValueError):
        gh_client.get_repo("no-slash")
    with pytest.raises(ValueError):
        gh_client.get_issue(REPO, 0)


# --------------------------------------------------------------------------------------------
# The fake itself


def test_fake_answers_401_without_a_token_and_sends_rate_headers(fake_github: FakeGitHub):
    with _raw(fake_github) as http:
        missing = http.get("/user")
        wrong = http.get("/user", headers={"Authorization": "token nope"})
        good = http.get("/user", headers={"Authorization": f"token {fake_github.token}"})
    assert missing.status_code == 401 and missing.json()["message"] == "Requires authentication"
    assert wrong.status_code == 401 and wrong.json()["message"] == "Bad credentials"
    assert good.status_code == 200
    for name in ("limit", "remaining", "reset", "used"):
        assert f"x-ratelimit-{name}" in good.headers


def test_fake_link_headers_and_label_conflicts(fake_github: FakeGitHub):
    for n in range(7):
        fake_github.seed_issue(f"i{n}")
    auth = {"Authorization": f"Bearer {fake_github.token}"}
    with _raw(fake_github) as http:
        page2 = http.get(f"/repos/{REPO}/issues", params={"per_page": 3, "page": 2}, headers=auth)
        links = {rel: link["url"] for rel, link in page2.links.items()}
        assert set(links) == {"prev", "next", "last", "first"}
        assert "page=3" in links["next"] and "page=3" in links["last"]
        last = http.get(links["last"], headers=auth)
        assert "next" not in last.links
        assert len(last.json()) == 1

        assert http.post(f"/repos/{REPO}/labels", json={"name": "Bug"}, headers=auth).is_success
        dup = http.post(f"/repos/{REPO}/labels", json={"name": "bUG"}, headers=auth)
        assert dup.status_code == 422
        assert dup.json()["errors"][0]["code"] == "already_exists"

        unknown = http.get("/repos/nobody/nothing", headers=auth)
        assert unknown.status_code == 404


def test_fake_issue_label_endpoints(fake_github: FakeGitHub):
    fake_github.seed_issue("x", labels=["a"])
    auth = {"Authorization": f"Bearer {fake_github.token}"}
    base = f"/repos/{REPO}/issues/1/labels"
    with _raw(fake_github) as http:
        added = http.post(base, json={"labels": ["b", "a/b c"]}, headers=auth).json()
        assert [lb["name"] for lb in added] == ["a", "b", "a/b c"]
        left = http.delete(base + "/a%2Fb%20c", headers=auth).json()
        assert [lb["name"] for lb in left] == ["a", "b"]
        assert http.delete(base + "/zzz", headers=auth).status_code == 404
        assert http.delete(base, headers=auth).status_code == 204
        assert http.get(base, headers=auth).json() == []
    assert {lb["name"] for lb in fake_github.labels()} == {"a", "b", "a/b c"}


def test_fake_reset_and_fault_bookkeeping(fake_github: FakeGitHub, gh_client: GitHubClient):
    fake_github.seed_issue("x")
    fault = fake_github.inject_fault("PATCH", "/repos/**/issues/*", status=500, count=2)
    assert fake_github.faults() == [fault]

    fake_github.reset()

    assert fake_github.issues() == [] and fake_github.faults() == []
    assert fake_github.requests() == []
    gh_client.create_issue(REPO, title="after reset")
    assert fake_github.issues()[0]["number"] == 1


def test_fake_token_can_be_changed(fake_github: FakeGitHub, gh_client: GitHubClient):
    fake_github.set_token("ghp_new", login="someone")
    with pytest.raises(AuthFailed):
        gh_client.get_user()
    with GitHubClient("ghp_new", base_url=fake_github.url, trust_env=False) as client:
        assert client.get_user().login == "someone"


def test_path_patterns():
    assert _path_matches("/repos/*/*/issues", "/repos/acme/widgets/issues")
    assert not _path_matches("/repos/*/*/issues", "/repos/acme/widgets/issues/1")
    assert _path_matches("/repos/**", "/repos/acme/widgets/issues/1/labels")
    assert _path_matches("**/labels/*", "/repos/a/b/issues/1/labels/a%2Fb")
    assert _path_matches("**", "/user")


def test_control_plane_over_http(fake_github: FakeGitHub, gh_client: GitHubClient):
    remote = RemoteFakeGitHub(fake_github.url)
    assert remote.ping()
    assert remote.token == fake_github.token and remote.repo == REPO

    remote.seed_issue("seeded remotely", labels=["type:task"])
    remote.inject_fault("POST", "/repos/*/*/issues", status=502, when="after")
    with pytest.raises(Unclear):
        gh_client.create_issue(REPO, title="second")

    assert [i["title"] for i in remote.issues()] == ["seeded remotely", "second"]
    [post] = remote.writes()
    assert (post.method, post.status, post.fault, post.applied) == ("POST", 502, "error", True)
    assert post.body == {"title": "second"}

    request = urllib.request.Request(
        fake_github.root_url + "/_control/no_such_operation", data=b"{}", method="POST"
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with pytest.raises(urllib.error.HTTPError) as info:
        opener.open(request, timeout=5)
    assert info.value.code == 400
    info.value.close()


def test_fake_runs_as_a_subprocess_and_prints_its_url():
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.github_fake.server", "--port", "0"],
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", url)
        remote = RemoteFakeGitHub(url)
        with GitHubClient(remote.token, base_url=url, trust_env=False) as client:
            assert client.create_issue(REPO, title="over there").number == 1
        assert [r.method for r in remote.requests()] == ["POST"]
    finally:
        process.terminate()
        assert process.wait(10) == 0
        assert process.stdout is not None
        process.stdout.close()


def test_fake_process_helper_and_kill():
    with (
        FakeGitHubProcess(repos=["acme/widgets", "acme/other"]) as fake,
        GitHubClient(fake.token, base_url=fake.url, trust_env=False, timeout=2) as client,
    ):
        assert client.get_repo("acme/other").can_push
        fake.kill()
        with pytest.raises(Unclear) as info:
            client.get_user()
        assert not info.value.maybe_applied


def test_loopback_base_url_ignores_proxy_settings(
    fake_github: FakeGitHub, monkeypatch: pytest.MonkeyPatch
):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # nothing listens there
    with GitHubClient(fake_github.token, base_url=fake_github.url) as client:
        assert client.get_user().login == fake_github.login
