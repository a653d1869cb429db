"""domain/landing_failures.py: any text GitHub gives is cut to its bound and made storable;
in the refusal's comment it shows as given and never becomes Markdown structure."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from workq.domain import fields
from workq.domain import landing_failures as bounds
from workq.errors import InvalidInput
from workq.schemas import COMMENT_MAX, CheckAnnotation, FailedCheck, LandingFailure

MD = MarkdownIt("commonmark")
NASTY = st.text(alphabet=st.sampled_from(list("`~*_#[]()<>!&|\\\n\r\x00\x1b\x85 ab")), max_size=80)


@settings(max_examples=150, deadline=None)
@given(text=st.text(max_size=400) | NASTY, limit=st.integers(min_value=1, max_value=300))
def test_a_cut_text_keeps_its_bound_and_is_storable(text: str, limit: int) -> None:
    for made in (bounds.cut(text, limit), bounds.line(text, limit)):
        assert made is not None and len(made) <= limit
        assert fields.characters(made, "x", multiline=True) == made  # storable
    one = bounds.line(text, limit)
    assert one is not None and "\n" not in one
    if len(text) <= limit and "\r" not in text and _storable(text):
        assert bounds.cut(text, limit) == text  # nothing to cut or rid of: kept as given


def _storable(text: str) -> bool:
    try:
        fields.characters(text, "x", multiline=True)
    except InvalidInput:
        return False
    return True


@settings(max_examples=150, deadline=None)
@given(text=NASTY.filter(lambda t: t.strip() != ""))
def test_a_fence_and_a_code_span_hold_any_text(text: str) -> None:
    block = bounds.cut(text, 500) or ""
    (fence,) = [t for t in MD.parse(bounds.fenced(block)) if t.type == "fence"]
    assert fence.content == block.rstrip() + "\n"
    span = bounds.line(text, 200) or ""
    if span:
        (para,) = [t for t in MD.parse(bounds.code_span(span)) if t.type == "inline"]
        kinds = [c.type for c in para.children or ()]
        assert kinds == ["code_inline"], (span, kinds)
    escaped = MD.parse("x " + bounds.escaped(span))
    inline = [c.type for t in escaped if t.children for c in t.children]
    assert set(inline) <= {"text", "softbreak"}, inline


def test_the_largest_failure_fits_one_comment() -> None:
    ticks = "`" * 40
    check = FailedCheck(
        name="n" * bounds.NAME_MAX,
        kind="check_run",
        conclusion="failure",
        title="#" * bounds.TITLE_MAX,
        summary=ticks * (bounds.SUMMARY_MAX // 40),
        annotations=[
            CheckAnnotation(path="p" * bounds.NAME_MAX, start_line=1, message=ticks * 7)
            for _ in range(bounds.ANNOTATIONS_MAX)
        ],
        annotations_total=1000,
    )
    failure = LandingFailure(
        reason="r" * bounds.REASON_LIMIT,
        round=1,
        max_rounds=3,
        checks=[check] * bounds.CHECKS_MAX,
    )
    said = bounds.comment(failure)
    assert len(said) <= COMMENT_MAX
    assert fields.comment(said) == said
    assert said.startswith("Landing refused: ")
