"""How a local issue looks on GitHub, and how a GitHub issue reads back. Pure functions.

A local issue becomes a title, a body in contract B's template ending in a hidden marker with
the local id, and *managed* labels: ``priority:<p>``, ``type:<t>``, ``status:<s>`` and the
issue's own labels. A :class:`Snapshot` is what GitHub held after the last push or import, in
the same terms; comparing it with :func:`desired` says what to push, comparing it with a
GitHub issue says what changed there.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from workq.github.models import GhIssue
from workq.schemas import Issue, IssueType, Priority, Status

BODY_MAX = 65_536  # GitHub's limit for issue and comment bodies
MANAGED_PREFIXES = ("priority:", "type:", "status:")
STATUS_LABELS = ("backlog", "in-progress", "blocked", "done")
# Colours of the labels workq creates (GitHub's palette).
LABEL_COLORS = {
    "priority:urgent": "b60205",
    "priority:high": "d93f0b",
    "priority:medium": "fbca04",
    "priority:low": "c2e0c6",
    "status:backlog": "ededed",
    "status:in-progress": "0e8a16",
    "status:blocked": "b60205",
    "status:done": "5319e7",
}
TYPE_COLOR = "1d76db"
PLAIN_COLOR = "ededed"
PRIORITY_ALIASES = {"critical": Priority.URGENT}

_MARKER = "<!-- workq:id={} -->"
_MARKER_RE = re.compile(r"<!-- workq:id=([0-9a-f]{32}) -->")
_COMMENT_MARKER = "<!-- workq:comment={}/{} -->"
_ANY_MARKER_RE = re.compile(r"\s*<!-- workq:(?:id|comment)=[^>]*-->\s*")

State = Literal["open", "closed"]


def marker(issue_id: str) -> str:
    return _MARKER.format(issue_id)


def comment_marker(issue_id: str, comment_id: int) -> str:
    return _COMMENT_MARKER.format(issue_id, comment_id)


def marker_id(body: str | None) -> str | None:
    """The local id in a body's marker, if it has one."""
    found = _MARKER_RE.search(body or "")
    return found.group(1) if found else None


def canonical_body(body: str | None) -> str:
    """A body without workq's markers and trailing space: what people wrote."""
    return _ANY_MARKER_RE.sub("\n", body or "").strip()


def body_text(title: str, description: str) -> str:
    """The visible body: the description, in contract B's template when it is not already."""
    text = description.strip()
    if text.startswith("## Summary"):
        return text
    return f"## Summary\n{text or title}"


def render_body(issue_id: str, title: str, description: str) -> str:
    tail = "\n\n" + marker(issue_id)
    return _fit(body_text(title, description), BODY_MAX - len(tail)) + tail


def render_comment(issue_id: str, comment_id: int, kind: str, author: str | None, body: str) -> str:
    who = f" from {author}" if author else ""
    tail = "\n\n" + comment_marker(issue_id, comment_id)
    return _fit(f"**{kind}**{who}:\n\n{body}", BODY_MAX - len(tail)) + tail


def _fit(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = "\n\n(truncated by workq)"
    return text[: limit - len(cut)] + cut


def status_label(issue: Issue) -> str:
    if issue.status == Status.DONE:
        return "status:done"
    if issue.status == Status.IN_PROGRESS:
        return "status:in-progress"
    if issue.is_blocked or issue.open_blockers > 0:
        return "status:blocked"
    return "status:backlog"


def is_managed_prefix(name: str) -> bool:
    return name.lower().startswith(MANAGED_PREFIXES)


def label_color(name: str) -> str:
    key = name.lower()
    if key in LABEL_COLORS:
        return LABEL_COLORS[key]
    return TYPE_COLOR if key.startswith("type:") else PLAIN_COLOR


@dataclass(frozen=True)
class Snapshot:
    """GitHub's side of one issue, as far as workq manages it."""

    title: str
    body: str  # canonical: without the marker
    marker: bool  # whether the body carried workq's marker
    labels: tuple[str, ...]  # managed labels, sorted by lower-case name
    state: State
    state_reason: str | None = None  # None while open
    gone: str | None = field(default=None)  # why GitHub's issue can no longer be pushed to

    def to_json(self) -> str:
        data = asdict(self)
        data["labels"] = list(self.labels)
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, raw: str) -> Snapshot:
        data: dict[str, Any] = json.loads(raw)
        data["labels"] = tuple(data.get("labels", ()))
        return cls(**data)


