"""Path globs for file reservations (``touches``): what a valid glob is, and whether two
globs can match one file.

A glob is a relative POSIX path of segments joined by ``/``. In a segment, ``*`` matches
any run of characters and ``?`` one character, never ``/``; a segment that is exactly
``**`` matches any number of whole segments (at least one when it ends the glob, so
``src/**`` is everything under ``src``, not ``src`` itself). A glob without wildcards is
one exact path. Leading dots are not special. Character classes and braces are refused,
so that overlap stays a small decision with a witness.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache

from workq.errors import InvalidInput
from workq.schemas import GLOB_MAX, GLOBS_PER_ISSUE_MAX

_REFUSED = set("[]{}\\")
_ANY = "x"  # the character a witness uses where any would do


def glob(value: object, field: str = "touches") -> str:
    """``value`` as a stored glob (repeated and trailing slashes, ``./`` and repeated
    ``**`` folded), or InvalidInput naming what is wrong with it."""
    if not isinstance(value, str):
        raise InvalidInput("a path glob must be a string", field=field)
    text = value.strip()
    if not text:
        raise InvalidInput("a path glob must not be empty", field=field)
    if len(text) > GLOB_MAX:
        raise InvalidInput(f"a path glob is at most {GLOB_MAX} characters", field=field)
    if text.startswith("/") or (len(text) > 1 and text[1] == ":"):
        raise InvalidInput(
            f"path glob {text!r} is absolute: give it relative to the repository root",
            field=field,
        )
    bad = sorted({c for c in text if c in _REFUSED or not c.isprintable()})
    if bad:
        raise InvalidInput(
            f"path glob {text!r} holds {''.join(bad)!r}: only * ? and ** are wildcards",
            field=field,
        )
    segments: list[str] = []
    for segment in text.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            raise InvalidInput(f"path glob {text!r} leaves the repository (..)", field=field)
        if "**" in segment and segment != "**":
            raise InvalidInput(
                f"path glob {text!r}: ** must be a whole segment (as in src/**/x.py)",
                field=field,
            )
        if segment == "**" and segments and segments[-1] == "**":
            continue
        segments.append(segment)
    if not segments:
        raise InvalidInput(f"path glob {text!r} names no path", field=field)
    return "/".join(segments)


def globs(values: Iterable[object], field: str = "touches") -> list[str]:
    """Distinct valid globs in the order given, at most GLOBS_PER_ISSUE_MAX."""
    result: list[str] = []
    for value in values:
        checked = glob(value, field)
        if checked not in result:
            result.append(checked)
    if len(result) > GLOBS_PER_ISSUE_MAX:
        raise InvalidInput(f"at most {GLOBS_PER_ISSUE_MAX} path globs per issue", field=field)
    return result


def matches(path: str, pattern: str) -> bool:
    """Whether the file ``path`` (relative, ``/``-separated, taken literally) matches the
    glob ``pattern``."""
    names = tuple(part for part in path.split("/") if part)
    return bool(names) and _matches(names, _segments(pattern))


def _matches(names: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    if not parts:
        return not names
    if parts[0] == "**":
        return any(_matches(names[i:], parts[1:]) for i in range(len(names) + 1))
    return (
        bool(names)
        and _segment_re(parts[0]).fullmatch(names[0]) is not None
        and (_matches(names[1:], parts[1:]))
    )


@cache
def _segment_re(pattern: str) -> re.Pattern[str]:
    text = "".join("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c) for c in pattern)
    return re.compile(text, re.DOTALL)


def overlap(a: str, b: str) -> bool:
    """Whether some file path matches both globs (each as :func:`glob` returns it)."""
    return witness(a, b) is not None


def witness(a: str, b: str) -> str | None:
    """A file path both globs match, or None when there is none."""
    found = _paths(_segments(a), _segments(b))
    if found is None:
        return None
    return "/".join(found) if found else None


def _segments(pattern: str) -> tuple[str, ...]:
    parts = tuple(pattern.split("/"))
    # A trailing ** matches at least one segment: the same as **/*.
    return (*parts, "*") if parts[-1] == "**" else parts


@cache
def _paths(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...] | None:
    """Segments of a path both segment patterns match (possibly none), or None."""
    if not a and not b:
        return ()
    starred = False
    for star, other, swap in ((a, b, False), (b, a, True)):
        if not star or star[0] != "**":
            continue
        starred = True
        # ** matches nothing here ...
        rest = _paths(other, star[1:]) if swap else _paths(star[1:], other)
        if rest is not None:
            return rest
        # ... or the other side's next segment, and stays. (Both ** eating one segment
        # is never needed: without that segment the path still matches both.)
        if other and other[0] != "**":
            tail = _paths(other[1:], star) if swap else _paths(star, other[1:])
            if tail is not None:
                return (_example(other[0]), *tail)
    if starred:
        return None
    if not a or not b:
        return None
    both = _segment(a[0], b[0])
    if both is None:
        return None
    tail = _paths(a[1:], b[1:])
    return None if tail is None else (both, *tail)


def _example(pattern: str) -> str:
    """A segment that ``pattern`` (no **) matches: every valid one matches some name."""
    found = _segment(pattern, "*")
    assert found is not None
    return found


@cache
def _segment(a: str, b: str) -> str | None:
    """A segment both segment patterns match, or None: a search over pairs of positions,
    where ``*`` either steps past itself or eats a character and stays. The state also
    counts characters (up to 3) and whether all were dots, since ``.`` and ``..`` are not
    file names."""
    State = tuple[int, int, int, bool]
    start: State = (0, 0, 0, True)
    previous: dict[State, tuple[State, str] | None] = {start: None}
    todo = [start]
    while todo:
        state = todo.pop()
        i, j, length, dots = state
        if i == len(a) and j == len(b) and length and not (dots and length <= 2):
            chars: list[str] = []
            step = previous[state]
            while step is not None:
                state, char = step
                chars.append(char)
                step = previous[state]
            return "".join(reversed(chars))
        moves: list[tuple[State, str]] = []
        if i < len(a) and a[i] == "*":
            moves.append(((i + 1, j, length, dots), ""))
        if j < len(b) and b[j] == "*":
            moves.append(((i, j + 1, length, dots), ""))
        for ai, ac in _eats(a, i):
            for bj, bc in _eats(b, j):
                if ac is None or bc is None or ac == bc:
                    char = ac if ac is not None else bc if bc is not None else _ANY
                    moves.append(((ai, bj, min(length + 1, 3), dots and char == "."), char))
        for nxt, char in moves:
            if nxt not in previous:
                previous[nxt] = (state, char)
                todo.append(nxt)
    return None


def _eats(pattern: str, i: int) -> list[tuple[int, str | None]]:
    """How ``pattern`` at ``i`` can consume one character: (next position, the character
    it must be, or None for any)."""
    if i >= len(pattern):
        return []
    c = pattern[i]
    if c == "*":
        return [(i, None)]
    if c == "?":
        return [(i + 1, None)]
    return [(i + 1, c)]
