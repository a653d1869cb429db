"""Acceptance criteria: the checkbox items of an issue body."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from workq.domain.checklists import checkbox_items


def test_checked_and_unchecked_items_in_order_text_only() -> None:
    body = (
        "## Acceptance Criteria\n"
        "- [ ] The CLI prints JSON\n"
        "- [x] Errors have codes  \n"
        "* [X] Starred bullets count\n"
        "+ [ ] So do plus bullets\n"
        "1. [ ] And numbered ones\n"
        "  - [ ] Nested items too\n"
    )
    assert checkbox_items(body) == [
        "The CLI prints JSON",
        "Errors have codes",
        "Starred bullets count",
        "So do plus bullets",
        "And numbered ones",
        "Nested items too",
    ]


def test_items_in_code_fences_and_non_checkboxes_are_not_criteria() -> None:
    body = (
        "Example:\n"
        "```markdown\n"
        "- [ ] not a criterion, an example\n"
        "```\n"
        "~~~\n- [x] nor this\n~~~\n"
        "- [] no space in the box\n"
        "- [ ]\n"
        "- a plain item\n"
        "[ ] no bullet\n"
        "- [ ] the real one\n"
    )
    assert checkbox_items(body) == ["the real one"]


def test_a_body_without_checkboxes_has_none() -> None:
    assert checkbox_items("") == []
    assert checkbox_items("Just prose.\n\n- one\n- two") == []


@given(st.lists(st.text(st.characters(categories=("L", "N")), min_size=1), max_size=8))
def test_items_written_as_checkboxes_read_back(items: list[str]) -> None:
    body = "Intro\n\n" + "\n".join(f"- [ ] {item}" for item in items) + "\n\nOutro"
    assert checkbox_items(body) == items
