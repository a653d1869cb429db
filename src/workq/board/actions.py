"""What a person may do from the board: each action reads its JSON body, acts through the
services with the board's authority, and says what it did (board/app.py serves them)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workq.domain.authority import Authority
from workq.errors import InvalidInput
from workq.schemas import COMMENT_MAX
from workq.services.handle import Queue
from workq.services.queue import blocking, claims, issues, notes


def _text(body: dict[str, Any], key: str, *, required: bool = True) -> str | None:
    value = body.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        raise InvalidInput(f"{key} must be text", field=key)
    return value


def _reprioritise(q: Queue, number: int, body: dict[str, Any], by: Authority) -> str:
    priority = _text(body, "priority")
    issue = issues.update_issue(q, number, priority=priority, by=by, actor=by.who)
    return f"Issue #{number} is now {issue.priority.value}"


def _unblock(q: Queue, number: int, body: dict[str, Any], by: Authority) -> str:
    blocking.unblock(q, number, actor=by.who)
    return f"Unblocked issue #{number}"


def _release(q: Queue, number: int, body: dict[str, Any], by: Authority) -> str:
    reason = _text(body, "reason", required=False) or None
    claims.release(q, number, by, reason=reason, actor=by.who)
    return f"Released issue #{number}"


def _force_claim(q: Queue, number: int, body: dict[str, Any], by: Authority) -> str:
    run_id = _text(body, "run_id", required=False) or str(by.who)
    confirmation = _text(body, "confirmation", required=False) or ""
    taken = claims.force_claim(q, number, by.claiming_as(run_id), confirmation)
    return f"Issue #{number} is now held by {taken.claimed_by}"


def _comment(q: Queue, number: int, body: dict[str, Any], by: Authority) -> str:
    text = _text(body, "body")
    assert text is not None
    if len(text) > COMMENT_MAX:
        raise InvalidInput(f"a comment holds at most {COMMENT_MAX} characters", field="body")
    notes.comment(q, number, text, author=by.who)
    return f"Commented on issue #{number}"


ACTIONS: dict[str, Callable[[Queue, int, dict[str, Any], Authority], str]] = {
    "priority": _reprioritise,
    "unblock": _unblock,
    "release": _release,
    "force-claim": _force_claim,
    "comment": _comment,
}
