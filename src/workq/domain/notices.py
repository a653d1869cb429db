"""The notices people can ask for: each one's name, the audit events that raise it, what it
says, and the next step it points to.

A sink (a webhook or a local command) takes the notices named in its ``events``; each event
of one of the kinds below queues one notice per sink that takes it, in the event's own
transaction (services/notices/outbox.py).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Notice:
    name: str
    kinds: tuple[str, ...]  # the audit events (``events.kind``) that raise it
    about: str  # what happened, for the list of events in help and docs
    next_step: str  # what a person does next; {number} is the number


NOTICES: dict[str, Notice] = {
    n.name: n
    for n in (
        Notice(
            "stalled",
            ("stalled",),
            "a claim made no progress for stall_after",
            "workq show {number}, then ask its agent, or: workq release {number} --force",
        ),
        Notice(
            "work_left",
            ("work_saved",),
            "a claim ended (lapsed, released, taken over) with commits or edits not landed",
            "workq show {number}: its next claim starts from the saved work",
        ),
        Notice(
            "gates_failing",
            ("gates_failing",),
            "the gates failed gate_failures times in a row on one issue",
            "workq gates evidence {number}",
        ),
        Notice(
            "landing_refused",
            ("landing_refused",),
            "a landing through a pull request was refused (a failing check, a review)",
            "workq show {number}: the failure is in its landing",
        ),
        Notice(
            "blocked",
            ("blocked",),
            "an issue was blocked: a person is needed",
            "workq show {number}, then: workq unblock {number}",
        ),
        Notice(
            "plan_waiting",
            ("plan_waiting",),
            "a plan reached Review and waits for a person's approval",
            "workq plan show",
        ),
        Notice(
            "github_stopped",
            ("sync_stopped",),
            "the GitHub worker stopped (its token was refused)",
            "renew the token, then: workq sync github --repo OWNER/NAME",
        ),
        Notice(
            "drained",
            ("queue_drained",),
            "the queue drained: nothing ready, nothing claimed",
            "workq create ... (or workq list --status blocked)",
        ),
    )
}

# The audit event kinds that raise a notice, and which.
BY_KIND: dict[str, str] = {kind: n.name for n in NOTICES.values() for kind in n.kinds}


def names(text: str) -> list[str]:
    """The notice names in ``text`` (comma- or space-separated; ``all`` is every one), in
    the order of :data:`NOTICES`, each once.

    Raises:
        ValueError: an unknown name (the message names it and the known ones), or none.
    """
    given = [w for w in text.replace(",", " ").split() if w]
    if not given:
        raise ValueError("name at least one event: " + ", ".join(NOTICES))
    if "all" in given:
        return list(NOTICES)
    unknown = [w for w in given if w not in NOTICES]
    if unknown:
        raise ValueError(f"unknown event {unknown[0]!r}; the events are " + ", ".join(NOTICES))
    return [n for n in NOTICES if n in given]
