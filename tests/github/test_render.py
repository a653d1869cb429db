"""The mapping between a local issue and its GitHub form (pure functions)."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from workq.github.models import GhIssue
from workq.github.render import (
    BODY_MAX,
    Snapshot,
    canonical_body,
    desired,
    marker,
    marker_id,
    merged_labels,
    read_labels,
    remote_snapshot,
    render_body,
    render_comment,
)
from workq.schemas import Issue, IssueType, Priority, Status

NOW = datetime(2026, 1, 1, tzinfo=UTC)
ID = "0123456789abcdef0123456789abcdef"


def _issue(**changes: object) -> Issue:
    values: dict[str, object] = {
        "id": ID,
        "number": 1,
        "title": "Title",
        "description": "",
        "status": Status.OPEN,
        "priority": Priority.MEDIUM,
        "issue_type": IssueType.TASK,
        "agent": "claude",
        "is_blocked": False,
        "blocked_reason": None,
        "open_blockers": 0,
        "claimed_by": None,
        "claimed_at": None,
        "lease_expires_at": None,
        "created_at": NOW,
        "updated_at": NOW,
        "closed_at": None,
        **changes,
    }
    return Issue.model_validate(values)


def test_the_body_follows_seed_000s_template_and_ends_with_the_marker() -> None:
    assert render_body(ID, "Title", "") == f"## Summary\nTitle\n\n{marker(ID)}"
    assert render_body(ID, "Title", "why").startswith("## Summary\nwhy\n\n")
    templated = "## Summary\nx\n\n## Context\ny\n"
    assert render_body(ID, "T", templated).startswith("## Summary\nx\n\n## Context\ny\n\n<!--")
    assert marker_id(render_body(ID, "T", "x")) == ID
    assert canonical_body(render_body(ID, "T", "x")) == "## Summary\nx"


def test_long_bodies_are_cut_to_githubs_limit_keeping_the_marker() -> None:
    body = render_body(ID, "T", "x" * 70_000)
    assert len(body) <= BODY_MAX and marker_id(body) == ID
    comment = render_comment(ID, 5, "note", None, "y" * 70_000)
    assert len(comment) <= BODY_MAX and comment.endswith(f"<!-- workq:comment={ID}/5 -->")


def test_status_labels_follow_claims_blocks_and_dependencies() -> None:
    def status(issue: Issue) -> str:
        return next(n for n in desired(issue, None).labels if n.startswith("status:"))

    assert status(_issue()) == "status:backlog"
    assert status(_issue(status=Status.IN_PROGRESS)) == "status:in-progress"
    assert status(_issue(is_blocked=True)) == "status:blocked"
    assert status(_issue(open_blockers=2)) == "status:blocked"
    assert status(_issue(status=Status.DONE)) == "status:done"


def test_a_deleted_issue_closes_as_not_planned_unless_closed_already() -> None:
    pushed = desired(_issue(), None)
    gone = desired(None, pushed)
    assert (gone.state, gone.state_reason, gone.title) == ("closed", "not_planned", "Title")
    done = desired(_issue(status=Status.DONE), None)
    assert desired(None, done).state_reason == "completed"


def test_labels_read_back() -> None:
    meaning = read_labels(["priority:Critical", "type:bug", "status:done", "ui", "Good first"])
    assert (meaning.priority, meaning.issue_type) == (Priority.URGENT, IssueType.BUG)
    assert meaning.plain == ("Good first", "ui")
    assert read_labels(["priority:high", "priority:low"]).priority is None
    assert read_labels(["priority:someday"]).priority is None


names = st.sampled_from(["a", "B", "c", "priority:high", "priority:low", "type:bug", "status:done"])


@given(st.lists(names), st.lists(names), st.lists(names))
def test_merged_labels_keep_hand_added_and_take_workqs(
    on_github: list[str], previous: list[str], wanted: list[str]
) -> None:
    merged = {n.lower() for n in merged_labels(on_github, previous, wanted)}
    assert {w.lower() for w in wanted} <= merged
    for name in on_github:
        by_hand = name.lower() not in {p.lower() for p in previous} and ":" not in name
        if by_hand:
            assert name.lower() in merged
    for name in merged - {w.lower() for w in wanted}:
        assert ":" not in name  # no stale workq label survives


def test_snapshots_round_trip_and_compare_with_github() -> None:
    snap = desired(_issue(labels=["ui"]), None)
    assert Snapshot.from_json(snap.to_json()) == snap
    gh = GhIssue.model_validate(
        {
            "id": 1,
            "number": 1,
            "title": "Title",
            "body": render_body(ID, "Title", ""),
            "state": "open",
            "state_reason": "reopened",
            "labels": [{"name": n} for n in (*snap.labels, "by-hand")],
            "html_url": "https://github.com/acme/widgets/issues/1",
            "created_at": NOW.isoformat(),
            "updated_at": NOW.isoformat(),
        }
    )
    assert remote_snapshot(gh, snap.labels) == snap
