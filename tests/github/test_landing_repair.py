"""The loop closes on a refused landing: what its holder needs to repair it (the failing
check's conclusion, output title and summary and first annotations; the pull request's
requested changes and their review comments) is read from the fake GitHub, stored with the
landing, posted on the issue and shown by issue_get (a real ``workq serve`` over stdio),
work_context, ``workq show`` and ``workq context``; the rounds count across landings asked
again, and the refusal that reaches max_landing_rounds blocks the issue for a person, with
the ``landing_refused`` and ``blocked`` events and their notices queued. Hostile output is
cut to its bounds and fenced; an answer GitHub will not give leaves the refusal standing."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt
from sqlalchemy import insert, select

from tests.github.landing_helpers import AGENT, Landing, landing_on
from tests.github_fake.server import PROJECT_ROOT, FakeGitHub
from tests.server.conftest import call_ok, stdio_server, text
from tests.workq_cli import workq
from workq.db.tables import notices, notify_sinks
from workq.domain import landing_failures as bounds
from workq.domain.authority import Authority
from workq.schemas import CommentKind, LandingFailure, Status
from workq.services.coding import work_context
from workq.services.queue import issues, notes, policies
from workq.services.workspaces import landings, worktrees

FAILED_TESTS = "3 tests failed"
SUMMARY = "pytest: 3 failed, 40 passed\nsee the annotations"
ANNOTATIONS = [
    {"path": "src/app.py", "start_line": 12, "annotation_level": "failure", "message": "boom"},
    {"path": "src/util.py", "start_line": 3, "annotation_level": "warning", "message": "slow"},
]
REVIEW_BODY = "Please handle the empty input."
REVIEW_NOTES = [{"path": "fix.py", "line": 1, "body": "This crashes on None."}]


@pytest.fixture
def landing(tmp_path: Path, fake_github: FakeGitHub) -> Iterator[Landing]:
    with landing_on(tmp_path, fake_github) as found:
        found.fake.protect_branch("main", required_checks=["ci"])
        yield found


def _opened(landing: Landing, number: int) -> str:
    """Land issue ``number``'s branch as it is: pushed, its pull request open, checks
    awaited. The pull request's head."""
    landing.land(number)
    assert landing.land_pass().waiting == 1
    status = landings.require(landing.q, number)
    assert status.state == "open" and status.pr_number is not None
    return status.head_sha


def _refused(landing: Landing, number: int, **check: Any) -> LandingFailure:
    """Land issue ``number`` and fail its ci check (with ``check``'s output): refused."""
    head = _opened(landing, number)
    landing.fake.add_check_run(head, "ci", conclusion="failure", **check)
    assert landing.land_pass().refused == [number]
    status = landings.require(landing.q, number)
    assert status.state == "refused" and status.failure is not None
    return status.failure


def _subscribe(landing: Landing, events: str) -> str:
    """A sink row taking ``events`` (the notices' outbox queues a row per event for it)."""
    sink = uuid.uuid4().hex

    def write(conn: Any) -> None:
        conn.execute(
            insert(notify_sinks).values(
                id=sink,
                name="pager",
                kind="command",
                target='["true"]',
                events=events,
                created_at=landing.q.now(),
            )
        )

    landing.q.db.write(write)
    return sink


def _notices(landing: Landing, sink: str) -> list[tuple[str, int | None]]:
    with landing.q.db.read() as conn:
        rows = conn.execute(
            select(notices.c.event, notices.c.number)
            .where(notices.c.sink_id == sink)
            .order_by(notices.c.id)
        )
        return [(r.event, r.number) for r in rows]


def _events(landing: Landing, number: int, kind: str) -> list[dict[str, Any]]:
    return [e.after or {} for e in notes.history(landing.q, number) if e.kind == kind]


def _refusal_comments(landing: Landing, number: int) -> list[str]:
    return [
        c.body
        for c in notes.comments(landing.q, number)
        if c.kind == CommentKind.BLOCKER and c.body.startswith("Landing refused")
    ]


