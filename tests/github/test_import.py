"""Importing GitHub issues: pages, pull requests, the since cursor, ETags, the conflict rule."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.conftest import ADMIN
from tests.github.mirror_helpers import REPO, Mirror, labels_of, mirrored
from tests.github_fake.server import FakeGitHub, LoggedRequest
from workq.domain.authority import Authority
from workq.github.client import GitHubClient
from workq.schemas import IssueType, Priority, Status
from workq.services.queue import claims, issues, listing
from workq.services.queue.notes import history
from workq.services.sync import mirror_target
from workq.services.sync.mirror import github_link


def _edit(m: Mirror, gh_number: int, **fields: object) -> None:
    """Someone edits the issue on GitHub."""
    with GitHubClient(m.fake.token, base_url=m.fake.url, trust_env=False) as other:
        other.update_issue(REPO, gh_number, **fields)  # type: ignore[arg-type]


def _list_requests(m: Mirror, *, probes: bool = False) -> list[LoggedRequest]:
    """The issue-list requests; without ``probes``, only those of the since-list."""
    return [
        r
        for r in m.fake.requests()
        if r.method == "GET"
        and r.path == f"/repos/{REPO}/issues"
        and (probes or r.param("per_page") != "1")
    ]


def test_issues_become_local_issues_with_labels_mapped_back(
    tmp_path: Path, fake_github: FakeGitHub
) -> None:
    fake_github.seed_issue(
        "Crash on save", body="Steps: save", labels=["priority:critical", "type:bug", "ui"]
    )
    fake_github.seed_issue("Old idea", state="closed", state_reason="not_planned")
    fake_github.seed_pull_request("A pull request")
    with mirrored(tmp_path, fake_github) as m:
        result = m.sync(with_import=True)
        assert result.imported is not None
        assert (result.imported.created, result.imported.pull_requests) == (2, 1)
        crash = issues.get(m.q, 1)
        assert (crash.title, crash.description) == ("Crash on save", "Steps: save")
        assert (crash.priority, crash.issue_type) == (Priority.URGENT, IssueType.BUG)
        assert crash.labels == ["ui"]
        assert issues.get(m.q, 2).status == Status.DONE
        assert listing.list_issues(m.q).items[-1].number == 2  # the PR did not come in
        link = github_link(m.q, 1)
        assert link is not None and link.gh_number == 1
        # The push that follows adds the marker and workq's labels, keeping "ui".
        gh = m.fake.issue(1)
        assert f"<!-- workq:id={crash.id} -->" in gh["body"]
        assert labels_of(gh) == {"priority:urgent", "type:bug", "status:backlog", "ui"}


def test_import_follows_link_pages_past_the_first(tmp_path: Path, fake_github: FakeGitHub) -> None:
    for n in range(230):
        fake_github.seed_issue(f"issue {n}")
    fake_github.set_options(cursor_links=True)  # next URLs carry an opaque cursor
    with mirrored(tmp_path, fake_github) as m:
        m.session.worker.labels.ensure([])
        report = m.session.worker
        from workq.github.importer import Importer

        imported = Importer(report).run()
        assert (imported.pages, imported.created) == (3, 230)
        pages = _list_requests(m)
        assert [p.param("after") is not None for p in pages] == [False, True, True]
        assert (
            listing.list_issues(m.q, limit=200, cursor=listing.encode_cursor(200)).items[-1].title
            == "issue 229"
        )


def test_a_second_import_without_change_is_a_304_and_changes_nothing(
    tmp_path: Path, fake_github: FakeGitHub
) -> None:
    fake_github.seed_issue("one")
    with mirrored(tmp_path, fake_github) as m:
        from workq.github.importer import Importer

        Importer(m.session.worker).run()
        again = Importer(m.session.worker).run()
        assert again.not_modified
        assert len(listing.list_issues(m.q).items) == 1
        probe = _list_requests(m, probes=True)[-1]
        assert (probe.status, probe.param("direction"), probe.param("per_page")) == (
            304,
            "desc",
            "1",
        )
        # Once something changes, the probe says so and the since-list is read.
        fake_github.seed_issue("two")
        third = Importer(m.session.worker).run()
        assert (third.not_modified, third.created) == (False, 1)


def test_the_since_cursor_reaches_back_by_the_overlap(
    tmp_path: Path, fake_github: FakeGitHub
) -> None:
    stamp = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
    fake_github.seed_issue("old", updated_at=stamp)
    with mirrored(tmp_path, fake_github) as m:
        from workq.github.importer import Importer

        Importer(m.session.worker).run()
        mirror = mirror_target.mirror(m.q)
        assert mirror is not None and mirror.import_since == stamp
        # An issue updated in the same second as the cursor, after the import read the list.
        fake_github.seed_issue("same second", updated_at=stamp)
        report = Importer(m.session.worker).run()
        since = _list_requests(m)[-1].param("since")
        overlap = m.session.worker.options.import_overlap
        assert since == (stamp - timedelta(seconds=overlap)).strftime("%Y-%m-%dT%H:%M:%SZ")
        assert (report.created, report.unchanged) == (1, 1)  # the old one changed nothing


def test_a_remote_edit_is_applied_and_recorded(tmp_path: Path, fake_github: FakeGitHub) -> None:
    with mirrored(tmp_path, fake_github) as m:
        made = issues.create(m.q, title="Original", priority="low")
        m.sync()
        gh_number = m.gh_issue_of(made.number)["number"]
        _edit(
            m,
            gh_number,
            title="Better title",
            labels=["priority:high", "type:task", "status:backlog", "frontend"],
        )
        result = m.sync(with_import=True)
        assert result.imported is not None and result.imported.updated == 1
        now = issues.get(m.q, made.number)
        assert (now.title, now.priority, now.labels) == (
            "Better title",
            Priority.HIGH,
            ["frontend"],
        )
        updated = [e for e in history(m.q, made.number) if e.kind == "updated"]
        assert updated[-1].actor == f"github:{REPO}"
        # Nothing to push back: the next pass makes no write.
        m.fake.clear_requests()
        m.sync(with_import=True)
        assert m.fake.writes() == []


def test_closing_and_reopening_on_github_follow_locally(
    tmp_path: Path, fake_github: FakeGitHub
) -> None:
    with mirrored(tmp_path, fake_github) as m:
        made = issues.create(m.q, title="Close me there")
        m.sync()
        gh_number = m.gh_issue_of(made.number)["number"]
        _edit(m, gh_number, state="closed", state_reason="completed")
        m.sync(with_import=True)
        assert issues.get(m.q, made.number).status == Status.DONE
        assert "status:done" in labels_of(m.fake.issue(gh_number))
        _edit(m, gh_number, state="open")
        m.sync(with_import=True)
        assert issues.get(m.q, made.number).status == Status.OPEN


def test_a_conflict_keeps_the_local_value_and_is_recorded(
    tmp_path: Path, fake_github: FakeGitHub
) -> None:
    with mirrored(tmp_path, fake_github) as m:
        made = issues.create(m.q, title="Base", labels=["api"])
        m.sync()
        gh_number = m.gh_issue_of(made.number)["number"]
        _edit(m, gh_number, title="Their title", body="Their body")
        issues.update_issue(
            m.q,
            made.number,
            title="Our title",
            add_labels=["db"],
            by=ADMIN,
        )
        result = m.sync(with_import=True)
        assert result.imported is not None and result.imported.conflicts == 1
        local = issues.get(m.q, made.number)
        assert local.title == "Our title"
        assert local.description == "Their body"  # changed on GitHub only: taken
        assert sorted(local.labels) == ["api", "db"]
        conflict = [e for e in history(m.q, made.number) if e.kind == "github_conflict"]
        assert len(conflict) == 1
        assert conflict[0].before == {"github": {"title": "Their title"}}
        assert conflict[0].after is not None and conflict[0].after["local"] == {
            "title": "Our title"
        }
        gh = m.fake.issue(gh_number)
        assert gh["title"] == "Our title"  # the push sent the local value
        assert gh["body"].startswith("## Summary\nTheir body")  # back in seed 000's template
        assert "db" in labels_of(gh)


def test_a_lost_create_answer_is_linked_by_import_not_duplicated(
    tmp_path: Path, fake_github: FakeGitHub
) -> None:
    with mirrored(tmp_path, fake_github) as m:
        made = issues.create(m.q, title="Mine")
        m.fake.inject_fault("POST", "/repos/*/*/issues", kind="error", status=502, when="after")
        m.sync()
        result = m.sync(with_import=True)  # the row is not due yet; the import finds it
        assert result.imported is not None and result.imported.linked == 1
        assert len(listing.list_issues(m.q).items) == 1
        assert len(m.fake.issues()) == 1
        assert github_link(m.q, made.number) is not None


@pytest.mark.parametrize("state", ["open", "closed"])
def test_an_issue_claimed_locally_and_closed_remotely_is_completed(
    tmp_path: Path, fake_github: FakeGitHub, state: str
) -> None:
    with mirrored(tmp_path, fake_github) as m:
        made = issues.create(m.q, title="Work")
        m.sync()
        claims.claim(m.q, made.number, Authority.of({"run-1"}))
        m.sync()
        gh_number = m.gh_issue_of(made.number)["number"]
        _edit(m, gh_number, state=state)
        m.sync(with_import=True)
        expected = Status.DONE if state == "closed" else Status.IN_PROGRESS
        assert issues.get(m.q, made.number).status == expected
