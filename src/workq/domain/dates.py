"""How workq writes a moment, one function per purpose. Every moment workq keeps is UTC, so
a naive one is read as UTC and an aware one is shown in UTC.

- :func:`stamp` for people and agents: messages, the CLI, the board, tool answers.
- :func:`iso` for what machines read back: JSON in events and exports, error facts.
- :func:`iso_z` to the second with ``Z``: GitHub's form (``since``), and facts that use it.
- :func:`day` for a date alone.
"""

from __future__ import annotations

from datetime import UTC, datetime


def utc(moment: datetime) -> datetime:
    """Aware, in UTC (a naive moment is UTC)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def stamp(moment: datetime) -> str:
    """``2026-11-27 18:06:07Z``."""
    return utc(moment).strftime("%Y-%m-%d %H:%M:%SZ")


def iso(moment: datetime) -> str:
    """``2026-11-27T18:06:07.250000+00:00`` (microseconds only when there are any)."""
    return utc(moment).isoformat()


def iso_z(moment: datetime) -> str:
    """``2026-11-27T18:06:07Z``."""
    return utc(moment).strftime("%Y-%m-%dT%H:%M:%SZ")


def iso_ms(moment: datetime) -> str:
    """``2026-11-27T18:06:07.250Z`` (MCP task timestamps)."""
    return utc(moment).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def day(moment: datetime) -> str:
    """``2026-11-27``."""
    return utc(moment).strftime("%Y-%m-%d")
