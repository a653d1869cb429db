"""Path globs: validation, and overlap proven against wcmatch on generated file trees."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wcmatch import glob as wc

from workq.domain.globs import glob, globs, overlap, witness
from workq.domain.globs import matches as our_match
from workq.errors import InvalidInput

FLAGS = wc.GLOBSTAR | wc.DOTGLOB


def matches(path: str, pattern: str) -> bool:
    return bool(wc.globmatch(path, pattern, flags=FLAGS))


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("src/auth/**", "src/auth/login.py", True),
        ("src/auth/**", "src/auth", False),
        ("src/auth/**", "src/**/*.py", True),
        ("src/auth/**", "src/billing/**", False),
        ("*.py", "src/a.py", False),
        ("*.py", "setup.py", True),
        ("**/*.md", "docs/x/readme.md", True),
        ("**/*.md", "**/*.py", False),
        ("**", "README", True),
        ("a?c", "a*", True),
        ("a?c", "ab", False),
        ("docs/*.md", "docs/api/**", False),
    ],
)
def test_usual_forms(a: str, b: str, expected: bool) -> None:
    assert overlap(a, b) is expected
    assert overlap(b, a) is expected
    found = witness(a, b)
    if expected:
        assert found is not None and matches(found, a) and matches(found, b)


@pytest.mark.parametrize(
    ("given_", "stored"),
    [("./src//auth/", "src/auth"), ("src/**/**/x", "src/**/x"), (" a.py ", "a.py")],
)
def test_globs_are_folded(given_: str, stored: str) -> None:
    assert glob(given_) == stored


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "/etc/passwd",
        "C:/x",
        "../x",
        "src/../x",
        "a/[ab]",
        "{a,b}",
        "a\\b",
        "src/a**",
        "x" * 201,
        "a\nb",
        "./",
    ],
)
def test_bad_globs_are_refused(bad: str) -> None:
    with pytest.raises(InvalidInput):
        glob(bad)


def test_count_is_bounded_and_duplicates_fold() -> None:
    assert globs(["a", "a", "b"]) == ["a", "b"]
    with pytest.raises(InvalidInput, match="at most 32"):
        globs([f"f{i}" for i in range(33)])


NAMES = st.sampled_from(["a", "b", "ab", ".env", "a.py", "b.md", "x.py"])
SEGMENT_PATTERNS = st.sampled_from(
    ["a", "b", "*", "*.py", "*.md", "a*", "?", "??", "a?", "*b", ".*", "**", "x.py"]
)
PATTERNS = st.lists(SEGMENT_PATTERNS, min_size=1, max_size=4).map("/".join).map(glob)
TREES = st.lists(st.lists(NAMES, min_size=1, max_size=4).map("/".join), max_size=40)


@settings(max_examples=400, deadline=None)
@given(a=PATTERNS, b=PATTERNS, tree=TREES)
def test_overlap_agrees_with_brute_force_matching(a: str, b: str, tree: list[str]) -> None:
    found = witness(a, b)
    # Complete: a claimed overlap comes with a path both really match.
    if found is not None:
        assert matches(found, a), (found, a)
        assert matches(found, b), (found, b)
    # Sound: no file of any tree matches both while overlap says no.
    for path in tree:
        if matches(path, a) and matches(path, b):
            assert found is not None, (path, a, b)
    assert overlap(a, b) is (found is not None)
    # The hook's matcher agrees with wcmatch on every file of the tree.
    for path in tree:
        assert our_match(path, a) is matches(path, a), (path, a)
    assert overlap(b, a) is overlap(a, b)
