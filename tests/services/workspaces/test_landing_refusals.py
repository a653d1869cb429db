"""landings.refuse, on SQLite and PostgreSQL: one transaction refuses the landing with its
failure and one more round, records the ``landing`` and ``landing_refused`` events, blocks
the issue at max_landing_rounds (or as on_refused says), and posts the failure on the issue;
a landing queued again keeps its rounds and drops the failure; a landing that moved
meanwhile is left alone; a block the door refuses leaves the refusal standing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.services.workspaces.gitrepo import make_repo
from workq.domain.authority import Authority
from workq.schemas import (
    CheckAnnotation,
    CommentKind,
    FailedCheck,
    LandingFailure,
    LandingStatus,
)
from workq.services.handle import Queue
from workq.services.queue import claims, issues, notes, policies
from workq.services.workspaces import landings, repositories
from workq.services.workspaces.landings import Due

GITHUB = "acme/app"
HOLDER = "run-a"
ACTOR = "workq-land"
FOUND = LandingFailure(
    reason="check ci failed",
    checks=[
        FailedCheck(
            name="ci ✓",
            kind="check_run",
            conclusion="failure",
            title="Ünïcode title",
            summary="line one\nline two",
            annotations=[CheckAnnotation(path="a.py", start_line=1, message="m")],
            annotations_total=1,
        )
    ],
)


@pytest.fixture
def repo(queue: Queue, tmp_path: Path) -> str:
    repositories.add(queue, "app", make_repo(tmp_path / "app"), land="pr", github_repo=GITHUB)
    return "app"


def _queued(queue: Queue, number: int, tip: str) -> LandingStatus:
    return landings.queue(
        queue,
        number,
        repo="app",
        branch=f"issue-{number}",
        worktree_id=None,
        tip=tip,
        by=Authority.of([HOLDER]),
        actor=HOLDER,
    )


def _due(queue: Queue, number: int) -> Due:
    (item,) = [d for d in landings.due(queue, GITHUB) if d.number == number]
    return item


def _claimed(queue: Queue, title: str) -> int:
    number = issues.create(queue, title=title, repository="app").number
    claims.claim(queue, number, Authority.of([HOLDER]))
    return number


def test_refusals_count_rounds_and_the_last_one_blocks_in_one_transaction(
    queue: Queue, repo: str
) -> None:
    number = _claimed(queue, "Refused")
    found: list[LandingFailure] = []
    for round_, tip in enumerate(("a" * 40, "b" * 40, "c" * 40), start=1):
        again = _queued(queue, number, tip)
        assert (again.rounds, again.failure) == (round_ - 1, None)
        stored = landings.refuse(queue, _due(queue, number), "check ci failed", FOUND, actor=ACTOR)
        assert stored is not None and stored.round == round_
        status = landings.require(queue, number)
        assert (status.state, status.rounds, status.failure) == ("refused", round_, stored)
        assert stored.checks[0].title == "Ünïcode title"
        found.append(stored)
    assert [f.blocked for f in found] == [False, False, True] and found[-1].max_rounds == 3
    issue = issues.get(queue, number)
    assert issue.is_blocked and issue.claimed_by is None
    kinds = [e.kind for e in notes.history(queue, number)]
    assert kinds.count("landing_refused") == 3 and kinds.count("blocked") == 1
    said = [c for c in notes.comments(queue, number) if c.kind == CommentKind.BLOCKER]
    assert len(said) == 3 and "**Check `ci ✓`**: failure" in said[0].body


def test_a_landing_that_moved_meanwhile_is_left_alone(queue: Queue, repo: str) -> None:
    number = _claimed(queue, "Moved")
    _queued(queue, number, "a" * 40)
    item = _due(queue, number)
    _queued(queue, number, "b" * 40)  # its holder asked again with a new tip
    assert landings.refuse(queue, item, "too late", FOUND, actor=ACTOR) is None
    status = landings.require(queue, number)
    assert (status.state, status.rounds, status.head_sha) == ("queued", 0, "b" * 40)
    assert not any(e.kind == "landing_refused" for e in notes.history(queue, number))
    assert notes.comments(queue, number) == []


def test_a_block_the_door_refuses_leaves_the_refusal_standing(queue: Queue, repo: str) -> None:
    policies.settle(queue, "max_landing_rounds", "1", repository="app")
    number = _claimed(queue, "Taken over")
    _queued(queue, number, "a" * 40)
    item = _due(queue, number)
    claims.release(queue, number, Authority.of([HOLDER]))
    claims.claim(queue, number, Authority.of(["run-b"]))  # another claim, another fence
    stored = landings.refuse(queue, item, "refused \x00 at last", actor=ACTOR)
    assert stored is not None and (stored.round, stored.max_rounds) == (1, 1)
    assert not stored.blocked and stored.reason == "refused  at last"
    issue = issues.get(queue, number)
    assert not issue.is_blocked and issue.claimed_by == "run-b"
    assert landings.require(queue, number).failure == stored
