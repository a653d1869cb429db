"""Contract E's git rules, pure: branch names (TDD-002), TDD phase commit messages in
Conventional Commits form (TDD-003), what a red commit may hold (TDD-001), and the
prefixes of issue comments by kind."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import PurePosixPath

from workq.errors import InvalidInput, RuleViolation

BRANCH_TYPES = ("feature", "fix", "refactor", "docs")
PHASES = ("red", "green", "refactor", "docs")
# The Conventional Commits type of each phase.
COMMIT_TYPES = {"red": "test", "green": "feat", "refactor": "refactor", "docs": "docs"}
STATUS = {"red": "RED", "green": "GREEN"}
HEADER_MAX = 100
DETAIL_MAX = 500
DETAILS_MAX = 30
COMMENT_PREFIXES = {
    "progress": "📝 Progress Update",
    "question": "❓ Question",
    "blocker": "🚫 Blocker",
    "resolution": "✅ Resolution",
}

_NAME = re.compile(r"[a-z0-9-]+")
_CONVENTIONAL = re.compile(
    r"(?P<type>[a-z]+)(?:\((?P<scope>[a-z0-9._/-]+)\))?!?: (?P<description>\S.*)"
)
_LINE_BREAK = re.compile(r"[\r\n\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x9f]")


def feature_branch(branch_type: str, name: str) -> str:
    """``{branch_type}/{name}`` after TDD-002: a known type, a kebab-case name."""
    if branch_type not in BRANCH_TYPES:
        raise RuleViolation(
            f"TDD-002: the branch type must be one of {', '.join(BRANCH_TYPES)}",
            rule="TDD-002",
            field="branch_type",
        )
    if not _NAME.fullmatch(name) or len(name) > 100 or name.strip("-") != name:
        raise RuleViolation(
            f"TDD-002: the branch name {name!r:.60} must be kebab-case: a-z, 0-9 and inner "
            "hyphens, at most 100 characters",
            rule="TDD-002",
            field="name",
        )
    return f"{branch_type}/{name}"


# --- TDD-001: a red commit holds tests only --------------------------------------------------

_TEST_DIRS = frozenset({"test", "tests", "__tests__", "spec", "specs", "testdata", "fixtures"})
_TEST_NAMES = (
    re.compile(r"test_.+\.py|.+_test\.py|conftest\.py"),  # pytest
    re.compile(r".+\.(test|spec)\.[cm]?[jt]sx?"),  # jest, vitest, mocha
    re.compile(r".+_test\.go|.+_test\.exs?|.+_spec\.rb|.+Tests?\.(java|kt|cs|swift)"),
)


def is_test_file(path: str) -> bool:
    """Whether ``path`` (relative to the repository) is a test: anything under a ``tests``
    (``test``, ``spec``, ``__tests__``...) folder, or a file named as test runners name
    tests (``test_*.py``, ``*_test.py``, ``*.test.ts``, ``*.spec.js``, ``*_test.go``...)."""
    parts = PurePosixPath(path).parts
    if any(part.lower() in _TEST_DIRS for part in parts[:-1]):
        return True
    name = parts[-1] if parts else ""
    return any(pattern.fullmatch(name) for pattern in _TEST_NAMES)


def red_only_tests(paths: Sequence[str]) -> None:
    """TDD-001: refuse a red commit that holds anything but tests, naming the files."""
    offending = sorted(p for p in paths if not is_test_file(p))
    if offending:
        shown = ", ".join(offending[:10]) + (" ..." if len(offending) > 10 else "")
        raise RuleViolation(
            f"TDD-001: a red commit holds only tests; these are not: {shown}",
            rule="TDD-001",
            files=offending,
            hint="commit the tests alone as red (move the other changes aside), or commit "
            "them as green",
        )


# --- TDD-003: the commit message -------------------------------------------------------------


def _one_line(value: str, field: str, limit: int) -> str:
    text = value.strip()
    if not text or len(text) > limit or _LINE_BREAK.search(text) or _CONTROL.search(text):
        raise InvalidInput(
            f"{field} must be one line of 1-{limit} characters, without control characters",
            field=field,
        )
    return text


ISSUE_TITLE_MAX = 100  # of the issue's title in a commit's Issue: line


def commit_message(
    phase: str,
    component: str,
    details: Sequence[str] = (),
    test_count: str | None = None,
    quality_gates: str | None = None,
    issue: tuple[int, str] | None = None,
    issue_type: str | None = None,
) -> str:
    """Contract E's message of a TDD phase: ``{type}: {summary}``, the details as bullets,
    then ``Status:`` (red and green) and ``Quality gates:`` lines when known. For the issue
    the work is for, `` (#N)`` ends the header (when it fits) and an ``Issue: #N title``
    line ends the message, so that after a fast-forward the default branch's log still
    says which issue each commit served; the green phase of a bug is a ``fix``."""
    if phase not in PHASES:
        raise InvalidInput(f"phase must be one of {', '.join(PHASES)}", field="phase")
    what = _one_line(component, "component", HEADER_MAX)
    summary = {
        "red": f"add failing tests for {what}",
        "green": f"implement {what}",
        "refactor": f"refactor {what}",
        "docs": f"document {what}",
    }[phase]
    if len(details) > DETAILS_MAX:
        raise InvalidInput(f"at most {DETAILS_MAX} details", field="details")
    bullets = [f"- {_one_line(d, 'details', DETAIL_MAX)}" for d in details]
    trailer = []
    if phase in STATUS:
        count = f" ({_one_line(test_count, 'test_count', 40)} tests)" if test_count else ""
        trailer.append(f"Status: {STATUS[phase]}{count}")
    elif test_count:
        trailer.append(f"Tests: {_one_line(test_count, 'test_count', 40)}")
    if quality_gates:
        trailer.append(f"Quality gates: {_one_line(quality_gates, 'quality_gates', 40)}")
    if issue is not None:
        number, title = issue
        trailer.append(f"Issue: #{number} {' '.join(title.split())[:ISSUE_TITLE_MAX]}")
    kind = "fix" if phase == "green" and issue_type == "bug" else COMMIT_TYPES[phase]
    header = f"{kind}: {summary}"
    if issue is not None and len(header) + len(f" (#{issue[0]})") <= HEADER_MAX:
        header += f" (#{issue[0]})"
    message = header
    for block in (bullets, trailer):
        if block:
            message += "\n\n" + "\n".join(block)
    check_conventional(message)
    return message + "\n"


def check_conventional(message: str) -> None:
    """TDD-003: a Conventional Commits message: ``type(scope)!: description`` on a header
    line of at most 100 characters, then an empty line before any body."""
    lines = message.split("\n")
    header = lines[0]
    found = _CONVENTIONAL.fullmatch(header)
    problem = None
    if found is None:
        problem = "the header is not 'type(scope): description'"
    elif len(header) > HEADER_MAX:
        problem = f"the header is longer than {HEADER_MAX} characters"
    elif len(lines) > 1 and lines[1] != "":
        problem = "the body must be separated from the header by an empty line"
    if problem:
        raise RuleViolation(
            f"TDD-003: not a Conventional Commits message: {problem}",
            rule="TDD-003",
            hint="shorten the component (the header is built from it), then call again",
        )


def comment_body(body: str, comment_type: str | None) -> str:
    """Contract E's comment with its kind's prefix on a line of its own."""
    if comment_type is None:
        return body
    if comment_type not in COMMENT_PREFIXES:
        raise InvalidInput(
            f"comment_type must be one of {', '.join(COMMENT_PREFIXES)}", field="comment_type"
        )
    return f"**{COMMENT_PREFIXES[comment_type]}**\n\n{body}"
