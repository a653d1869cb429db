"""Full-text search over issue titles and descriptions.

SQLite uses the FTS5 index of migration 0002_search, ranked by bm25; PostgreSQL its own
text search over the GIN index of 0003_pg_search (db/dialect.py).
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import Connection, text

from workq.db import dialect
from workq.db.engine import retry_lost_read
from workq.domain import fields
from workq.errors import InvalidInput, bad_cursor
from workq.schemas import (
    PAGE_DEFAULT,
    PAGE_MAX,
    IssueType,
    Priority,
    SearchHit,
    SearchPage,
    Status,
)
from workq.services.handle import Queue

QUERY_MAX = 500
WORDS_MAX = 16
SNIPPET_WORDS = 12
_WORD = re.compile(r"\w+", re.UNICODE)


def words(query: str) -> list[str]:
    """The words of a query: what a match must contain (each as a word prefix)."""
    fields.text(query, "query", limit=QUERY_MAX, required=True, multiline=False)
    found = _WORD.findall(query.lower())
    if not found:
        raise InvalidInput("query has no words to search for", field="query")
    return found[:WORDS_MAX]


def _fts_expression(terms: list[str]) -> str:
    # Each word quoted (so FTS5 operators in user text mean nothing) and matched as a prefix.
    return " ".join(f'"{t}"*' for t in terms)


_FTS_QUERY = text(
    "SELECT i.number, i.title, i.status, i.priority, i.issue_type, "
    f"snippet(issues_fts, -1, '[', ']', '…', {SNIPPET_WORDS}) AS snippet "
    "FROM issues_fts JOIN issues AS i ON i.number = issues_fts.rowid "
    "WHERE issues_fts MATCH :expr AND (:status IS NULL OR i.status = :status) "
    "ORDER BY issues_fts.rank, i.number LIMIT :limit OFFSET :offset"
)


def _sqlite_rows(
    conn: Connection, terms: list[str], status: str | None, limit: int, offset: int
) -> list[Any]:
    params = {
        "expr": _fts_expression(terms),
        "status": status,
        "limit": limit,
        "offset": offset,
    }
    return list(conn.execute(_FTS_QUERY, params))


def encode_cursor(offset: int) -> str:
    return f"o{offset}"


def decode_cursor(cursor: str) -> int:
    if not re.fullmatch(r"o\d{1,9}", cursor):
        raise bad_cursor()
    return int(cursor[1:])


@retry_lost_read
def search(
    q: Queue,
    query: str,
    *,
    status: str | Status | None = None,
    limit: int = PAGE_DEFAULT,
    cursor: str | None = None,
) -> SearchPage:
    """Issues whose title or description contains every word of ``query`` (as a prefix)."""
    terms = words(query)
    if not 1 <= limit <= PAGE_MAX:
        raise InvalidInput(f"limit must be between 1 and {PAGE_MAX}", field="limit")
    wanted: str | None = None
    if status is not None:
        try:
            wanted = Status(status).value
        except ValueError:
            raise InvalidInput(
                f"status must be one of open, in_progress, done (got {status!r})", field="status"
            ) from None
    offset = decode_cursor(cursor) if cursor else 0
    fetch = _sqlite_rows if q.db.is_sqlite else dialect.search_rows
    with q.db.read() as conn:
        rows = fetch(conn, terms, wanted, limit + 1, offset)
    page = rows[:limit]
    has_more = len(rows) > limit
    return SearchPage(
        items=[
            SearchHit(
                number=r.number,
                title=r.title,
                status=Status(r.status),
                priority=Priority.from_rank(r.priority),
                issue_type=IssueType(r.issue_type),
                snippet=r.snippet or "",
            )
            for r in page
        ],
        has_more=has_more,
        next_cursor=encode_cursor(offset + limit) if has_more else None,
    )


def rebuild_index(q: Queue) -> None:
    """Refill the full-text index from the issues table (after a manual edit or repair)."""
    if q.db.is_sqlite:
        q.db.write(_rebuild)


def _rebuild(conn: Connection) -> None:
    conn.exec_driver_sql("INSERT INTO issues_fts(issues_fts) VALUES ('rebuild')")