@pytest.mark.anyio
async def test_a_failing_check_and_requested_changes_reach_the_holder_on_every_face(
    landing: Landing, tmp_path: Path
) -> None:
    number = landing.issue("Fix the crash", "fix.py", "crash = True\n")
    head = _opened(landing, number)
    pr_number = landings.require(landing.q, number).pr_number
    assert pr_number is not None
    landing.fake.add_review(
        pr_number, "CHANGES_REQUESTED", user="alice", body=REVIEW_BODY, comments=REVIEW_NOTES
    )
    landing.fake.add_review(pr_number, "COMMENTED", user="bob", body="nit", comments=[
        {"path": "fix.py", "line": 1, "body": "a comment of no verdict"}
    ])  # fmt: skip
    landing.fake.add_check_run(
        head,
        "ci",
        conclusion="failure",
        title=FAILED_TESTS,
        summary=SUMMARY,
        annotations=ANNOTATIONS,
    )
    landing.fake.add_check_run(head, "lint", conclusion="success", title="clean")
    assert landing.land_pass().refused == [number]

    status = landings.require(landing.q, number)
    assert status.state == "refused" and status.rounds == 1
    failure = status.failure
    assert failure is not None
    assert failure.reason == f"check ci failed on {head[:12]}"
    assert (failure.round, failure.max_rounds, failure.blocked) == (1, 3, False)
    assert (failure.pr_number, failure.head_sha) == (pr_number, head)
    (check,) = failure.checks  # lint passed: only the failing check
    assert (check.name, check.conclusion, check.title, check.summary) == (
        "ci",
        "failure",
        FAILED_TESTS,
        SUMMARY,
    )
    assert check.annotations_total == 2
    assert [(a.path, a.start_line, a.annotation_level, a.message) for a in check.annotations] == [
        ("src/app.py", 12, "failure", "boom"),
        ("src/util.py", 3, "warning", "slow"),
    ]
    (review,) = failure.reviews  # bob only commented
    assert (review.author, review.body, review.commit_id) == ("alice", REVIEW_BODY, head)
    (note,) = failure.review_comments  # alice's; bob's comment belongs to no verdict
    assert (note.author, note.path, note.line, note.body) == (
        "alice",
        "fix.py",
        1,
        "This crashes on None.",
    )
    assert failure.unread == []
    # Returned to its holder (on_refused "return", round 1 of 3).
    issue = issues.get(landing.q, number)
    assert issue.claimed_by == AGENT and not issue.is_blocked

    # The claim's comment: every fact, readable.
    (said,) = _refusal_comments(landing, number)
    for fact in (
        f"check ci failed on {head[:12]}",
        "round 1 of 3",
        f"pull request #{pr_number}",
        "**Check `ci`**: failure",
        f"Title: {FAILED_TESTS}",
        SUMMARY,
        "`src/app.py:12` (failure)",
        "boom",
        "**Changes requested** by `alice`",
        REVIEW_BODY,
        "Review comment on `fix.py:1` (`alice`)",
        "This crashes on None.",
        "merge again",
    ):
        assert fact in said, (fact, said)
    assert "a comment of no verdict" not in said

    # The audit event that raises the landing_refused notice.
    (refused,) = _events(landing, number, "landing_refused")
    assert refused == {
        "reason": failure.reason,
        "pr_number": pr_number,
        "pr_url": status.pr_url,
        "round": 1,
        "max_rounds": 3,
        "checks": [{"name": "ci", "conclusion": "failure"}],
        "holder": AGENT,
    }

    # issue_get through a real `workq serve` (this tree's code), in the issue's worktree:
    # there, work_context finds the issue by its branch.
    info = worktrees.get_for_issue(landing.q, number)
    assert info is not None
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT / "src"), "WORKQ_RUN_ID": AGENT}
    db = tmp_path / "queue.db"
    async with stdio_server(db, "--toolsets", "default,coding", env=env, cwd=Path(info.path)) as c:
        got = await call_ok(c, "issue_get", number=number)
        context = await call_ok(c, "work_context")
    await _shown_by_issue_get(got, failure)
    assert context.structured_content is not None
    active = context.structured_content["active_issue"]
    assert active["number"] == number and active["landing"]["state"] == "refused"
    assert active["landing"]["failure"]["checks"][0]["annotations"][0]["message"] == "boom"
    words = text(context)
    assert "Landing: refused" in words and "`src/app.py:12` (failure)" in words, words

    # work_context in process, `workq context` and `workq show` on the command line.
    found = work_context.gather(landing.q, by=Authority.of([AGENT]), branch=info.branch)
    assert found.active_issue is not None and found.active_issue.landing is not None
    assert found.active_issue.landing.failure == failure
    shown = workq("--db", db, "show", str(number), env={"WORKQ_RUN_ID": AGENT})
    assert shown.returncode == 0, shown.stderr
    assert "Landing: refused" in shown.stdout and "refused 1 times so far" in shown.stdout
    assert "boom" in shown.stdout and REVIEW_BODY in shown.stdout
    as_json = json.loads(workq("--db", db, "show", str(number), "--json").stdout)
    assert as_json["landing"]["failure"]["reviews"][0]["author"] == "alice"
    ctx = workq("--db", db, "context", env={"WORKQ_RUN_ID": AGENT}, cwd=Path(info.path))
    assert ctx.returncode == 0, ctx.stderr
    assert "This crashes on None." in ctx.stdout