def _sorted_labels(names: Iterable[str]) -> tuple[str, ...]:
    unique: dict[str, str] = {}
    for name in names:
        unique.setdefault(name.lower(), name)
    return tuple(unique[k] for k in sorted(unique))


def desired(issue: Issue | None, previous: Snapshot | None) -> Snapshot:
    """What GitHub should hold for this issue. A deleted issue (``None``) keeps what was
    pushed and is closed as not planned."""
    if issue is None:
        if previous is None:
            raise ValueError("a deleted issue that was never pushed has nothing to push")
        return Snapshot(
            title=previous.title,
            body=previous.body,
            marker=previous.marker,
            labels=previous.labels,
            state="closed",
            state_reason=previous.state_reason if previous.state == "closed" else "not_planned",
        )
    labels = [
        f"priority:{issue.priority.value}",
        f"type:{issue.issue_type.value}",
        status_label(issue),
        *issue.labels,
    ]
    done = issue.status == Status.DONE
    return Snapshot(
        title=issue.title,
        body=body_text(issue.title, issue.description),
        marker=True,
        labels=_sorted_labels(labels),
        state="closed" if done else "open",
        state_reason="completed" if done else None,
    )


def remote_snapshot(gh: GhIssue, managed: Iterable[str]) -> Snapshot:
    """A GitHub issue in snapshot terms; ``managed`` says which of its labels workq owns."""
    owned = {m.lower() for m in managed}
    return Snapshot(
        title=gh.title,
        body=canonical_body(gh.body),
        marker=marker_id(gh.body) is not None,
        labels=_sorted_labels(n for n in gh.label_names if n.lower() in owned),
        state=gh.state,
        state_reason=gh.state_reason if gh.state == "closed" else None,
    )


def same_labels(a: Sequence[str], b: Sequence[str]) -> bool:
    return {x.lower() for x in a} == {x.lower() for x in b}


def merged_labels(
    on_github: Iterable[str], previous: Iterable[str], wanted: Iterable[str]
) -> list[str]:
    """The full label set to send: what people added by hand on GitHub (neither pushed by
    workq before nor one of its prefixes) plus what workq wants now."""
    dropped = {p.lower() for p in previous}
    kept = [n for n in on_github if n.lower() not in dropped and not is_managed_prefix(n)]
    return list(_sorted_labels([*kept, *wanted]))


@dataclass(frozen=True)
class LabelMeaning:
    """What a GitHub issue's labels say in workq's terms."""

    priority: Priority | None
    issue_type: IssueType | None
    plain: tuple[str, ...]  # labels without a workq prefix


def read_labels(names: Iterable[str]) -> LabelMeaning:
    """Map ``priority:``/``type:`` back; several or unknown values of a prefix mean "not
    said". ``status:`` labels are ignored: status follows claims, which live locally."""
    priorities: set[Priority] = set()
    types: set[IssueType] = set()
    plain: list[str] = []
    for name in names:
        prefix, _, value = name.partition(":")
        key, value = prefix.lower(), value.strip().lower()
        if key == "priority" and value:
            found = PRIORITY_ALIASES.get(value) or _enum(Priority, value)
            if found is not None:
                priorities.add(found)
        elif key == "type" and value:
            kind = _enum(IssueType, value)
            if kind is not None:
                types.add(kind)
        elif not is_managed_prefix(name):
            plain.append(name)
    return LabelMeaning(
        priority=priorities.pop() if len(priorities) == 1 else None,
        issue_type=types.pop() if len(types) == 1 else None,
        plain=_sorted_labels(plain),
    )


def _enum(kind: type[Priority] | type[IssueType], value: str) -> Any:
    try:
        return kind(value)
    except ValueError:
        return None
