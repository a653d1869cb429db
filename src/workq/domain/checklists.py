"""Checkbox items of an issue body (``- [ ] ...`` / ``- [x] ...``): its acceptance criteria."""

from __future__ import annotations

import re

# A list item (``-``, ``*``, ``+`` or ``1.`` / ``1)``) whose text starts with a checkbox.
_ITEM = re.compile(r"^ {0,12}(?:[-*+]|\d{1,9}[.)])[ \t]+\[[ xX]\][ \t]+(\S.*?)\s*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def checkbox_items(body: str) -> list[str]:
    """The text of every checkbox item, checked or not, in order; items inside fenced code
    blocks are examples, not criteria, and are skipped."""
    found: list[str] = []
    fence: str | None = None
    for line in body.splitlines():
        opening = _FENCE.match(line)
        if fence is not None:
            if opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence):
                fence = None
            continue
        if opening:
            fence = opening.group(1)
            continue
        item = _ITEM.match(line)
        if item:
            found.append(item.group(1))
    return found
