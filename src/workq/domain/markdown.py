"""Markdown documents cut into sections, heading to heading, for the docs index.

Only ATX headings (``# Title`` .. ``###### Title``) outside fenced code blocks start a
section; the text before the first heading is a section without a heading.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


@dataclass(frozen=True)
class Section:
    line: int  # 1-based line of its heading (or of the document's first line)
    heading: str  # "" for the text before the first heading
    text: str  # the lines after the heading, up to the next heading
    text_line: int  # the line ``text`` starts on


def sections(document: str) -> list[Section]:
    """The document's sections in order; empty ones (no heading, no text) are left out."""
    found: list[Section] = []
    heading, start, text_line = "", 1, 1
    lines: list[str] = []
    fence: str | None = None
    for number, line in enumerate(document.splitlines(), start=1):
        opening = _FENCE.match(line)
        if fence is not None:
            if opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence):
                fence = None
        elif opening:
            fence = opening.group(1)
        else:
            match = _HEADING.match(line)
            if match:
                _close(found, start, heading, text_line, lines)
                heading, start, text_line, lines = (
                    (match.group(2) or "").strip(),
                    number,
                    number + 1,
                    [],
                )
                continue
        lines.append(line)
    _close(found, start, heading, text_line, lines)
    return found


def _close(
    found: list[Section], start: int, heading: str, text_line: int, lines: list[str]
) -> None:
    text = "\n".join(lines)
    if heading or text.strip():
        found.append(Section(line=start, heading=heading, text=text, text_line=text_line))


def title(parts: list[Section], file_name: str) -> str:
    """A document's title: its first heading, else its file name."""
    return next((s.heading for s in parts if s.heading), file_name)
