"""The queue's policies: their names, what each accepts, and its default.

A policy is set queue-wide or for one repository (which then wins for its issues); unset,
the default here holds. Durations are written ``90s``, ``45m``, ``2h``, ``1d`` or as
seconds; ``off`` (or ``0``) turns a duration off.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Kind = Literal["duration", "count", "choice"]


@dataclass(frozen=True)
class Policy:
    name: str
    kind: Kind
    default: str
    help: str
    choices: tuple[str, ...] = ()
    low: int = 0
    high: int = 365 * 24 * 3600


POLICIES: dict[str, Policy] = {
    p.name: p
    for p in (
        Policy(
            "stall_after",
            "duration",
            "45m",
            "a claim with no progress for this long is stalled (off: never)",
            low=1,
        ),
        Policy(
            "stall_policy",
            "choice",
            "tell",
            "what follows a stall: tell (a notice) or release (after stall_release_after more)",
            choices=("tell", "release"),
        ),
        Policy(
            "stall_release_after",
            "duration",
            "30m",
            "under stall_policy=release: how long a stalled claim is kept before it is "
            "released with its work saved",
            low=1,
        ),
        Policy(
            "max_landing_rounds",
            "count",
            "3",
            "refused landings an issue may have before it is blocked for a person",
            low=1,
            high=100,
        ),
        Policy(
            "gate_failures",
            "count",
            "3",
            "failed gate runs in a row on one issue that send a gates_failing notice",
            low=1,
            high=100,
        ),
    )
}

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"(\d+)\s*([smhd]?)")


def duration(text: str) -> int:
    """Seconds in ``text`` (``90s``, ``45m``, ``2h``, ``1d``, or a number of seconds);
    0 for ``off``.

    Raises:
        ValueError: anything else.
    """
    word = text.strip().lower()
    if word in ("off", "0", "none"):
        return 0
    found = _DURATION.fullmatch(word)
    if found is None:
        raise ValueError("a duration such as 90s, 45m, 2h or 1d, or off")
    return int(found.group(1)) * _UNITS[found.group(2) or "s"]


def spoken(seconds: int) -> str:
    """A duration as people write it: ``45m``, ``2h``, ``90s``, or ``off``."""
    if seconds <= 0:
        return "off"
    for unit in ("d", "h", "m"):
        if seconds % _UNITS[unit] == 0:
            return f"{seconds // _UNITS[unit]}{unit}"
    return f"{seconds}s"


def normal(name: str, value: str) -> str:
    """``value`` for policy ``name`` in its one stored form.

    Raises:
        KeyError: no such policy.
        ValueError: the value is not one it accepts (the message says what is).
    """
    policy = POLICIES[name]
    if policy.kind == "choice":
        word = value.strip().lower()
        if word not in policy.choices:
            raise ValueError(" or ".join(policy.choices))
        return word
    if policy.kind == "count":
        try:
            count = int(value.strip())
        except ValueError:
            raise ValueError(f"a whole number from {policy.low} to {policy.high}") from None
        if not policy.low <= count <= policy.high:
            raise ValueError(f"a whole number from {policy.low} to {policy.high}")
        return str(count)
    seconds = duration(value)
    if seconds and not policy.low <= seconds <= policy.high:
        raise ValueError(f"off, or a duration from {spoken(policy.low)} to {spoken(policy.high)}")
    return spoken(seconds)


def accepts(name: str) -> str:
    """What policy ``name`` accepts, in words."""
    policy = POLICIES[name]
    if policy.kind == "choice":
        return " or ".join(policy.choices)
    if policy.kind == "count":
        return f"a whole number from {policy.low} to {policy.high}"
    return f"off, or a duration of at least {spoken(policy.low)} (such as 90s, 45m, 2h, 1d)"
