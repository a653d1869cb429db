"""Full-text search: words as prefixes, ranking, pagination, and an index that follows edits."""

from __future__ import annotations

import re

import pytest

from tests.conftest import ADMIN
from workq.domain.authority import Authority
from workq.errors import InvalidInput
from workq.schemas import SearchPage
from workq.services.handle import Queue
from workq.services.queue import claims, issues, search


def _numbers(page: SearchPage) -> list[int]:
    return [hit.number for hit in page.items]


def test_every_word_must_match_as_a_prefix(queue: Queue) -> None:
    issues.create(queue, title="Fix authentication bug", description="login fails after upgrade")
    issues.create(queue, title="Document the login flow", description="for new users")
    issues.create(queue, title="Unrelated")
    assert sorted(_numbers(search.search(queue, "login"))) == [1, 2]
    assert _numbers(search.search(queue, "auth login")) == [1]
    assert _numbers(search.search(queue, "nothing-like-this")) == []


def test_the_index_follows_updates_and_deletes_but_not_claims(queue: Queue) -> None:
    issues.create(queue, title="alpha")
    issues.create(queue, title="beta")
    issues.update_issue(
        queue,
        1,
        title="gamma",
        description="now about gamma rays",
        by=ADMIN,
    )
    assert _numbers(search.search(queue, "alpha")) == []
    assert _numbers(search.search(queue, "gamma")) == [1]
    claims.claim(queue, 1, Authority.of({"run-a"}))
    assert _numbers(search.search(queue, "gamma", status="in_progress")) == [1]
    assert _numbers(search.search(queue, "gamma", status="open")) == []
    issues.delete_issue(queue, 1, by=ADMIN)
    assert _numbers(search.search(queue, "gamma")) == []
    search.rebuild_index(queue)
    assert _numbers(search.search(queue, "beta")) == [2]


def _marked(snippet: str) -> list[str]:
    """The words a snippet marks as matches: [in brackets]."""
    return re.findall(r"\[([^\[\]]*)\]", snippet)


def test_query_syntax_is_taken_literally(queue: Queue) -> None:
    title = 'A "quoted" OR (odd) title*'
    issues.create(queue, title=title)
    assert _numbers(search.search(queue, 'quoted" OR (odd')) == [1]
    assert _numbers(search.search(queue, "NEAR AND")) == []
    [hit] = search.search(queue, 'quoted" OR (odd').items
    assert _marked(hit.snippet) == ["quoted", "OR", "odd"], hit.snippet
    # Brackets and parentheses in a query are not syntax; a prefix marks its whole word.
    for query in ("odd", "[odd]", "(odd)", "od"):
        [hit] = search.search(queue, query).items
        assert _marked(hit.snippet) == ["odd"], (query, hit.snippet)
        assert "([odd])" in hit.snippet  # the mark inside the title's own parentheses
        # Apart from the mark, the title's text as written (PostgreSQL may trim the ends).
        unmarked = hit.snippet.replace("[odd]", "odd").strip()
        assert unmarked in title and "OR (odd) title*" in unmarked, (query, hit.snippet)


def test_pages_follow_the_cursor(queue: Queue) -> None:
    for n in range(5):
        issues.create(queue, title=f"needle {n}")
    first = search.search(queue, "needle", limit=2)
    assert first.has_more and first.next_cursor
    second = search.search(queue, "needle", limit=2, cursor=first.next_cursor)
    third = search.search(queue, "needle", limit=2, cursor=second.next_cursor)
    seen = _numbers(first) + _numbers(second) + _numbers(third)
    assert sorted(seen) == [1, 2, 3, 4, 5]
    assert not third.has_more and third.next_cursor is None


@pytest.mark.parametrize(
    ("query", "kwargs"),
    [
        ("", {}),
        ("   ", {}),
        ("?!", {}),
        ("x" * 501, {}),
        ("a\x00b", {}),
        ("ok", {"limit": 0}),
        ("ok", {"status": "closed"}),
        ("ok", {"cursor": "not-ours"}),
    ],
)
def test_bad_queries_are_refused_clearly(
    queue: Queue, query: str, kwargs: dict[str, object]
) -> None:
    with pytest.raises(InvalidInput):
        search.search(queue, query, **kwargs)  # type: ignore[arg-type]
