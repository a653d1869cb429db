"""Issue workflow phases (contract B's ``advance_workflow``) and branch names.

A claimed issue moves through one fixed order of phases::

    selection -> research -> branch -> implementation -> testing -> commit -> pr -> review

and may drop to ``abandoned`` from any of them. Contract B's Phase Validation Matrix, made
total by ``check_transition``:

- One step forward needs nothing, except testing -> commit, which needs
  ``tests_passed=True`` or a skip justification (refused with reason ``tests_required``).
- More than one step forward skips phases and needs a skip justification (refused with
  reason ``invalid_transition`` without one). That justification also covers the tests
  gate when the jump crosses into commit, since the contract accepts
  ``testsPassed=true OR skipJustification`` there.
- Any phase -> abandoned needs nothing.
- Everything else is refused with reason ``invalid_transition``: staying put, going back,
  going to selection (it is only ever the start), and leaving abandoned, which is final
  (abandoned -> abandoned included).

Refusals raise ``InvalidTransition`` with the contract's message
``Cannot advance from {from} to {to}`` and the facts ``reason``, ``from_phase`` and
``to_phase``. A blank justification counts as none.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal, NoReturn

from workq.domain import fields
from workq.errors import Hint, InvalidInput, InvalidTransition, Step

__all__ = [
    "BRANCH_MAX",
    "JUSTIFICATION_MAX",
    "PHASE_ORDER",
    "TransitionCheck",
    "WorkflowPhase",
    "at_or_after",
    "branch_name",
    "check_transition",
    "next_phase",
    "parse_phase",
    "validate_justification",
]

BRANCH_MAX = 60
JUSTIFICATION_MAX = 2_000


class WorkflowPhase(StrEnum):
    SELECTION = "selection"
    RESEARCH = "research"
    BRANCH = "branch"
    IMPLEMENTATION = "implementation"
    TESTING = "testing"
    COMMIT = "commit"
    PR = "pr"
    REVIEW = "review"
    ABANDONED = "abandoned"


PHASE_ORDER: tuple[WorkflowPhase, ...] = tuple(
    p for p in WorkflowPhase if p is not WorkflowPhase.ABANDONED
)
_POSITION = {phase: i for i, phase in enumerate(PHASE_ORDER)}


def parse_phase(value: object) -> WorkflowPhase:
    """The phase named by ``value``, case-insensitively.

    Raises:
        InvalidInput: ``value`` names no workflow phase.
    """
    if isinstance(value, str):
        try:
            return WorkflowPhase(value.strip().lower())
        except ValueError:
            pass
    raise InvalidInput(
        f"unknown workflow phase {value!r:.80}; expected one of "
        + ", ".join(p.value for p in WorkflowPhase),
        field="targetPhase",
    )


def next_phase(phase: WorkflowPhase) -> WorkflowPhase | None:
    """The phase one step after ``phase``; None after review and after abandoned."""
    position = _POSITION.get(phase)
    if position is None or position + 1 >= len(PHASE_ORDER):
        return None
    return PHASE_ORDER[position + 1]


def at_or_after(phase: WorkflowPhase, reference: WorkflowPhase) -> bool:
    """Whether ``phase`` is ``reference`` or later in the order (never for abandoned).

    For example ``at_or_after(p, WorkflowPhase.BRANCH)`` says a branch name belongs in the
    status of a workflow in phase ``p``.
    """
    position, ref = _POSITION.get(phase), _POSITION.get(reference)
    return position is not None and ref is not None and position >= ref


def validate_justification(text: object) -> str | None:
    """The justification stripped; None when absent or blank.

    Raises:
        InvalidInput: not text, holding control characters, or longer than
            ``JUSTIFICATION_MAX``.
    """
    if text is None:
        return None
    if not isinstance(text, str):
        raise InvalidInput(
            f"skipJustification must be text, not {type(text).__name__}",
            field="skipJustification",
        )
    fields.characters(text, "skipJustification", multiline=True)  # as given, then trimmed
    cleaned = fields.text(
        text.strip(), "skipJustification", limit=JUSTIFICATION_MAX, multiline=True
    )
    return cleaned or None


@dataclass(frozen=True)
class TransitionCheck:
    """An accepted transition, with what the caller should record about it."""

    previous: WorkflowPhase
    current: WorkflowPhase
    skipped: tuple[WorkflowPhase, ...]
    """Phases passed over, in order; empty for a single step or for abandoning."""
    tests_passed: bool | None
    """The value the caller gave, to record as the workflow's tests result."""
    justification: str | None
    """The cleaned skip justification, if one was given; log it."""
    tests_gate: Literal["passed", "justified"] | None
    """How the move into commit was allowed; None when it did not cross into commit."""

    @property
    def is_skip(self) -> bool:
        return bool(self.skipped)

    @property
    def abandons(self) -> bool:
        return self.current is WorkflowPhase.ABANDONED


