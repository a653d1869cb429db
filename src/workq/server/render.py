"""The text an agent reads: contract A's JSON for the reads it shows as JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from workq.domain import landing_failures
from workq.schemas import LandingStatus, ReadyIssue

# Contract A shows issue_get, issue_list and issue_ready answering JSON: its keys, in its
# order, come first; workq's other facts follow when they say something (not null, empty
# or false). The structured content has every field.
GET_KEYS = (
    "number",
    "title",
    "description",
    "status",
    "priority",
    "issue_type",
    "agent",
    "is_blocked",
    "blocked_reason",
    "claimed_by",
    "created_at",
    "updated_at",
)
LIST_KEYS = ("number", "title", "status", "priority", "agent", "is_blocked")
READY_KEYS = ("number", "title", "description", "priority", "issue_type", "agent")
HIDDEN = frozenset({"id"})  # the row's internal key: numbers name issues


def contract_object(data: dict[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    """``data`` (a JSON dump) with ``keys`` first, in order, then its other non-empty facts."""
    shown = {key: data.get(key) for key in keys}
    shown.update(
        (k, v)
        for k, v in data.items()
        if k not in shown and k not in HIDDEN and v not in (None, [], {}, False)
    )
    return shown


def as_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def list_text(items: Sequence[BaseModel]) -> str:
    return as_json([contract_object(i.model_dump(mode="json"), LIST_KEYS) for i in items])


def page_footer(tool: str, shown: int, next_cursor: str | None) -> str:
    if next_cursor is None:
        return ""
    return f"\nShowing {shown}; more: call {tool} again with cursor={next_cursor!r}"


def ready_text(issue: ReadyIssue) -> str:
    return as_json(contract_object(issue.model_dump(mode="json"), READY_KEYS))


def issue_text(data: dict[str, Any]) -> str:
    """``issue_get``'s text from its answer (a JSON dump, the pull request included)."""
    return as_json(contract_object(data, GET_KEYS))


def numbers(values: Sequence[int]) -> str:
    return ", ".join(f"#{n}" for n in values)


def landing_text(landing: LandingStatus) -> str:
    """A merge answered by the landing queue: where it stands, and that the agent may go on."""
    pull = f", pull request #{landing.pr_number}" if landing.pr_number else ""
    detail = f" ({landing.detail})" if landing.detail else ""
    text = f"Issue #{landing.number} lands through a pull request: {landing.state}{pull}{detail}. "
    if landing.state in ("queued", "open", "merging", "merged"):
        text += (
            "The GitHub worker pushes, waits for checks and merges it, then completes the "
            "issue; claim your next issue meanwhile."
        )
    elif landing.state == "landed":
        text += f"Merged as {(landing.merge_sha or '')[:12]}; the issue is done."
    elif landing.failure is not None:  # refused: why, and what to repair
        text += "\n\n" + landing_failures.comment(landing.failure)
    elif landing.state == "refused":
        text += "Fix what it says, commit, and merge again."
    return text
