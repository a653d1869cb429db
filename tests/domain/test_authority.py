"""The authority value and the decision table (domain/decisions.py): who may do what to an
issue's claim, decided by one pure function."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workq.domain.authority import Authority
from workq.domain.decisions import RULES, Action, Facts, May, decide, live
from workq.errors import (
    AlreadyClaimed,
    InvalidInput,
    LeaseLapsed,
    NotClaimable,
    NotHolder,
    OpenBlockers,
    PlanModeActive,
    StaleClaim,
)

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
LIVE = NOW + timedelta(minutes=10)
LAPSED = NOW - timedelta(minutes=1)
MINE = Authority.of({"run-a", "agent-1"}, acts_as="run-a")
OTHER = Authority.of({"run-b"})
ADMIN = Authority.overriding("workq release --force", who="alice")


def held(by: str = "run-a", *, until: datetime = LIVE, fence: int = 3, **more: object) -> Facts:
    return Facts(
        number=7,
        status="in_progress",
        holder=by,
        fence=fence,
        lease_expires_at=until,
        **more,  # type: ignore[arg-type]
    )


OPEN = Facts(number=7, status="open", holder=None, fence=3, lease_expires_at=None)
DONE = Facts(number=7, status="done", holder=None, fence=3, lease_expires_at=None)


def test_a_holder_acts_only_on_its_own_claims() -> None:
    by = Authority.of({"run-a", "agent-1"}, fence=3)
    assert by.allows("run-a") and by.allows("agent-1")
    assert not by.allows("run-b") and not by.allows(None)
    assert by.fence == 3 and by.acts_as is None  # two run ids: it names none to claim under
    assert by.shown() == "agent-1, run-a"
    assert Authority.of({"x"}).acts_as == "x"


def test_an_override_names_its_reason_and_who_made_it() -> None:
    admin = Authority.overriding("workq release --force", fence=2, who="alice")
    assert admin.allows("run-b") and admin.allows(None) and admin.fence == 2
    assert admin.recorded() == {"forced": True, "override": "workq release --force", "by": "alice"}
    assert MINE.recorded() == {}
    with pytest.raises(ValueError, match="reason"):
        Authority.overriding("  ", who="alice")
    with pytest.raises(ValueError, match="who"):
        Authority.overriding("why", who=" ")


def test_every_action_has_a_row() -> None:
    assert set(RULES) == set(Action)


@pytest.mark.parametrize("action", [a for a in Action if RULES[a].may is May.HOLDER])
def test_holder_actions_refuse_another_caller_and_no_claim(action: Action) -> None:
    assert decide(action, held(), MINE, NOW) is None
    assert isinstance(decide(action, held(), OTHER, NOW), NotHolder)
    assert isinstance(decide(action, OPEN, MINE, NOW), NotHolder)
    overridden = decide(action, held(), ADMIN, NOW)
    assert (overridden is None) == RULES[action].override


@pytest.mark.parametrize("action", [a for a in Action if RULES[a].may is May.UNLESS_HELD])
def test_unless_held_actions_are_anyones_until_another_claim_is_live(action: Action) -> None:
    assert decide(action, OPEN, OTHER, NOW) is None
    assert decide(action, held(until=LAPSED), OTHER, NOW) is None  # a lapsed claim guards nothing
    assert decide(action, held(), MINE, NOW) is None
    assert isinstance(decide(action, held(), OTHER, NOW), NotHolder)
    assert decide(action, held(), ADMIN, NOW) is None


@pytest.mark.parametrize("action", [a for a in Action if RULES[a].may is May.ANYONE])
def test_anyone_actions_need_no_claim(action: Action) -> None:
    for facts in (OPEN, held(), held(until=LAPSED)):
        assert decide(action, facts, OTHER, NOW) is None


@pytest.mark.parametrize("action", [a for a in Action if RULES[a].lease])
def test_a_lapsed_lease_refuses_what_needs_a_live_claim(action: Action) -> None:
    refused = decide(action, held(until=LAPSED), MINE, NOW)
    assert isinstance(refused, LeaseLapsed) and refused.facts["number"] == 7


def test_a_stale_fence_is_refused_before_anything_else() -> None:
    old = MINE.with_fence(2)
    for action in Action:
        refused = decide(action, held(fence=3), old, NOW)
        assert isinstance(refused, StaleClaim), action
        assert refused.facts["latest_fence"] == 3
    assert isinstance(decide(Action.COMPLETE, held(), MINE.with_fence(9), NOW), InvalidInput)
    assert decide(Action.COMPLETE, held(), MINE.with_fence(3), NOW) is None


@pytest.mark.parametrize("action", [a for a in Action if RULES[a].planning])
def test_plan_mode_refuses_unless_overridden(action: Action) -> None:
    planning = ("run-a", "parser", "Design")
    claiming = action in (Action.CLAIM, Action.FORCE_CLAIM)
    facts = Facts(**{**(OPEN if claiming else held()).__dict__, "planning": planning})
    refused = decide(action, facts, MINE, NOW)
    assert isinstance(refused, PlanModeActive) and refused.facts["slug"] == "parser"
    # An override (--ignore-plan-mode, here by the holder's own person) waives plan mode.
    admin = Authority.overriding("--ignore-plan-mode", who="alice", acts_as="run-a")
    assert decide(action, facts, admin, NOW) is None


def test_completing_waits_for_blockers_unless_overridden() -> None:
    waiting = held(open_blockers=1, waits_on=(4,))
    refused = decide(Action.COMPLETE, waiting, MINE, NOW)
    assert isinstance(refused, OpenBlockers) and refused.facts["waits_on"] == [4]
    assert decide(Action.COMPLETE, waiting, ADMIN, NOW) is None


def test_claims() -> None:
    me = Authority.of({"run-a"})
    assert decide(Action.CLAIM, OPEN, me, NOW) is None
    assert decide(Action.CLAIM, held("run-b", until=LAPSED), me, NOW) is None  # a takeover
    taken = decide(Action.CLAIM, held("run-b"), me, NOW)
    assert isinstance(taken, AlreadyClaimed) and taken.facts["holder"] == "run-b"
    assert isinstance(decide(Action.CLAIM, DONE, me, NOW), NotClaimable)
    blocked = Facts(**{**OPEN.__dict__, "blocked_reason": "needs a key"})
    assert isinstance(decide(Action.CLAIM, blocked, me, NOW), NotClaimable)
    assert isinstance(decide(Action.CLAIM, OPEN, Authority.of(()), NOW), NotHolder)
    # A force-claim (confirmed: the service checks) takes a live claim, never a blocked issue.
    assert decide(Action.FORCE_CLAIM, held("run-b"), me, NOW) is None
    assert isinstance(decide(Action.FORCE_CLAIM, blocked, me, NOW), NotClaimable)
    assert isinstance(decide(Action.FORCE_CLAIM, OPEN, Authority.of(()), NOW), NotHolder)


def test_done_is_a_noop_to_complete_and_refused_to_heartbeat() -> None:
    assert decide(Action.COMPLETE, DONE, OTHER, NOW) is None
    assert isinstance(decide(Action.HEARTBEAT, DONE, MINE, NOW), NotClaimable)
    assert decide(Action.DELETE, DONE, OTHER, NOW) is None


statuses = st.sampled_from(["open", "in_progress", "done"])
holders = st.sampled_from([None, "run-a", "run-b"])
leases = st.sampled_from([None, LAPSED, LIVE])
callers = st.sampled_from([MINE, OTHER, ADMIN, Authority.of(())])


@given(st.sampled_from(list(Action)), statuses, holders, leases, callers, st.booleans())
def test_another_callers_live_claim_is_only_ever_acted_on_by_an_override(
    action: Action,
    status: str,
    holder: str | None,
    until: datetime | None,
    by: Authority,
    waiting: bool,
) -> None:
    """The promise, over every action and fact: a live claim of another caller is changed
    by a caller that does not hold it only through an action anyone may do, a confirmed
    force-claim (the one way to take a live claim), or an override."""
    facts = Facts(
        number=7,
        status=status,
        holder=holder,
        fence=3,
        lease_expires_at=until,
        open_blockers=int(waiting),
        waits_on=(4,) if waiting else (),
    )
    allowed = decide(action, facts, by, NOW) is None
    theirs = live(facts, NOW) and facts.holder not in by.run_ids
    if allowed and theirs and RULES[action].may is not May.ANYONE:
        assert by.override is not None or action is Action.FORCE_CLAIM, (action, facts, by)