async def _shown_by_issue_get(got: Any, failure: LandingFailure) -> None:
    assert got.structured_content is not None
    shown = got.structured_content["landing"]
    assert (shown["state"], shown["rounds"]) == ("refused", 1)
    assert shown["failure"]["checks"][0]["title"] == FAILED_TESTS
    assert shown["failure"]["checks"][0]["annotations"][1]["path"] == "src/util.py"
    assert shown["failure"]["review_comments"][0]["body"] == "This crashes on None."
    assert LandingFailure.model_validate(shown["failure"]) == failure
    said = json.loads(text(got))
    assert said["landing"]["failure"]["reason"] == failure.reason


def test_rounds_count_across_landings_asked_again_and_the_third_refusal_blocks(
    landing: Landing,
) -> None:
    sink = _subscribe(landing, "landing_refused,blocked")
    number = landing.issue("Flaky", "flaky.py", "v = 0\n")
    for round_ in (1, 2):
        failure = _refused(landing, number, title=f"round {round_}")
        assert (failure.round, failure.blocked) == (round_, False)
        issue = issues.get(landing.q, number)
        assert issue.claimed_by == AGENT and not issue.is_blocked
        landing.commit(number, "flaky.py", f"v = {round_}\n")
        again = landing.land(number)  # queued again: the rounds stay, the failure goes
        assert (again.state, again.rounds, again.failure) == ("queued", round_, None)

    failure = _refused(landing, number, title="round 3")
    assert (failure.round, failure.max_rounds, failure.blocked) == (3, 3, True)
    status = landings.require(landing.q, number)
    assert status.rounds == 3
    issue = issues.get(landing.q, number)
    assert issue.is_blocked and issue.claimed_by is None
    reason = issue.blocked_reason or ""
    assert "Landing refused 3 times (max_landing_rounds is 3)" in reason, reason
    assert "a person is needed" in reason and "check ci failed" in reason
    said = _refusal_comments(landing, number)
    assert len(said) == 3 and "A person decides what follows" in said[-1]
    assert [e["round"] for e in _events(landing, number, "landing_refused")] == [1, 2, 3]
    (blocked,) = _events(landing, number, "blocked")
    assert blocked["blocked_reason"] == reason
    assert _notices(landing, sink) == [
        ("landing_refused", number),
        ("landing_refused", number),
        ("landing_refused", number),
        ("blocked", number),
    ]
    # Blocked, nobody lands it until a person unblocks it.
    assert landing.land_pass().refused == []


def test_max_landing_rounds_per_repository_and_on_refused_block_below_it(
    landing: Landing,
) -> None:
    policies.settle(landing.q, "max_landing_rounds", "2", repository="app")
    first = landing.issue("Cap two", "two.py", "t = 1\n")
    assert _refused(landing, first).max_rounds == 2
    assert not issues.get(landing.q, first).is_blocked
    landing.commit(first, "two.py", "t = 2\n")
    assert _refused(landing, first).blocked
    assert "max_landing_rounds is 2" in (issues.get(landing.q, first).blocked_reason or "")

    from workq.services.workspaces import repositories

    repositories.configure(landing.q, "app", on_refused="block")
    second = landing.issue("Blocks at once", "once.py", "o = 1\n")
    failure = _refused(landing, second)
    assert (failure.round, failure.blocked) == (1, True)
    issue = issues.get(landing.q, second)
    assert issue.is_blocked and (issue.blocked_reason or "").startswith("Landing refused: check ci")
    assert "as its repository says" in _refusal_comments(landing, second)[0]


