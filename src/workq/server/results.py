"""Tool results: a short text line for the model and structured content for programs.

A success carries the text (the contract's wording where it has one) and the data of the
tool's output model. A failure is ``isError: true`` whose text is the contract's wording (where
it has one), then the stable code, the message with its facts, and the next step; its
``_meta["workq/error"]`` holds contract B's error shape (``success``, ``error``, ``code``,
``details``, ``hint``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, ValidationError

from workq.domain import dates
from workq.errors import (
    Conflict,
    InvalidInput,
    Spelling,
    WorkqError,
    said_plainly,
    tool_call,
)

# How the server answering this call spells the steps hints point to (server/spelling.py):
# set by the server around each call, so every failure built in it (in the tool's worker
# thread too: anyio copies the context there) names tools this server has.
SPELLING: ContextVar[Spelling] = ContextVar("workq_spelling", default=tool_call)
# Where an error result carries contract B's error object (success, error, code, details,
# hint) for programs.
ERROR_META = "workq/error"
# Facts that the text never needs to repeat.
_QUIET_FACTS = frozenset({"number", "field", "expected", "fields", "unknown", "waits_on"})


class Refusal(ToolError):
    """A workq error with the contract's wording in front of it."""

    def __init__(self, prefix: str, error: WorkqError) -> None:
        super().__init__(f"{prefix}: {error.describe(SPELLING.get())}")
        self.prefix = prefix
        self.error = error


@contextmanager
def worded(prefix: str, *, conflicts_only: str | None = None) -> Iterator[None]:
    """Put ``prefix`` in front of any workq error raised inside.

    With ``conflicts_only``, that wording is used for conflicts (contract A's "already
    claimed or blocked" case) and ``prefix`` for every other error.
    """
    try:
        yield
    except WorkqError as exc:
        chosen = conflicts_only if conflicts_only and isinstance(exc, Conflict) else prefix
        raise Refusal(chosen, exc) from exc


def ok(text: str, data: BaseModel | dict[str, Any]) -> CallToolResult:
    structured = data.model_dump(mode="json") if isinstance(data, BaseModel) else data
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=structured
    )


def failure(error: WorkqError, prefix: str | None = None) -> CallToolResult:
    text = error_text(error)
    if prefix:
        text = f"{prefix}: {text}"
    # No structuredContent: clients validate it against the tool's output schema, which
    # describes success. Programs find the error in _meta instead.
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        is_error=True,
        _meta={ERROR_META: error_object(error)},
    )


def error_object(error: WorkqError) -> dict[str, Any]:
    """Contract B's error object: ``success``, ``error``, ``code``, ``reason`` (when the
    error names one), ``details``, and workq's ``hint``."""
    data: dict[str, Any] = {"success": False, **error.to_dict()}
    hint = error.hint_for(SPELLING.get())
    if hint:
        data["hint"] = hint
    reason = error.facts.get("reason")
    if isinstance(reason, str):
        data["reason"] = reason
    return data


def error_text(error: WorkqError) -> str:
    """``CODE: message (facts the message does not already say); next step``."""
    message = error.message.rstrip(".")
    extra = [
        f"{key}={value}"
        for key, value in error.facts.items()
        if key not in _QUIET_FACTS and value is not None and not _mentioned(value, message)
    ]
    text = f"{error.code}: {message}"
    if extra:
        text += f" ({', '.join(extra)})"
    hint = error.hint_for(SPELLING.get())
    if hint:
        text += f"; {hint}"
    return text


def _mentioned(value: Any, message: str) -> bool:
    said = str(value)
    # A timestamp counts as said when the message gives it to the minute.
    return said in message or said[:16].replace("T", " ") in message


def invalid_arguments(exc: ValidationError) -> InvalidInput:
    """A pydantic rejection of tool arguments, as workq's INVALID_INPUT."""
    problems: dict[str, str] = {}
    for err in exc.errors(include_url=False):
        where = ".".join(str(part) for part in err["loc"]) or "arguments"
        problems.setdefault(where, said_plainly(err))
    summary = "; ".join(f"{where}: {msg}" for where, msg in problems.items())
    return InvalidInput(f"invalid arguments: {summary}", fields=problems)


def unknown_arguments(names: list[str], accepted: list[str]) -> InvalidInput:
    return InvalidInput(
        f"unknown argument(s): {', '.join(names)}",
        hint=f"this tool takes: {', '.join(accepted) or 'no arguments'}",
        unknown=names,
    )


def when(moment: datetime | None) -> str:
    """A timestamp, as every face shows one: ``2026-01-01 12:30:00Z``."""
    return "never" if moment is None else dates.stamp(moment)


def clip(text: str, limit: int = 100) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


# The GitHub issue-priority server's tools answer a failure as an object,
# ``{success: false, error, code, reason?, details?}``, with its own codes. Its seven tools
# here do the same: the object is the text (JSON) and the structured content of the error
# result (clients check structured content against the output schema only on success),
# and its ``_meta``. workq's own code stays in ``details.workq_code``.
OBJECT_FAILURES = frozenset(
    {
        "create_issue",
        "select_next_issue",
        "advance_workflow",
        "release_lock",
        "force_claim",
        "get_workflow_status",
        "list_backlog",
    }
)
# Unknown issue numbers: the contract's code for each tool that takes one.
_UNKNOWN_ISSUE = {
    "force_claim": ("ISSUE_NOT_FOUND", None),
    "release_lock": ("NOT_LOCKED", "not_locked"),
    "advance_workflow": ("NOT_LOCKED", "not_locked"),
    "get_workflow_status": ("NOT_LOCKED", "not_locked"),
}


def contract_code(tool: str, code: str, reason: str | None) -> tuple[str, str | None]:
    """The contract's code (and reason) for workq's ``code`` from ``tool``."""
    if code == "NOT_HOLDER":
        return "NOT_LOCKED", "not_locked"
    if code == "NOT_FOUND" and tool in _UNKNOWN_ISSUE:
        return _UNKNOWN_ISSUE[tool]
    if code == "INVALID_TRANSITION":
        if reason == "tests_required":
            return "TESTS_REQUIRED", reason
        return "INVALID_PHASE_TRANSITION", reason or "invalid_transition"
    return code, reason


def object_failure(tool: str, result: CallToolResult) -> CallToolResult:
    """``result`` (an error from ``failure``) as the contract's failure object."""
    meta = dict(result.meta or {})
    found = meta.get(ERROR_META)
    if not isinstance(found, dict):
        return result
    data = dict(found)
    code, reason = contract_code(tool, str(data.get("code")), data.get("reason"))
    if code != data.get("code"):
        data["details"] = {**data.get("details", {}), "workq_code": data.get("code")}
        data["code"] = code
    if reason is not None:
        data["reason"] = reason
    meta[ERROR_META] = data
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(data, default=str))],
        structured_content=data,
        is_error=True,
        _meta=meta,
    )
