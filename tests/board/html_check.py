"""What a page of the board may contain: read with the standard library's HTML parser."""

from __future__ import annotations

import re
from html.parser import HTMLParser

DANGEROUS_SCHEMES = ("javascript:", "vbscript:", "data:")


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def tags(html: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = Tags()
    parser.feed(html)
    parser.close()
    return parser.tags


def unsafe(html: str) -> list[str]:
    """Everything in ``html`` that could run script: a script other than the board's own,
    an event handler attribute, a link or source with a scripting scheme, raw embeds."""
    found = []
    for tag, attrs in tags(html):
        if tag == "script" and not (attrs.get("src") or "").endswith("/static/board.js"):
            found.append(f"<script {attrs}>")
        if tag in ("iframe", "object", "embed", "img", "form") and tag != "form":
            found.append(f"<{tag}>")
        for name, value in attrs.items():
            if name.startswith("on"):
                found.append(f"<{tag} {name}>")
            cleaned = re.sub(r"\s", "", value or "").lower()
            if name in ("href", "src", "action", "xlink:href") and cleaned.startswith(
                DANGEROUS_SCHEMES
            ):
                found.append(f"<{tag} {name}={value}>")
    return found


def column_numbers(html: str) -> dict[str, list[int]]:
    """The issue numbers of each column's cards, in order."""
    found: dict[str, list[int]] = {}
    current = None
    for tag, attrs in tags(html):
        if tag == "section" and (attrs.get("id") or "").startswith("col-"):
            current = (attrs["id"] or "")[4:]
            found[current] = []
        elif tag == "li" and current and "card" in (attrs.get("class") or "").split():
            found[current].append(int(attrs["data-number"] or 0))
    return found
