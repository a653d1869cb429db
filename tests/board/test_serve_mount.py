"""`workq serve --http --board`: the board under /board beside the MCP endpoint, each with
its own token rule."""

from __future__ import annotations

from pathlib import Path

import httpx2

from tests.board.conftest import cli
from tests.server.test_http import HEADERS, INITIALIZE, http_server
from workq.domain.authority import Authority
from workq.services.handle import Queue
from workq.services.queue import blocking, issues


def test_the_board_under_serve_http(db: Path, q: Queue, client: httpx2.Client) -> None:
    number = issues.create(q, title="seen from the mount").number
    blocking.block(q, number, "why", by=Authority.overriding("admin", who="admin"))
    with http_server(db, "--board") as mcp_url:
        root = mcp_url.removesuffix("/mcp")
        page = client.get(f"{root}/board/")
        bare = client.get(f"{root}/board", follow_redirects=True)
        issue = client.get(f"{root}/board/issues/{number}")
        style = client.get(f"{root}/board/static/board.css")
        acted = client.post(
            f"{root}/board/api/issues/{number}/unblock",
            headers={"x-workq-board": "1", "origin": root},
        )
        mcp = client.post(mcp_url, json=INITIALIZE, headers=HEADERS)
    assert page.status_code == 200 and "seen from the mount" in page.text
    assert f'href="/board/issues/{number}"' in page.text
    assert 'src="/board/static/board.js"' in page.text
    assert bare.status_code == 200 and str(bare.url).endswith("/board/")
    assert issue.status_code == 200 and style.status_code == 200
    assert acted.status_code == 200 and not issues.get(q, number).is_blocked
    assert mcp.status_code == 200


def test_with_a_token_both_faces_need_it(db: Path, q: Queue, client: httpx2.Client) -> None:
    issues.create(q, title="private")
    with http_server(db, "--board", "--token", "tok") as mcp_url:
        root = mcp_url.removesuffix("/mcp")
        page = client.get(f"{root}/board/")
        mcp = client.post(mcp_url, json=INITIALIZE, headers=HEADERS)
        login = client.post(f"{root}/board/login", data={"token": "tok"})
        after = client.get(f"{root}/board/")
    assert page.status_code == 403 and "private" not in page.text
    assert mcp.status_code == 403
    assert login.status_code == 303 and "path=/board/" in login.headers["set-cookie"].lower()
    assert after.status_code == 200 and "private" in after.text


def test_the_board_needs_http(db: Path) -> None:
    done = cli(db, "serve", "--board", check=False)
    assert done.returncode == 1 and "--http" in done.stderr
