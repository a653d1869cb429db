"""What a notice says: the JSON body a sink receives, built when it is delivered from the
event that raised it, its issue and the notice's definition (domain/notices.py).

The body's ``text`` is one line a person reads in Slack or Mattermost (an incoming webhook
shows it as it is): what happened, the issue and its title, the holder and for how long,
and the command to run next. It is escaped as Slack asks (``&``, ``<``, ``>``), so a title
cannot make a link or a ``<!channel>`` mention, and ``@channel``-style words are broken
with a word joiner, so a title cannot page a Mattermost channel.
"""

from __future__ import annotations

import json
import re
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select

from workq.db.tables import events, issues
from workq.domain import dates
from workq.domain.notices import NOTICES

TEST = "test"  # the event name of a test notice (`workq notify test`)
TITLE_MAX = 100
REASON_MAX = 200
_SPACES = re.compile(r"\s+")
_MENTION = re.compile(r"@(channel|here|all|everyone)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Raised:
    """The event behind a notice, as stored."""

    kind: str
    actor: str | None
    before: dict[str, Any]
    after: dict[str, Any] | None
    at: datetime


@dataclass(frozen=True)
class IssueFacts:
    number: int
    title: str | None
    status: str | None
    blocked: bool


def read(
    conn: Connection, event_id: int, number: int | None
) -> tuple[Raised | None, IssueFacts | None]:
    """The event with this id and the issue ``number`` (None when either is gone)."""
    found = conn.execute(
        select(
            events.c.kind, events.c.actor, events.c.before, events.c.after, events.c.created_at
        ).where(events.c.id == event_id)
    ).first()
    raised = None
    if found is not None:
        raised = Raised(
            kind=found.kind,
            actor=found.actor,
            before=_json(found.before) or {},
            after=_json(found.after),
            at=found.created_at,
        )
    issue = None
    if number is not None:
        row = conn.execute(
            select(issues.c.title, issues.c.status, issues.c.is_blocked).where(
                issues.c.number == number
            )
        ).first()
        issue = IssueFacts(
            number=number,
            title=row.title if row else None,
            status=row.status if row else None,
            blocked=bool(row.is_blocked) if row else False,
        )
    return raised, issue


def compose(
    *,
    delivery_id: str,
    notice: str,
    number: int | None,
    raised: Raised | None,
    issue: IssueFacts | None,
) -> dict[str, Any]:
    """The body of notice ``notice`` (a name of domain/notices.NOTICES)."""
    after = (raised.after if raised else None) or {}
    before = raised.before if raised else {}
    holder = _text(after.get("holder") or before.get("holder") or before.get("claimed_by"))
    reason = _text(after.get("reason") or after.get("blocked_reason"))
    since = _text(after.get("since"))
    for_seconds = _seconds(after.get("for_seconds"), since, raised.at if raised else None)
    next_step = next_step_of(notice, number)
    title = issue.title if issue else None
    return {
        "delivery": delivery_id,
        "event": notice,
        "kind": raised.kind if raised else None,
        "text": line(
            notice,
            number=number,
            title=title,
            holder=holder,
            for_seconds=for_seconds,
            reason=reason,
            next_step=next_step,
        ),
        "issue": None
        if number is None
        else {
            "number": number,
            "title": title,
            "status": issue.status if issue else None,
            "blocked": issue.blocked if issue else False,
        },
        "holder": holder,
        "since": since,
        "for_seconds": for_seconds,
        "reason": reason,
        "next_step": next_step,
        "actor": raised.actor if raised else None,
        "at": dates.iso(raised.at) if raised else None,
        "detail": raised.after if raised else None,
    }


def made_up(sink: str, now: datetime) -> dict[str, Any]:
    """A made-up notice for ``workq notify test``: the fields of every notice, no issue."""
    host = socket.gethostname()
    return {
        "delivery": str(uuid.uuid4()),
        "event": TEST,
        "kind": TEST,
        "text": _slack(
            f"[workq] test: a test notice from {host} to sink {sink}. Nothing is wrong; "
            "notices of this sink will look like this."
        ),
        "issue": None,
        "holder": None,
        "since": None,
        "for_seconds": None,
        "reason": None,
        "next_step": "nothing: this was a test",
        "actor": None,
        "at": dates.iso(now),
        "detail": None,
    }


def encode(body: Mapping[str, Any]) -> bytes:
    """The bytes sent (and signed): compact JSON, UTF-8."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def next_step_of(notice: str, number: int | None) -> str:
    known = NOTICES.get(notice)
    if known is None:
        return ""
    step = known.next_step
    return step.replace("{number}", str(number)) if number is not None else step


def line(
    notice: str,
    *,
    number: int | None,
    title: str | None,
    holder: str | None,
    for_seconds: int | None,
    reason: str | None,
    next_step: str,
) -> str:
    """The one line a person reads: ``[workq] stalled: #12 "Fix login", held by run-a for
    50m: a claim made no progress for stall_after. Next: workq show 12, ...``."""
    known = NOTICES.get(notice)
    subject = ""
    if number is not None:
        subject = f"#{number}" + (f' "{_clip(title, TITLE_MAX)}"' if title else "")
    if holder:
        subject += f"{', ' if subject else ''}held by {_clip(holder, 60)}"
        if for_seconds:
            subject += f" for {spoken(for_seconds)}"
    said = _clip(reason, REASON_MAX).rstrip(".") if reason else (known.about if known else notice)
    text = f"[workq] {notice}: " + (f"{subject}: " if subject else "") + f"{said}."
    if next_step:
        text += f" Next: {next_step}"
    return _slack(text)


def spoken(seconds: int) -> str:
    """``45s``, ``50m``, ``1h 05m``, ``2d 3h``."""
    if seconds < 60:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h {minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d {hours}h"


def _slack(text: str) -> str:
    """One line, escaped as Slack's message text asks, its channel-wide mentions broken."""
    one = _SPACES.sub(" ", text).strip()
    escaped = one.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MENTION.sub(lambda m: "@\u2060" + m.group(1), escaped)


def _clip(text: str, limit: int) -> str:
    one = _SPACES.sub(" ", text).strip()
    return one if len(one) <= limit else one[: limit - 1] + "…"


def _text(value: Any) -> str | None:
    if value is None or value == "":
        return None
    return str(value)


def _seconds(value: Any, since: str | None, at: datetime | None) -> int | None:
    """How long, in whole seconds: the event's ``for_seconds``, else from ``since`` to
    the event."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return int(value)
    if since is None or at is None:
        return None
    try:
        start = dates.utc(datetime.fromisoformat(since))
    except ValueError:
        return None
    gap = (dates.utc(at) - start).total_seconds()
    return int(gap) if gap >= 0 else None


def _json(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    try:
        loaded = json.loads(text)
    except ValueError:
        return None
    return loaded if isinstance(loaded, dict) else None
