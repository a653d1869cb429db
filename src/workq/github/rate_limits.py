"""GitHub's rate limits: the ``x-ratelimit-*`` headers, ``retry-after``, and whether a 403
or a 429 is a rate limit (primary or secondary) and until when."""

from __future__ import annotations

import email.utils
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from workq.domain import dates

SECONDARY_LIMIT_MIN_WAIT = timedelta(seconds=60)
_SECONDARY_PATTERN = re.compile(r"secondary rate limit|abuse detection", re.IGNORECASE)


@dataclass(frozen=True)
class RateLimitInfo:
    """The ``x-ratelimit-*`` headers of a response (or the core entry of ``/rate_limit``)."""

    limit: int
    remaining: int
    reset: datetime
    used: int | None = None
    resource: str | None = None

    @classmethod
    def from_headers(cls, headers: Mapping[str, str]) -> RateLimitInfo | None:
        try:
            limit = int(headers["x-ratelimit-limit"])
            remaining = int(headers["x-ratelimit-remaining"])
            reset = datetime.fromtimestamp(int(headers["x-ratelimit-reset"]), UTC)
        except (KeyError, ValueError, OverflowError, OSError):
            return None
        used_raw = headers.get("x-ratelimit-used")
        used = int(used_raw) if used_raw and used_raw.isdigit() else None
        return cls(limit, remaining, reset, used, headers.get("x-ratelimit-resource"))


def parse_retry_after(value: str | None, now: datetime) -> datetime | None:
    """A ``retry-after`` header (seconds, or an HTTP date) as a moment; None if absent/bad."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if text.isdigit():
        return now + timedelta(seconds=int(text))
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    return max(dates.utc(when), now)


def rate_limit_retry_at(
    status: int,
    headers: Mapping[str, str],
    message: str | None,
    now: datetime,
) -> tuple[datetime, bool] | None:
    """Whether a 403/429 is a rate limit: ``(retry_at, secondary)``, or None if it is not.

    The rule: a ``retry-after`` header wins; else ``x-ratelimit-remaining: 0`` means wait for
    ``x-ratelimit-reset``; else a "secondary rate limit" message (or any 429) means at least
    60 seconds.
    """
    if status not in (403, 429):
        return None
    remaining_zero = headers.get("x-ratelimit-remaining", "").strip() == "0"
    secondary_text = bool(message and _SECONDARY_PATTERN.search(message))
    retry_after = parse_retry_after(headers.get("retry-after"), now)
    if retry_after is not None:
        return retry_after, secondary_text or not remaining_zero
    if remaining_zero:
        try:
            reset = datetime.fromtimestamp(int(headers.get("x-ratelimit-reset", "")), UTC)
        except (ValueError, OverflowError, OSError):
            reset = now + SECONDARY_LIMIT_MIN_WAIT
        return max(reset, now), False
    if secondary_text or status == 429:
        return now + SECONDARY_LIMIT_MIN_WAIT, True
    return None
