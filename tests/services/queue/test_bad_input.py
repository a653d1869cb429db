"""Bad input gets a clear error and changes nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import ADMIN
from workq.domain.authority import Authority
from workq.errors import InvalidInput, NotFound, WorkqError
from workq.services.handle import Queue
from workq.services.maintenance import transfer
from workq.services.queue import blocking, claims, dependencies, issues, listing, notes


def _snapshot(queue: Queue) -> list[str]:
    return list(transfer.export_lines(queue))


BAD_CALLS: list[tuple[str, Callable[[Queue], Any], type[WorkqError]]] = [
    ("empty title", lambda q: issues.create(q, title=""), InvalidInput),
    ("blank title", lambda q: issues.create(q, title="   "), InvalidInput),
    ("1 MB title", lambda q: issues.create(q, title="x" * 1_000_000), InvalidInput),
    ("NUL in title", lambda q: issues.create(q, title="a\x00b"), InvalidInput),
    ("newline in title", lambda q: issues.create(q, title="a\nb"), InvalidInput),
    (
        "huge description",
        lambda q: issues.create(q, title="t", description="d" * 70_000),
        InvalidInput,
    ),
    ("bad priority", lambda q: issues.create(q, title="t", priority="asap"), InvalidInput),
    ("bad type", lambda q: issues.create(q, title="t", issue_type="epic"), InvalidInput),
    ("bad agent", lambda q: issues.create(q, title="t", agent="a b"), InvalidInput),
    ("bad label", lambda q: issues.create(q, title="t", labels=["ok", "not ok"]), InvalidInput),
    ("wrong type title", lambda q: issues.create(q, title=5), InvalidInput),  # type: ignore[arg-type]
    ("bad status filter", lambda q: listing.list_issues(q, status="closed"), InvalidInput),
    ("bad limit", lambda q: listing.list_issues(q, limit=0), InvalidInput),
    ("bad cursor", lambda q: listing.list_issues(q, cursor="%%%"), InvalidInput),
    ("unknown number", lambda q: issues.get(q, 999), NotFound),
    ("zero number", lambda q: issues.get(q, 0), InvalidInput),
    ("negative number", lambda q: claims.claim(q, -1, Authority.of({"run"})), InvalidInput),
    ("huge number", lambda q: claims.claim(q, 2**63, Authority.of({"run"})), InvalidInput),
    ("bool number", lambda q: issues.get(q, True), InvalidInput),
    (
        "bad run id",
        lambda q: claims.claim(q, 1, Authority.of({"run; drop table issues"})),
        InvalidInput,
    ),
    (
        "update unknown",
        lambda q: issues.update_issue(q, 999, title="x", by=ADMIN),
        NotFound,
    ),
    (
        "update bad title",
        lambda q: issues.update_issue(q, 1, title="", by=ADMIN),
        InvalidInput,
    ),
    (
        "delete unknown",
        lambda q: issues.delete_issue(q, 999, by=ADMIN),
        NotFound,
    ),
    (
        "block no reason",
        lambda q: blocking.block(q, 1, "", by=Authority.overriding("admin", who="admin")),
        InvalidInput,
    ),
    ("comment empty", lambda q: notes.comment(q, 1, ""), InvalidInput),
    ("comment kind", lambda q: notes.comment(q, 1, "x", kind="rant"), InvalidInput),
    ("depend unknown", lambda q: dependencies.depend(q, blocker=1, blocked=999), NotFound),
    ("history unknown", lambda q: notes.history(q, 999), NotFound),
]


@pytest.mark.parametrize(("name", "call", "error"), BAD_CALLS, ids=[b[0] for b in BAD_CALLS])
def test_bad_input_is_refused_and_changes_nothing(
    queue: Queue, name: str, call: Callable[[Queue], Any], error: type[WorkqError]
) -> None:
    issues.create(queue, title="existing", labels=["keep"])
    before = _snapshot(queue)
    with pytest.raises(error) as caught:
        call(queue)
    assert caught.value.code and caught.value.message
    assert _snapshot(queue) == before


def test_sql_and_markdown_are_stored_verbatim(queue: Queue) -> None:
    title = "'); DROP TABLE issues; -- <script>**x**</script>"
    made = issues.create(queue, title=title, description="# h\n\n`code` ${x}")
    assert issues.get(queue, made.number).title == title
    assert listing.list_issues(queue).items[0].title == title
