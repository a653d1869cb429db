"""Acceptance criteria of an issue: the checkbox lines of its body (``- [ ] ...``,
``* [x] ...``), in order, outside fenced code blocks."""

from __future__ import annotations

import re

_BOX = re.compile(r"\s{0,3}[-*+]\s+\[[ xX]\]\s+(?P<text>\S.*)")
_FENCE = re.compile(r"\s{0,3}(```|~~~)")


def acceptance_criteria(body: str) -> list[str]:
    """The text of every checkbox line of ``body`` (checked or not)."""
    found: list[str] = []
    fenced = False
    for line in body.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        box = None if fenced else _BOX.fullmatch(line.rstrip())
        if box is not None:
            found.append(box.group("text"))
    return found
