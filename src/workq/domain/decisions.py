"""Who may act on an issue's claim: the one table every face goes through.

``decide(action, facts, by, now)`` answers None (allowed) or the refusal to raise, with
its code, the facts and the next step. It is pure: ``services/queue/door.py`` loads the
facts inside the transaction that makes the change and applies it, and a long step (git,
gates, a GitHub call) asks again before every external write.

Reading the table (``RULES``) tells the whole rule. Its columns:

- ``may``: who may act. ``ANYONE``; ``CLAIMER`` (any caller claiming under its own run id:
  while nobody else holds a live claim, or, for a force-claim (confirmed), whoever does);
  ``HOLDER`` (one of the caller's run ids holds the claim, and with a fence, that very claim);
  ``UNLESS_HELD`` (anyone, unless another caller holds a live claim: then only its holder).
- ``override``: whether an override (a person's ``--force``, the board, the GitHub worker;
  it names who and why, recorded with the change) may act in the holder's place.
- ``lease``: the holder's lease must still be live (a lapsed claim may have been claimed
  again, or its reservations taken).
- ``planning``: refused while one of the caller's run ids is in plan mode (read-only work).
- ``waiting``: refused while the issue waits on unfinished issues (an override may).
- ``done``: what a done issue means: ``"noop"`` (the action is already done), ``"allow"``,
  or ``"refuse"``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import Enum, StrEnum

from workq.domain import dates, leases
from workq.domain.authority import Authority
from workq.errors import (
    AlreadyClaimed,
    InvalidInput,
    LeaseLapsed,
    NotClaimable,
    NotHolder,
    OpenBlockers,
    PlanModeActive,
    StaleClaim,
    Step,
    WorkqError,
)


class Action(StrEnum):
    CLAIM = "claim"
    FORCE_CLAIM = "force-claim"
    HEARTBEAT = "heartbeat"
    COMPLETE = "complete"
    RELEASE = "release"
    BLOCK = "block"
    UNBLOCK = "unblock"
    EDIT = "edit"  # title, description, priority, type, labels, criteria
    RESHAPE = "reshape"  # touches, repository: what a claim's reservations and worktree use
    DELETE = "delete"
    REOPEN = "reopen"
    DEPEND = "depend"
    COMMENT = "comment"
    RESERVE = "reserve"
    UNRESERVE = "unreserve"
    STEP = "step"  # a workflow step, a branch, a commit on the claim's checkout
    GATES = "gates"  # run the quality gates on the claim's checkout, store the evidence
    MERGE = "merge"
    QUEUE_LANDING = "queue-landing"
    LAND = "land"  # each push and merge call of the landing worker
    REMOVE_WORKTREE = "remove-worktree"


class May(Enum):
    ANYONE = "anyone"
    CLAIMER = "a caller claiming under its own run id"
    HOLDER = "the holder (with its fence)"
    UNLESS_HELD = "anyone, unless another caller holds a live claim"


@dataclass(frozen=True)
class Rule:
    may: May
    override: bool = False
    lease: bool = False
    planning: bool = False
    waiting: bool = False
    done: str = "allow"  # "allow" | "noop" | "refuse"


RULES: dict[Action, Rule] = {
    Action.CLAIM: Rule(May.CLAIMER, planning=True, waiting=True, done="refuse"),
    Action.FORCE_CLAIM: Rule(May.CLAIMER, planning=True, waiting=True, done="refuse"),
    Action.HEARTBEAT: Rule(May.HOLDER, lease=True, done="refuse"),
    Action.COMPLETE: Rule(May.HOLDER, override=True, planning=True, waiting=True, done="noop"),
    Action.RELEASE: Rule(May.HOLDER, override=True, done="refuse"),
    Action.BLOCK: Rule(May.UNLESS_HELD, override=True, done="refuse"),
    Action.UNBLOCK: Rule(May.ANYONE),
    Action.EDIT: Rule(May.ANYONE),
    Action.RESHAPE: Rule(May.UNLESS_HELD, override=True),
    Action.DELETE: Rule(May.UNLESS_HELD, override=True),
    Action.REOPEN: Rule(May.ANYONE),
    Action.DEPEND: Rule(May.ANYONE),
    Action.COMMENT: Rule(May.ANYONE),
    Action.RESERVE: Rule(May.HOLDER, lease=True, done="refuse"),
    Action.UNRESERVE: Rule(May.HOLDER, override=True, lease=True, done="refuse"),
    Action.STEP: Rule(May.HOLDER, lease=True, planning=True, done="refuse"),
    Action.GATES: Rule(May.HOLDER, lease=True, done="refuse"),
    Action.MERGE: Rule(May.HOLDER, override=True, lease=True, planning=True, waiting=True),
    Action.QUEUE_LANDING: Rule(May.HOLDER, lease=True, planning=True, waiting=True),
    Action.LAND: Rule(May.HOLDER, lease=True, planning=True, waiting=True, done="refuse"),
    Action.REMOVE_WORKTREE: Rule(May.UNLESS_HELD, override=True),
}

# How a refusal names the action to a person ("before you complete it").
_VERB = {
    Action.FORCE_CLAIM: "take over",
    Action.EDIT: "edit",
    Action.RESHAPE: "change the paths or repository of",
    Action.QUEUE_LANDING: "land",
    Action.LAND: "land",
    Action.STEP: "work on",
    Action.GATES: "run the gates of",
    Action.REMOVE_WORKTREE: "remove the worktree of",
}


def verb(action: Action) -> str:
    """How a refusal names the action: "before you complete it"."""
    return _VERB.get(action, action.value)


@dataclass(frozen=True)
class Facts:
    """What the table reads of an issue, loaded in the transaction that acts on it."""

    number: int
    status: str  # open | in_progress | done
    holder: str | None
    fence: int
    lease_expires_at: datetime | None
    blocked_reason: str | None = None  # set: the issue is blocked
    open_blockers: int = 0
    waits_on: tuple[int, ...] = ()  # the unfinished issues it waits on (when asked)
    planning: tuple[str, str, str] | None = None  # (run id, slug, phase) of a caller's plan


def live(facts: Facts, now: datetime) -> bool:
    """Whether the issue has a claim whose lease has not lapsed."""
    return (
        facts.status == "in_progress"
        and facts.holder is not None
        and leases.live(facts.lease_expires_at, now)
    )


def decide(action: Action, facts: Facts, by: Authority, now: datetime) -> WorkqError | None:
    """None if ``by`` may do ``action`` on the issue ``facts`` describe; else the refusal."""
    rule = RULES[action]
    n = facts.number
    named = verb(action)
    stale = _stale_fence(facts, by)
    if stale is not None:
        return stale
    if facts.status == "done" and rule.done != "allow":
        if rule.done == "noop":
            return None
        said = "" if action in (Action.CLAIM, Action.FORCE_CLAIM) else f"; nothing to {named}"
        return NotClaimable(f"Issue #{n} is done{said}", number=n, status="done")
    who = _who(rule, action, facts, by, now, named)
    if who is not None:
        return who
    if rule.lease and not by.override and not live(facts, now) and facts.holder is not None:
        until = facts.lease_expires_at
        at = f"at {dates.stamp(until)}" if until else "(it had no lease)"
        return LeaseLapsed(
            f"Your claim on issue #{n} lapsed {at}; its reservations ended with it",
            number=n,
            lease_expires_at=dates.iso(until) if until else None,
        )
    if rule.planning and not by.override and facts.planning is not None:
        return plan_mode_active(facts.planning, named)
    unfinished = facts.blocked_reason is not None or facts.open_blockers
    claiming = action in (Action.CLAIM, Action.FORCE_CLAIM)
    if rule.waiting and unfinished and (claiming or not by.override):
        return _waiting(action, facts)
    return None


def _who(
    rule: Rule, action: Action, facts: Facts, by: Authority, now: datetime, verb: str
) -> WorkqError | None:
    n = facts.number
    mine = facts.holder is not None and facts.holder in by.run_ids
    if rule.may is May.ANYONE:
        return None
    if rule.may is May.CLAIMER:
        if by.acts_as is None:
            return NotHolder(
                f"Issue #{n} cannot be claimed without a run id to claim it under",
                number=n,
                hint="name a run id (--run-id) to claim it",
            )
        if action is Action.FORCE_CLAIM:
            return None  # its confirmation is the service's to check
        if live(facts, now) and facts.holder != by.acts_as and facts.holder is not None:
            until = facts.lease_expires_at
            return AlreadyClaimed(
                f"Issue #{n} is held by {facts.holder}"
                + (f" until {dates.stamp(until)}" if until else ""),
                number=n,
                holder=facts.holder,
                lease_expires_at=dates.iso(until) if until else None,
            )
        return None
    if rule.may is May.UNLESS_HELD:
        if not live(facts, now) or mine or by.override:
            return None
        return _held_by_another(facts, by, action)
    # HOLDER
    if facts.status != "in_progress" or facts.holder is None:
        return NotHolder(
            f"Issue #{n} is not claimed",
            number=n,
            hint=("claim it with ", Step.CLAIM, f" before you {verb} it"),
        )
    if mine or (rule.override and by.override):
        return None
    return _held_by_another(facts, by, action)


def _held_by_another(facts: Facts, by: Authority, action: Action) -> NotHolder:
    anyway = {Action.COMPLETE: Step.COMPLETE_ANYWAY, Action.RELEASE: Step.RELEASE_ANYWAY}
    until = facts.lease_expires_at
    return NotHolder(
        f"Issue #{facts.number} is held by {facts.holder}, not by you ({by.shown()})",
        hint=(
            "ask its holder to release it, or take it over: ",
            anyway.get(action, Step.FORCE_CLAIM),
        ),
        number=facts.number,
        holder=facts.holder,
        lease_expires_at=dates.iso(until) if until else None,
    )


def _stale_fence(facts: Facts, by: Authority) -> WorkqError | None:
    """StaleClaim unless the caller's fence (when given) is the issue's latest claim's."""
    fence, n = by.fence, facts.number
    if fence is None or fence == facts.fence:
        return None
    if fence > facts.fence:
        return InvalidInput(
            f"Issue #{n} has had no claim with fencing token {fence} (its latest is {facts.fence})",
            field="fence",
        )
    if facts.holder is not None:
        newer = f"claim {facts.fence}, held by {facts.holder}"
    else:
        newer = f"claim {facts.fence}, since ended ({facts.status})"
    return StaleClaim(
        f"Issue #{n} was claimed again after your claim {fence}: {newer}",
        number=n,
        fence=fence,
        latest_fence=facts.fence,
        holder=facts.holder,
        status=facts.status,
    )


