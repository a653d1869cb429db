"""Pushing the outbox to the fake GitHub: create once, absolute updates, labels, state."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import ADMIN
from tests.github.mirror_helpers import labels_of, markers, mirrored
from tests.github_fake.server import FakeGitHub
from workq.domain.authority import Authority
from workq.services.queue import claims, issues, notes
from workq.services.sync import outbox, sync_status
from workq.services.sync.mirror import github_link


def test_an_issue_is_created_with_template_marker_and_labels(
    tmp_path: Path, fake_github: FakeGitHub
) -> None:
    with mirrored(tmp_path, fake_github) as m:
        made = issues.create(
            m.q, title="Fix login", description="It breaks", priority="high", issue_type="bug"
        )
        result = m.sync()
        assert result.pushed.created == 1
        gh = m.gh_issue_of(made.number)
        assert gh["title"] == "Fix login"
        assert gh["body"].startswith("## Summary\nIt breaks")
        assert f"<!-- workq:id={made.id} -->" in gh["body"]
        assert labels_of(gh) == {"priority:high", "type:bug", "status:backlog"}
        link = github_link(m.q, made.number)
        assert link is not None and link.url == gh["html_url"]
        colours = {lb["name"]: lb["color"] for lb in m.fake.labels()}
        assert colours["priority:high"] == "d93f0b"


def test_a_burst_of_edits_collapses_into_one_row(tmp_path: Path, fake_github: FakeGitHub) -> None:
    with mirrored(tmp_path, fake_github) as m:
        made = issues.create(m.q, title="one")
        for n in range(5):
            issues.update_issue(m.q, made.number, title=f"edit {n}", by=ADMIN)
        assert sync_status.status(m.q).pending == 1
        m.sync()
        assert m.gh_issue_of(made.number)["title"] == "edit 4"
        posts = [w for w in m.writes() if w.method == "POST" and w.path.endswith("/issues")]
        assert len(posts) == 1


def test_a_second_pass_without_change_makes_no_request(
    tmp_path: Path, fake_github: FakeGitHub
) -> None:
    with mirrored(tmp_path, fake_github) as m:
        for n in range(3):
            made = issues.create(m.q, title=f"issue {n}", labels=["backend"])
        notes.comment(m.q, made.number, "first note")
        m.sync()
        m.fake.clear_requests()
        m.sync()
        assert m.fake.requests() == []
        # Even when every issue is queued again, nothing is sent: the snapshots match.
        assert outbox.queue_all(m.q) == 3
        result = m.sync()
        assert result.pushed.rows == 3 and result.pushed.unchanged == 3
        assert m.fake.writes() == []


def test_complete_delete_and_reopen_set_state_and_reason(
    tmp_path: Path, fake_github: FakeGitHub
) -> None:
    with mirrored(tmp_path, fake_github) as m:
        done = issues.create(m.q, title="to finish")
        gone = issues.create(m.q, title="to delete")
        m.sync()
        claims.claim(m.q, done.number, Authority.of({"run-1"}))
        m.sync()
        assert "status:in-progress" in labels_of(m.gh_issue_of(done.number))
        claims.complete(m.q, done.number, Authority.of(["run-1"]))
        gone_gh = m.gh_issue_of(gone.number)["number"]
        issues.delete_issue(m.q, gone.number, by=ADMIN)
        m.sync()
        finished = m.gh_issue_of(done.number)
        assert (finished["state"], finished["state_reason"]) == ("closed", "completed")
        assert "status:done" in labels_of(finished)
        deleted = m.fake.issue(gone_gh)
        assert (deleted["state"], deleted["state_reason"]) == ("closed", "not_planned")
        issues.reopen(m.q, done.number)
        m.sync()
        reopened = m.gh_issue_of(done.number)
        assert (reopened["state"], reopened["state_reason"]) == ("open", "reopened")
        assert "status:backlog" in labels_of(reopened)


def test_an_issue_done_before_its_first_push_is_created_then_closed(
    tmp_path: Path, fake_github: FakeGitHub
) -> None:
    with mirrored(tmp_path, fake_github) as m:
        made = issues.create(m.q, title="quick")
        claims.complete(m.q, made.number, Authority.overriding("admin", who="admin"))
        m.sync()
        gh = m.gh_issue_of(made.number)
        assert (gh["state"], gh["state_reason"]) == ("closed", "completed")


def test_an_issue_deleted_before_its_first_push_never_reaches_github(
    tmp_path: Path, fake_github: FakeGitHub
) -> None:
    with mirrored(tmp_path, fake_github) as m:
        made = issues.create(m.q, title="never mind")
        issues.delete_issue(m.q, made.number, by=ADMIN)
        m.sync()
        assert m.fake.issues() == []
        assert sync_status.status(m.q).pending == 0


def test_hand_added_labels_survive_label_changes(tmp_path: Path, fake_github: FakeGitHub) -> None:
    with mirrored(tmp_path, fake_github) as m:
        made = issues.create(m.q, title="labelled", labels=["backend"], priority="low")
        m.sync()
        gh_number = m.gh_issue_of(made.number)["number"]
        # Someone adds labels by hand on GitHub, one of them a workq-looking one.
        m.fake.seed_label("needs-design")
        from workq.github.client import GitHubClient

        with GitHubClient(m.fake.token, base_url=m.fake.url, trust_env=False) as other:
            other.update_issue(
                "acme/widgets",
                gh_number,
                labels=["backend", "priority:low", "type:task", "status:backlog", "needs-design"],
            )
        issues.update_issue(
            m.q,
            made.number,
            priority="urgent",
            add_labels=["api"],
            remove_labels=["backend"],
            by=ADMIN,
        )
        m.sync()
        assert labels_of(m.fake.issue(gh_number)) == {
            "needs-design",
            "api",
            "priority:urgent",
            "type:task",
            "status:backlog",
        }


def test_label_creation_race_is_success(tmp_path: Path, fake_github: FakeGitHub) -> None:
    with mirrored(tmp_path, fake_github) as m:
        issues.create(m.q, title="first", priority="high")
        # The label cache is loaded; then someone else creates the label first.
        m.session.worker.labels.ensure([])
        m.fake.seed_label("priority:high", color="000000")
        m.fake.seed_label("status:backlog")
        result = m.sync()
        assert result.pushed.created == 1 and result.pushed.dead == 0
        rejected = [w for w in m.writes() if w.path.endswith("/labels") and w.status == 422]
        assert len(rejected) == 2
        assert len(m.fake.issues()) == 1


def test_comments_are_mirrored_once(tmp_path: Path, fake_github: FakeGitHub) -> None:
    with mirrored(tmp_path, fake_github) as m:
        made = issues.create(m.q, title="talk")
        notes.comment(m.q, made.number, "started", kind="progress", author="run-1")
        m.sync()
        notes.comment(m.q, made.number, "done now", kind="resolution")
        m.sync()
        m.sync()
        gh_number = m.gh_issue_of(made.number)["number"]
        bodies = [c["body"] for c in m.fake.comments(gh_number)]
        assert len(bodies) == 2
        assert bodies[0].startswith("**progress** from run-1:\n\nstarted")
        assert "done now" in bodies[1]


def test_one_github_issue_per_local_issue(tmp_path: Path, fake_github: FakeGitHub) -> None:
    with mirrored(tmp_path, fake_github) as m:
        made = [issues.create(m.q, title=f"n{n}") for n in range(7)]
        m.sync()
        assert sorted(markers(m.fake)) == sorted(i.id for i in made)
