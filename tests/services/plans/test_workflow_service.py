"""Seed 000's workflow through the service: the matrix on real claims (every from/to pair
and random sequences), the holder rule, what is recorded, the history and the status."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from tests.conftest import ADMIN, FakeClock
from tests.domain.test_workflow import expected_outcome
from workq.db.tables import events
from workq.domain.authority import Authority
from workq.domain.workflow import PHASE_ORDER, WorkflowPhase
from workq.errors import InvalidInput, InvalidTransition, NotFound, NotHolder
from workq.schemas import FORCE_CLAIM_CONFIRMATION
from workq.services.handle import Queue
from workq.services.plans import workflow
from workq.services.queue import blocking, claims, issues

# The phases are the subject; the tests gate's evidence has tests of its own
# (tests/services/coding).
pytestmark = pytest.mark.usefixtures("trusted_tests_gate")

P = WorkflowPhase
ALL = list(WorkflowPhase)
SETUP = "reaching the phase under test"


def claimed(queue: Queue, title: str = "Fix the login page", holder: str = "run-a") -> int:
    number = issues.create(queue, title=title, issue_type="bug").number
    claims.claim(queue, number, Authority.of({holder}))
    return number


def at(queue: Queue, phase: WorkflowPhase, holder: str = "run-a") -> int:
    """A claimed issue whose workflow is at ``phase`` (selection: untouched)."""
    number = claimed(queue, holder=holder)
    if phase is not P.SELECTION:
        workflow.advance(
            queue,
            number,
            Authority.of({holder}),
            phase,
            tests_passed=True,
            skip_justification=SETUP,
        )
    return number


def current(queue: Queue, number: int) -> WorkflowPhase:
    return workflow.status(queue, number)[0].current_phase


def outcome(
    queue: Queue, number: int, target: WorkflowPhase, tests: bool | None, just: str | None
) -> str:
    try:
        workflow.advance(
            queue,
            number,
            Authority.of({"run-a"}),
            target,
            tests_passed=tests,
            skip_justification=just,
        )
    except InvalidTransition as exc:
        return str(exc.facts["reason"])
    return "ok"


CASES = [
    (src, dst, tests, just)
    for src, dst in itertools.product(ALL, ALL)
    for tests, just in ((None, None), (True, None), (False, None), (None, "hotfix"))
]


def test_every_from_to_pair_follows_seed_000s_matrix(queue: Queue) -> None:
    for src, dst, tests, just in CASES:
        number = at(queue, src)
        assert current(queue, number) is src
        expected = expected_outcome(src.value, dst.value, tests, just)
        assert outcome(queue, number, dst, tests, just) == expected, (src, dst, tests, just)
        assert current(queue, number) is (dst if expected == "ok" else src)


def test_a_refused_move_changes_nothing(queue: Queue) -> None:
    number = at(queue, P.TESTING)
    before = workflow.status(queue, number)
    with queue.db.read() as conn:
        count = len(conn.execute(select(events.c.id)).all())
    assert outcome(queue, number, P.COMMIT, None, None) == "tests_required"
    assert outcome(queue, number, P.RESEARCH, None, None) == "invalid_transition"
    assert workflow.status(queue, number) == before
    with queue.db.read() as conn:
        assert len(conn.execute(select(events.c.id)).all()) == count


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(ALL),
            st.sampled_from([None, True, False]),
            st.sampled_from([None, "", "  ", "docs only"]),
        ),
        max_size=8,
    )
)
def test_random_sequences_match_the_rules(
    queue: Queue, steps: list[tuple[WorkflowPhase, bool | None, str | None]]
) -> None:
    number = claimed(queue)
    phase = "selection"
    history: list[tuple[str, str]] = []
    for target, tests, just in steps:
        expected = expected_outcome(phase, target.value, tests, just)
        assert outcome(queue, number, target, tests, just) == expected
        if expected == "ok":
            history.append((phase, target.value))
            phase = target.value
    status = workflow.status(queue, number)[0]
    assert status.current_phase.value == phase
    assert [(h.from_.value, h.to.value) for h in status.phase_history] == history


def test_only_the_claim_holder_may_advance(queue: Queue) -> None:
    number = claimed(queue, holder="run-a")
    with pytest.raises(NotHolder, match="not locked by this session: run-a holds it") as refused:
        workflow.advance(queue, number, Authority.of({"run-b"}), P.RESEARCH)
    assert refused.value.facts["reason"] == "not_locked"
    free = issues.create(queue, title="unclaimed").number
    with pytest.raises(NotHolder, match="not claimed"):
        workflow.advance(queue, free, Authority.of({"run-a"}), P.RESEARCH)
    with pytest.raises(NotHolder):
        workflow.advance(queue, number, Authority.of(set()), P.RESEARCH)
    with pytest.raises(NotFound):
        workflow.advance(queue, 999, Authority.of({"run-a"}), P.RESEARCH)
    with pytest.raises(InvalidInput, match="unknown workflow phase"):
        workflow.advance(queue, number, Authority.of({"run-a"}), "shipping")
    assert current(queue, number) is P.SELECTION
    workflow.advance(queue, number, Authority.of({"run-b", "run-a"}), P.RESEARCH)
    assert current(queue, number) is P.RESEARCH


def test_the_issue_number_may_be_left_out_when_one_issue_is_held(queue: Queue) -> None:
    with pytest.raises(NotHolder, match="No issue is locked by this session"):
        workflow.advance(queue, None, Authority.of({"run-a"}), P.RESEARCH)
    first = claimed(queue)
    assert workflow.advance(queue, None, Authority.of({"run-a"}), P.RESEARCH).issue_number == first
    claimed(queue, title="second")
    with pytest.raises(InvalidInput, match=r"several issues \(#1, #2\)"):
        workflow.advance(queue, None, Authority.of({"run-a"}), P.BRANCH)


def test_the_branch_name_is_recorded_once_and_kept(queue: Queue) -> None:
    number = claimed(queue, title="Fix: the Login page's Café")
    assert workflow.advance(queue, number, Authority.of({"run-a"}), P.RESEARCH).branch_name is None
    change = workflow.advance(queue, number, Authority.of({"run-a"}), P.BRANCH)
    assert change.branch_name == f"{number}-fix-the-login-pages-cafe"
    issues.update_issue(queue, number, title="Renamed later", by=ADMIN)
    later = workflow.advance(queue, number, Authority.of({"run-a"}), P.IMPLEMENTATION)
    assert later.branch_name == f"{number}-fix-the-login-pages-cafe"
    skipped = claimed(queue, title="Skip ahead")
    jump = workflow.advance(
        queue, skipped, Authority.of({"run-a"}), P.TESTING, skip_justification="spike"
    )
    assert jump.branch_name == f"{skipped}-skip-ahead"
    assert jump.skipped == [P.RESEARCH, P.BRANCH, P.IMPLEMENTATION]


def test_the_tests_gate_records_the_result_or_the_justification(queue: Queue) -> None:
    number = at(queue, P.TESTING)
    refused = outcome(queue, number, P.COMMIT, False, None)
    assert refused == "tests_required"
    passed = workflow.advance(queue, number, Authority.of({"run-a"}), P.COMMIT, tests_passed=True)
    assert (passed.tests_gate, passed.tests_passed) == ("passed", True)
    other = at(queue, P.TESTING)
    skipped = workflow.advance(
        queue,
        other,
        Authority.of({"run-a"}),
        P.COMMIT,
        tests_passed=False,
        skip_justification="CI is down",
    )
    assert (skipped.tests_gate, skipped.tests_passed) == ("justified", False)
    assert skipped.skip_justification == "CI is down"
    status = workflow.status(queue, other)[0]
    assert (status.tests_passed, status.skip_justification) == (False, "CI is down")
    after = _events(queue, other)[-1]
    assert after == {
        "phase": "commit",
        "tests_passed": False,
        "skip_justification": "CI is down",
        "tests_gate": "justified",
    }


def _events(queue: Queue, number: int) -> list[dict[str, object]]:
    with queue.db.read() as conn:
        rows = conn.execute(
            select(events.c.after)
            .where(events.c.number == number, events.c.kind == workflow.EVENT_KIND)
            .order_by(events.c.id)
        ).all()
    return [json.loads(r.after) for r in rows]


def test_the_pr_phase_records_a_title_and_body(queue: Queue) -> None:
    number = at(queue, P.COMMIT)
    change = workflow.advance(queue, number, Authority.of({"run-a"}), P.PR)
    assert change.pr_title == f"bug: Fix the login page (#{number})"
    assert change.pr_number is None
    given = at(queue, P.COMMIT)
    chosen = workflow.advance(
        queue,
        given,
        Authority.of({"run-a"}),
        P.PR,
        pr_title="fix: login",
        pr_body="Body\n\nCloses it",
    )
    assert chosen.pr_title == "fix: login"
    with pytest.raises(InvalidInput):
        workflow.advance(queue, given, Authority.of({"run-a"}), P.REVIEW, pr_title="two\nlines")
    with pytest.raises(InvalidInput):
        workflow.advance(
            queue, given, Authority.of({"run-a"}), P.REVIEW, skip_justification="x" * 2001
        )


def test_status_has_seed_000s_shape_with_lock_duration_and_history(
    queue: Queue, clock: FakeClock
) -> None:
    queue.lease_seconds = 3600  # the claim stays live (a workflow moves on a live claim)
    number = claimed(queue)
    acquired = clock.now
    clock.advance(30)
    workflow.advance(queue, number, Authority.of({"run-a"}), P.RESEARCH)
    clock.advance(60)
    workflow.advance(queue, number, Authority.of({"run-a"}), P.BRANCH)
    clock.advance(10)
    status = workflow.status(queue, number, Authority.of({"run-a"}))[0]
    assert status.lock_duration == 100 and status.lock_acquired_at == acquired
    shape = status.model_dump(mode="json")
    assert shape == {
        "issueNumber": number,
        "title": "Fix the login page",
        "currentPhase": "branch",
        "branchName": f"{number}-fix-the-login-page",
        "testsPassed": None,
        "skipJustification": None,
        "prNumber": None,
        "prTitle": None,
        "prUrl": None,
        "lockHolder": "run-a",
        "lockAcquiredAt": "2026-01-01T12:00:00Z",
        "lockDuration": 100,
        "phaseHistory": [
            {"from": "selection", "to": "research", "timestamp": "2026-01-01T12:00:30Z"},
            {"from": "research", "to": "branch", "timestamp": "2026-01-01T12:01:30Z"},
        ],
    }


def test_status_of_every_issue_the_caller_holds(queue: Queue) -> None:
    first = at(queue, P.RESEARCH)
    second = claimed(queue, title="second")
    claimed(queue, title="someone else's", holder="run-b")
    issues.create(queue, title="unclaimed")
    mine = workflow.status(queue, None, Authority.of({"run-a"}))
    assert [(s.issue_number, s.current_phase) for s in mine] == [
        (first, P.RESEARCH),
        (second, P.SELECTION),
    ]
    assert len(workflow.status(queue)) == 3
    assert workflow.status(queue, None, Authority.of(set())) == []
    with pytest.raises(NotHolder):
        workflow.status(queue, 3, Authority.of({"run-a"}))
    with pytest.raises(NotHolder, match="not claimed"):
        workflow.status(queue, 4)


def test_a_workflow_ends_with_its_claim_and_survives_a_takeover(
    queue: Queue, clock: FakeClock
) -> None:
    number = at(queue, P.IMPLEMENTATION)
    claims.force_claim(queue, number, Authority.of({"run-b"}), FORCE_CLAIM_CONFIRMATION)
    kept = workflow.status(queue, number)[0]
    assert kept.current_phase is P.IMPLEMENTATION and kept.lock_holder == "run-b"
    workflow.advance(queue, number, Authority.of({"run-b"}), P.TESTING)
    clock.advance(3600)  # the lease expires; another agent takes the issue over
    claims.claim(queue, number, Authority.of({"run-c"}))
    assert current(queue, number) is P.TESTING
    for ending in ("release", "block", "complete"):
        number = at(queue, P.PR)
        if ending == "release":
            claims.release(queue, number, Authority.of({"run-a"}))
        elif ending == "block":
            blocking.block(queue, number, "waiting", by=Authority.overriding("admin", who="admin"))
            blocking.unblock(queue, number)
        else:
            claims.complete(queue, number, Authority.of({"run-a"}))
            issues.reopen(queue, number)
        claims.claim(queue, number, Authority.of({"run-d"}))
        fresh = workflow.status(queue, number)[0]
        assert fresh.current_phase is P.SELECTION, ending
        assert fresh.branch_name is None and fresh.pr_title is None and fresh.phase_history == []
        change = workflow.advance(queue, number, Authority.of({"run-d"}), P.RESEARCH)
        assert change.previous_phase is P.SELECTION


def test_abandoned_is_final_for_the_claim(queue: Queue) -> None:
    number = at(queue, P.BRANCH)
    change = workflow.advance(queue, number, Authority.of({"run-a"}), P.ABANDONED)
    assert change.current_phase is P.ABANDONED and change.branch_name is not None
    for target in PHASE_ORDER[1:]:
        assert outcome(queue, number, target, True, "anything") == "invalid_transition"
    claims.release(queue, number, Authority.of({"run-a"}))
    claims.claim(queue, number, Authority.of({"run-a"}))
    assert (
        workflow.advance(queue, number, Authority.of({"run-a"}), P.RESEARCH).previous_phase
        is P.SELECTION
    )
