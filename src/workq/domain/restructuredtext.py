"""reStructuredText documents (and plain ``.txt`` docs, read the same way) cut into sections,
heading to heading, for the docs index, as :mod:`workq.domain.markdown` cuts Markdown.

A section title is a line of text at the margin underlined (and perhaps overlined) by one
punctuation character repeated as long as the title (or at least 4 times). Lines inside a
literal block (indented after a paragraph ending ``::``) or a directive (``.. code-block::``)
are indented, so they never start a section. A line of punctuation alone is a transition.
"""

from __future__ import annotations

import re

from workq.domain.markdown import Section

__all__ = ["sections"]

# The characters docutils accepts as section adornment.
_ADORNMENT = re.compile(r"""^([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~])\1*\s*$""")


def _adornment(line: str) -> str | None:
    """The character ``line`` repeats if it is one punctuation character repeated."""
    stripped = line.rstrip()
    return stripped[0] if stripped and _ADORNMENT.match(stripped) else None


def _text(line: str) -> bool:
    return bool(line.strip()) and _adornment(line) is None


def _long_enough(adornment: str, title: str) -> bool:
    # As docutils: shorter than its title is still a title (with a warning) from 4 on.
    return len(adornment.rstrip()) >= min(len(title.strip()), 4)


def _heading(lines: list[str], i: int) -> tuple[str, int] | None:
    """The title of a section heading starting at line ``i`` (0-based), and how many lines
    the heading takes; None when none starts there."""
    line = lines[i]
    nxt = lines[i + 1] if i + 1 < len(lines) else ""
    after = lines[i + 2] if i + 2 < len(lines) else ""
    over = _adornment(line)
    if over is not None:  # overline, title (it may be inset), underline of the same
        if _text(nxt) and _adornment(after) == over and _long_enough(after, nxt):
            return nxt.strip(), 3
        return None
    # A title at the margin after a blank line (or first), then its underline.
    at_margin = _text(line) and not line[0].isspace() and (i == 0 or not lines[i - 1].strip())
    if at_margin and _adornment(nxt) is not None and _long_enough(nxt, line):
        return line.strip(), 2
    return None


def sections(document: str) -> list[Section]:
    """The document's sections in order; empty ones (no heading, no text) are left out.
    ``line`` is a section's title line (its overline when it has one)."""
    lines = document.splitlines()
    found: list[Section] = []
    heading, start, text_line = "", 1, 1
    body: list[str] = []
    i = 0
    while i < len(lines):
        title = _heading(lines, i)
        if title is None:
            body.append(lines[i])
            i += 1
            continue
        _close(found, start, heading, text_line, body)
        heading, start, text_line, body = title[0], i + 1, i + 1 + title[1], []
        i += title[1]
    _close(found, start, heading, text_line, body)
    return found


def _close(found: list[Section], start: int, heading: str, text_line: int, body: list[str]) -> None:
    text = "\n".join(body)
    if heading or text.strip():
        found.append(Section(line=start, heading=heading, text=text, text_line=text_line))
