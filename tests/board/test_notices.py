"""The board's overview shows how the notices stand: counts by state, the failed ones with
their error (escaped), read over HTTP from a real `workq board` process."""

from __future__ import annotations

from pathlib import Path

import httpx2
from sqlalchemy import update

from tests.board.conftest import board_server
from tests.board.html_check import unsafe
from tests.services.notices.notices import blocked_issue, blocked_unclaimed
from workq.db.tables import notices
from workq.services.handle import Queue
from workq.services.notices import sinks

HOSTILE = '<script>alert("n")</script><img src=x onerror=alert(1)>'


def test_the_overview_shows_pending_and_failed_notices(
    db: Path, q: Queue, client: httpx2.Client
) -> None:
    with board_server(db) as url:
        quiet = client.get(f"{url}/")
    assert 'id="notices-title"' not in quiet.text  # no notices: no section
    sinks.add(q, "team", url="http://127.0.0.1:1/", events="blocked", check=False)
    failed = blocked_issue(q, title="first")
    blocked_unclaimed(q, title="second")
    q.db.write(
        lambda conn: conn.execute(
            update(notices)
            .where(notices.c.number == failed)
            .values(state="failed", attempts=8, last_error=f"HTTP 500 {HOSTILE}")
        )
    )
    with board_server(db) as url:
        page = client.get(f"{url}/")
    assert page.status_code == 200
    text = page.text
    assert 'id="notices-title"' in text
    assert "1 pending, 0 delivered, " in text and "1 failed" in text
    assert "&lt;script&gt;alert(" in text and HOSTILE not in text
    assert unsafe(text) == []
    assert f'href="/issues/{failed}">#{failed}</a>' in text
    assert "<td>team</td><td>blocked</td>" in text