def test_changes_requested_on_the_head_refuse_a_landing_whose_checks_pass(
    landing: Landing,
) -> None:
    number = landing.issue("Reviewed", "rev.py", "r = 1\n")
    head = _opened(landing, number)
    pr_number = landings.require(landing.q, number).pr_number
    assert pr_number is not None
    landing.fake.add_review(
        pr_number, "CHANGES_REQUESTED", user="alice", body=REVIEW_BODY, comments=REVIEW_NOTES
    )
    landing.fake.add_check_run(head, "ci", conclusion="success")
    assert landing.land_pass().refused == [number]
    failure = landings.require(landing.q, number).failure
    assert failure is not None and failure.checks == []
    assert failure.reason == f"changes requested by alice on {head[:12]}"
    assert [r.author for r in failure.reviews] == ["alice"]
    assert [c.body for c in failure.review_comments] == ["This crashes on None."]
    assert not landing.fake.pulls()[0]["merged"]

    # The holder answers with a commit: the verdict was given on the old head (GitHub's
    # branch protection decides whether its reviewer must look again); this one lands.
    fixed = landing.commit(number, "rev.py", "r = 2\n")
    landing.land(number)
    landing.land_pass()
    landing.fake.add_check_run(fixed, "ci", conclusion="success")
    assert landing.land_pass().landed == [number]
    assert issues.get(landing.q, number).status == Status.DONE


HOSTILE = (
    "```\n# Not a heading\n</details><script>x</script> [link](http://evil) *bold*\x00\x1b[31m"
)


def test_hostile_output_is_cut_to_its_bounds_and_fenced(landing: Landing) -> None:
    number = landing.issue("Hostile", "h.py", "h = 1\n")
    many = [
        {"path": f"src/{i}.py", "start_line": i, "message": HOSTILE + "`" * 40 + "m" * 5000}
        for i in range(30)
    ]
    failure = _refused(
        landing,
        number,
        title=HOSTILE + "t" * 5000,
        summary=HOSTILE * 3 + "s" * 100_000,
        annotations=many,
    )
    (check,) = failure.checks
    assert check.title is not None and len(check.title) <= bounds.TITLE_MAX
    assert "\n" not in check.title
    assert check.summary is not None and len(check.summary) <= bounds.SUMMARY_MAX
    assert "more characters cut" in check.summary
    assert (len(check.annotations), check.annotations_total) == (bounds.ANNOTATIONS_MAX, 30)
    assert all(len(a.message) <= bounds.MESSAGE_MAX for a in check.annotations)
    stored = failure.model_dump_json()
    assert "\x00" not in stored and "\x1b" not in stored

    (said,) = _refusal_comments(landing, number)
    assert len(said) < 65_536
    tokens = MarkdownIt("commonmark").parse(said)
    kinds = {t.type for t in tokens} | {c.type for t in tokens for c in t.children or ()}
    # Nothing from GitHub became structure: no heading, HTML or emphasis.
    assert not kinds & {"heading_open", "html_block", "html_inline", "em_open"}, kinds
    links = [c for t in tokens for c in t.children or () if c.type == "link_open"]
    assert all(str(c.attrs["href"]).startswith("https://github.com/") for c in links), links
    fences = [t.content.rstrip("\n") for t in tokens if t.type == "fence"]
    assert check.summary.rstrip() in fences
    assert [a.message.rstrip() for a in check.annotations] == fences[1:]
    strong = [
        t.children[i + 1].content
        for t in tokens
        if t.children
        for i, c in enumerate(t.children)
        if c.type == "strong_open"
    ]
    assert strong == ["Check "], strong  # workq's one bold label; the name is a code span


