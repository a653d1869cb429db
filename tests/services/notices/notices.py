"""Making notices to deliver: an issue, claimed, then blocked (``blocked`` raises the notice
of that name for every sink that takes it)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from tests.conftest import ADMIN
from workq.db.tables import notices
from workq.domain.authority import Authority
from workq.services.handle import Queue
from workq.services.queue import blocking, claims, issues


def blocked_issue(q: Queue, title: str = "Fix the login page", holder: str = "run-a") -> int:
    """A new issue, claimed by ``holder``, then blocked by it: one notice per sink."""
    number = issues.create(q, title=title, actor="tester").number
    claims.claim(q, number, Authority.of({holder}))
    blocking.block(q, number, "needs a decision on the API", by=Authority.of({holder}))
    return number


def blocked_unclaimed(q: Queue, title: str = "Another one") -> int:
    number = issues.create(q, title=title, actor="tester").number
    blocking.block(q, number, "waiting for a person", by=ADMIN)
    return number


def rows(q: Queue) -> list[dict[str, Any]]:
    """The notice outbox, oldest first."""
    with q.db.read() as conn:
        return [dict(r._mapping) for r in conn.execute(select(notices).order_by(notices.c.id))]