def check_transition(
    current: WorkflowPhase | str,
    target: WorkflowPhase | str,
    *,
    tests_passed: bool | None,
    skip_justification: str | None,
) -> TransitionCheck:
    """Check a move from ``current`` to ``target`` against the rules in the module docstring.

    Raises:
        InvalidInput: an unknown phase, a non-boolean ``tests_passed``, or a justification
            that is not text or is too long.
        InvalidTransition: the move is not allowed; ``facts["reason"]`` is
            ``"tests_required"`` or ``"invalid_transition"``.
    """
    src, dst = parse_phase(current), parse_phase(target)
    if tests_passed is not None and not isinstance(tests_passed, bool):
        raise InvalidInput(
            f"testsPassed must be true or false, not {tests_passed!r:.80}",
            field="testsPassed",
        )
    justification = validate_justification(skip_justification)

    def refuse(hint: Hint, reason: str = "invalid_transition", **facts: object) -> NoReturn:
        message = f"Cannot advance from {src.value} to {dst.value}"
        if reason == "tests_required":
            message += ": tests must pass first"
        raise InvalidTransition(
            message,
            hint=hint,
            reason=reason,
            from_phase=src.value,
            to_phase=dst.value,
            **facts,
        )

    if src is WorkflowPhase.ABANDONED:
        refuse("an abandoned workflow is final; it cannot move again")
    if dst is WorkflowPhase.ABANDONED:
        return TransitionCheck(src, dst, (), tests_passed, justification, None)

    start, end = _POSITION[src], _POSITION[dst]
    if end <= start:
        following = next_phase(src)
        where = (
            f"the next phase is {following.value}, or abandoned"
            if following
            else "review is the last phase; only abandoned remains"
        )
        refuse(f"phases only move forward: {where}")
    skipped = PHASE_ORDER[start + 1 : end]
    if skipped and justification is None:
        names = ", ".join(p.value for p in skipped)
        refuse(
            (
                "pass ",
                Step.SKIP_JUSTIFICATION,
                f" to skip {names}, or advance one phase at a time "
                f"(next: {PHASE_ORDER[start + 1].value})",
            ),
            skipped=[p.value for p in skipped],
        )

    gate: Literal["passed", "justified"] | None = None
    commit = _POSITION[WorkflowPhase.COMMIT]
    if start < commit <= end:
        if tests_passed is True:
            gate = "passed"
        elif justification is not None:
            gate = "justified"
        else:
            refuse(
                (
                    "run the tests and pass ",
                    Step.TESTS_PASSED,
                    ", or pass ",
                    Step.SKIP_JUSTIFICATION,
                    " saying why not",
                ),
                reason="tests_required",
            )
    return TransitionCheck(src, dst, skipped, tests_passed, justification, gate)


_WORD_RE = re.compile(r"[a-z0-9]+")
_FALLBACK = "issue"


def branch_name(number: int, title: str) -> str:
    """``{number}-{kebab-case-title}``: ASCII ``[a-z0-9-]``, at most ``BRANCH_MAX`` long.

    Accents are folded (``Café`` -> ``cafe``), apostrophes dropped, every other run of
    non-alphanumerics becomes one hyphen. The title is cut at a word boundary to fit (a
    single over-long word is cut itself); a title with nothing usable gives
    ``{number}-issue``. The result never ends with a hyphen and is a valid git ref name.

    Raises:
        InvalidInput: ``number`` is not a positive integer (or too large to leave room for
            a title), or ``title`` is not text.
    """
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise InvalidInput(
            f"the issue number must be a positive integer, not {number!r:.80}",
            field="number",
        )
    if not isinstance(title, str):
        raise InvalidInput(f"the title must be text, not {type(title).__name__}", field="title")
    prefix = f"{number}-"
    room = BRANCH_MAX - len(prefix)
    if room < len(_FALLBACK):
        raise InvalidInput(f"issue number {number} is too large for a branch name")
    folded = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode("ascii")
    words = _WORD_RE.findall(re.sub(r"['`]", "", folded.lower()))
    slug = ""
    for word in words:
        candidate = f"{slug}-{word}" if slug else word
        if len(candidate) > room:
            if not slug:
                slug = word[:room]
            break
        slug = candidate
    return prefix + (slug or _FALLBACK)