def test_annotations_github_will_not_give_leave_the_refusal_standing(
    landing: Landing,
) -> None:
    number = landing.issue("Faulty", "f.py", "f = 1\n")
    head = _opened(landing, number)
    pr_number = landings.require(landing.q, number).pr_number
    assert pr_number is not None
    landing.fake.add_review(pr_number, "CHANGES_REQUESTED", user="alice", body=REVIEW_BODY)
    landing.fake.add_check_run(
        head, "ci", conclusion="failure", title=FAILED_TESTS, annotations=ANNOTATIONS
    )
    landing.fake.add_check_run(head, "e2e", conclusion="timed_out", annotations=ANNOTATIONS)
    landing.fake.inject_fault(
        "GET", "/repos/*/*/check-runs/*/annotations", kind="error", status=500
    )
    landing.fake.inject_fault("GET", "/repos/*/*/pulls/*/comments", kind="error", status=404)
    assert landing.land_pass().refused == [number]

    failure = landings.require(landing.q, number).failure
    assert failure is not None and failure.round == 1
    ci, e2e = failure.checks  # the fault was for one request: e2e's annotations were read
    assert (ci.name, ci.conclusion, e2e.name, e2e.conclusion) == (
        "ci",
        "failure",
        "e2e",
        "timed_out",
    )
    assert ci.title == FAILED_TESTS and ci.annotations == []
    assert [a.message for a in e2e.annotations] == ["boom", "slow"]
    assert failure.unread == [
        "the annotations of check ci: GitHub answered 500",
        "the review comments: GitHub answered 404",
    ]
    assert [r.author for r in failure.reviews] == ["alice"]
    (said,) = _refusal_comments(landing, number)
    assert "Not read from GitHub: the annotations of check ci: GitHub answered 500" in said
    assert len(_events(landing, number, "landing_refused")) == 1


def test_a_rate_limit_while_reading_asks_nothing_more(landing: Landing) -> None:
    number = landing.issue("Limited", "l.py", "l = 1\n")
    head = _opened(landing, number)
    landing.fake.add_check_run(head, "ci", conclusion="failure", annotations=ANNOTATIONS)
    landing.fake.add_check_run(head, "e2e", conclusion="failure", annotations=ANNOTATIONS)
    landing.fake.inject_fault(
        "GET", "/repos/*/*/check-runs/*/annotations", kind="rate_limit", reset_in=60
    )
    landing.fake.clear_requests()
    assert landing.land_pass().refused == [number]
    failure = landings.require(landing.q, number).failure
    assert failure is not None
    assert [c.name for c in failure.checks] == ["ci", "e2e"]
    assert failure.unread[0].startswith("the annotations of check ci: GitHub answered 403")
    assert failure.unread[1:] == [
        "the annotations of check e2e: not asked after GitHub answered 403",
        "the reviews: not asked after GitHub answered 403",
    ]
    asked = [r.path for r in landing.fake.requests() if r.path.endswith("/annotations")]
    assert len(asked) == 1


def test_the_fake_serves_annotations_and_review_comments_as_github_documents(
    fake_github: FakeGitHub,
) -> None:
    from workq.github.client import GitHubClient

    pull = fake_github.seed_pull("documented", head="topic")
    run = fake_github.add_check_run(
        pull["head"]["sha"], "ci", conclusion="failure", title="t", annotations=ANNOTATIONS
    )
    assert run["output"]["annotations_count"] == 2
    fake_github.add_review(pull["number"], "CHANGES_REQUESTED", body="b", comments=REVIEW_NOTES)
    with GitHubClient(fake_github.token, base_url=fake_github.url, trust_env=False) as client:
        (found,) = client.list_check_runs(fake_github.repo, pull["head"]["sha"]).check_runs
        assert found.output is not None and found.output.title == "t"
        first = client.list_check_run_annotations(fake_github.repo, run["id"], per_page=1)
        assert [(a.path, a.start_line, a.end_line, a.annotation_level) for a in first] == [
            ("src/app.py", 12, 12, "failure")
        ]
        (note,) = client.list_review_comments(fake_github.repo, pull["number"])
        (review,) = client.list_reviews(fake_github.repo, pull["number"])
        assert note.pull_request_review_id == review.id and note.line == 1
        assert review.commit_id == pull["head"]["sha"]
