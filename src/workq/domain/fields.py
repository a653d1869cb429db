"""Validation of the values users give: one rule per field, shared by every transport."""

from __future__ import annotations

import re
from collections.abc import Iterable

from workq.errors import InvalidInput
from workq.schemas import (
    AGENT_MAX,
    COMMENT_MAX,
    DESCRIPTION_MAX,
    LABEL_MAX,
    LABELS_PER_ISSUE_MAX,
    NUMBER_MAX,
    REASON_MAX,
    RUN_ID_MAX,
    TITLE_MAX,
    IssueType,
    Priority,
)

# What no stored text may hold: the C0 controls other than tab, newline and carriage
# return (NUL among them), DEL, and the C1 controls U+0080-U+009F (NEL U+0085 and CSI
# U+009B among them: terminals act on them, so `workq list` could be made to rewrite one).
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# Line breaks, which only text that may span lines may hold.
_LINE_BREAK = re.compile(r"[\n\r\u2028\u2029]")
# Lone surrogates: what Python makes of bytes that are not UTF-8 (in argv, say). No
# database can store them.
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/+-]*")
_BREAK_NAMES = {
    "\n": "a newline",
    "\r": "a carriage return",
    "\u2028": "U+2028, a line separator",
    "\u2029": "U+2029, a paragraph separator",
}

PRIORITY_ALIASES = {
    "critical": Priority.URGENT,
    "p0": Priority.URGENT,
    "p1": Priority.HIGH,
    "p2": Priority.MEDIUM,
    "p3": Priority.LOW,
}


def characters(value: object, field: str, *, multiline: bool, label: str | None = None) -> str:
    """``value`` itself if it is text whose every character may be stored: no control
    characters but tab (and newline and CR where ``multiline``), no line or paragraph
    separators in one-line text. ``label`` names the value in the message (default:
    ``field``)."""
    label = label or field
    if not isinstance(value, str):
        raise InvalidInput(f"{label} must be a string", field=field)
    if _SURROGATE.search(value):
        raise InvalidInput(
            f"{label} is not valid Unicode (a lone surrogate, as bytes that are not UTF-8 give)",
            field=field,
        )
    if found := _CONTROL.search(value):
        raise InvalidInput(
            f"{label} contains the control character U+{ord(found.group()):04X}",
            field=field,
        )
    if not multiline and (found := _LINE_BREAK.search(value)):
        raise InvalidInput(
            f"{label} must be one line; it holds {_BREAK_NAMES[found.group()]}", field=field
        )
    return value


def text(
    value: object,
    field: str,
    *,
    limit: int,
    required: bool = False,
    multiline: bool,
    label: str | None = None,
) -> str:
    """The one check of every text field: its characters, then its normal form (one-line
    text loses surrounding white space; multi-line text is kept as given), then the limit,
    counted in characters of that normal form."""
    label = label or field
    value = characters(value, field, multiline=multiline, label=label)
    if not multiline:
        value = value.strip()
    if required and not value.strip():
        raise InvalidInput(f"{label} must not be empty", field=field)
    if len(value) > limit:
        raise InvalidInput(
            f"{label} is {len(value)} characters long; the limit is {limit}",
            field=field,
            limit=limit,
        )
    return value


def title(value: str) -> str:
    return text(value, "title", limit=TITLE_MAX, required=True, multiline=False)


def description(value: str | None) -> str:
    return (
        "" if value is None else text(value, "description", limit=DESCRIPTION_MAX, multiline=True)
    )


def reason(value: str) -> str:
    return text(value, "reason", limit=REASON_MAX, required=True, multiline=True)


def comment(value: str) -> str:
    return text(value, "body", limit=COMMENT_MAX, required=True, multiline=True)


def name(value: str, field: str, *, limit: int) -> str:
    if not isinstance(value, str) or not _NAME.fullmatch(value) or len(value) > limit:
        raise InvalidInput(
            f"{field} must be 1-{limit} characters of letters, digits and ._:@/+- "
            f"starting with a letter or digit",
            field=field,
        )
    return value


def run_id(value: str) -> str:
    return name(value, "run_id", limit=RUN_ID_MAX)


def agent(value: str) -> str:
    return name(value, "agent", limit=AGENT_MAX)


def labels(values: Iterable[str]) -> list[str]:
    result = sorted({name(v, "label", limit=LABEL_MAX) for v in values})
    if len(result) > LABELS_PER_ISSUE_MAX:
        raise InvalidInput(f"at most {LABELS_PER_ISSUE_MAX} labels per issue", field="labels")
    return result


def number(value: int, field: str = "number") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= NUMBER_MAX:
        raise InvalidInput(f"{field} must be a positive issue number", field=field)
    return value


def fence(value: int | None) -> int | None:
    """A fencing token, when given: a positive integer."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 2**62:
        raise InvalidInput("fence must be a positive integer (a claim's token)", field="fence")
    return value


def priority(value: str | Priority) -> Priority:
    if isinstance(value, Priority):
        return value
    key = str(value).strip().lower()
    if key in PRIORITY_ALIASES:
        return PRIORITY_ALIASES[key]
    try:
        return Priority(key)
    except ValueError:
        raise InvalidInput(
            f"priority must be one of urgent, high, medium, low (got {value!r})",
            field="priority",
        ) from None


def issue_type(value: str | IssueType) -> IssueType:
    if isinstance(value, IssueType):
        return value
    try:
        return IssueType(str(value).strip().lower())
    except ValueError:
        allowed = ", ".join(t.value for t in IssueType)
        raise InvalidInput(
            f"issue_type must be one of {allowed} (got {value!r})", field="issue_type"
        ) from None
