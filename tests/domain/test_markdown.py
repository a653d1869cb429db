"""Markdown documents cut into sections for the docs index."""

from __future__ import annotations

from workq.domain.markdown import Section, sections, title


def test_sections_run_heading_to_heading_with_their_lines() -> None:
    doc = "Preamble line\n\n# Title\nIntro\n\n## Part two ##\nText\nmore\n"
    assert sections(doc) == [
        Section(line=1, heading="", text="Preamble line\n", text_line=1),
        Section(line=3, heading="Title", text="Intro\n", text_line=4),
        Section(line=6, heading="Part two", text="Text\nmore", text_line=7),
    ]


def test_a_hash_line_in_a_code_fence_is_not_a_heading() -> None:
    doc = "# Real\n```bash\n# a shell comment\n```\n#hashtag is not a heading\n"
    parts = sections(doc)
    assert [p.heading for p in parts] == ["Real"]
    assert "# a shell comment" in parts[0].text


def test_title_is_the_first_heading_else_the_file_name() -> None:
    assert title(sections("intro\n## Second level first\n# Later"), "a.md") == "Second level first"
    assert title(sections("no heading at all"), "notes.md") == "notes.md"
    assert title(sections(""), "empty.md") == "empty.md"