def plan_mode_active(found: tuple[str, str, str], verb: str) -> PlanModeActive:
    run_id, slug, phase = found
    return PlanModeActive(
        f"Run {run_id} is in plan mode (plan {slug}, phase {phase}): to {verb} is refused "
        "while planning, which is read-only work",
        hint=(
            "finish the plan first (",
            Step.ADVANCE_PLAN,
            ", then ",
            Step.EXIT_PLAN,
            "); creating, listing and reading issues stay allowed",
        ),
        run_id=run_id,
        slug=slug,
    )


def _waiting(action: Action, facts: Facts) -> WorkqError:
    n = facts.number
    if action in (Action.CLAIM, Action.FORCE_CLAIM):
        if facts.blocked_reason is not None:
            return NotClaimable(
                f"Issue #{n} is blocked: {facts.blocked_reason}",
                number=n,
                blocked_reason=facts.blocked_reason,
                hint=("unblock it with ", Step.UNBLOCK, ", or pick another with ", Step.READY),
            )
        return NotClaimable(
            f"Issue #{n} waits on {facts.open_blockers} unfinished issue(s)",
            number=n,
            open_blockers=facts.open_blockers,
            hint=(
                "finish its blockers first (see ",
                Step.SHOW_ISSUE,
                "), or pick another with ",
                Step.READY,
            ),
        )
    shown = ", ".join(f"#{w}" for w in facts.waits_on) or f"{facts.open_blockers} issue(s)"
    verb = "is" if len(facts.waits_on) == 1 else "are"
    return OpenBlockers(
        f"Issue #{n} waits on {shown}, which {verb} not done",
        number=n,
        waits_on=list(facts.waits_on),
    )
