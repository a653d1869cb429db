"""Issue text as HTML that cannot run anything: Markdown with raw HTML off, then nh3."""

from __future__ import annotations

import nh3
from markdown_it import MarkdownIt
from markupsafe import Markup

_md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
_TAGS = {
    "p", "br", "hr", "em", "strong", "code", "pre", "blockquote", "ul", "ol", "li",
    "h1", "h2", "h3", "h4", "h5", "h6", "a", "table", "thead", "tbody", "tr", "th", "td",
}  # fmt: skip
_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}}


def render(text: str) -> Markup:
    """Safe HTML for ``text``: no script, no raw HTML, no ``javascript:`` or ``data:`` links
    (markdown-it drops them, nh3 drops whatever got through), links open nothing by
    themselves."""
    html = _md.render(text)
    clean = nh3.clean(
        html,
        tags=_TAGS,
        attributes=_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )
    return Markup(clean)  # sanitised by nh3 just above
