"""What a person may do from the board, through the same services as the CLI, and what a
page on another site may not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2

from tests.board.conftest import board_server
from workq.domain.authority import Authority
from workq.schemas import FORCE_CLAIM_CONFIRMATION
from workq.services.handle import Queue
from workq.services.queue import blocking, claims, issues, notes

ACT = {"x-workq-board": "1", "x-workq-actor": "alice"}


def post(
    client: httpx2.Client, url: str, number: int, action: str, body: Any = None, **headers: str
) -> httpx2.Response:
    return client.post(
        f"{url}/api/issues/{number}/{action}", json=body or {}, headers={**ACT, **headers}
    )


def test_unblock_needs_the_boards_own_header_and_origin(
    db: Path, q: Queue, client: httpx2.Client
) -> None:
    number = issues.create(q, title="stuck").number
    blocking.block(q, number, "waiting for a person", by=Authority.overriding("admin", who="admin"))
    with board_server(db) as url:
        plain_form = client.post(f"{url}/api/issues/{number}/unblock")
        other_site = post(client, url, number, "unblock", origin="https://evil.example")
        rebound = post(client, url, number, "unblock", host="evil.example")
        assert issues.get(q, number).is_blocked
        done = post(client, url, number, "unblock", origin=url)
    assert plain_form.status_code == 403 and plain_form.json()["code"] == "FORBIDDEN"
    # A board without a token does not blame a token it does not have.
    assert plain_form.json()["message"] == "actions are taken from the board's own page"
    assert other_site.status_code == 403
    assert rebound.status_code == 403
    assert done.status_code == 200, done.text
    assert not issues.get(q, number).is_blocked
    last = notes.history(q, number)[-1]
    assert (last.kind, last.actor) == ("unblocked", "board:alice")


def test_with_a_token_actions_need_it(db: Path, q: Queue, client: httpx2.Client) -> None:
    number = issues.create(q, title="stuck").number
    blocking.block(q, number, "why", by=Authority.overriding("admin", who="admin"))
    with board_server(db, "--token", "t0ken") as url:
        without = post(client, url, number, "unblock")
        wrong = post(client, url, number, "unblock", authorization="Bearer nope")
        assert issues.get(q, number).is_blocked
        right = post(client, url, number, "unblock", authorization="Bearer t0ken")
    assert without.status_code == 403 and wrong.status_code == 403
    assert without.json()["message"] == "this board requires its token for that"
    assert right.status_code == 200
    assert not issues.get(q, number).is_blocked


def test_reprioritise_release_force_claim_and_comment(
    db: Path, q: Queue, client: httpx2.Client
) -> None:
    number = issues.create(q, title="work").number
    claims.claim(q, number, Authority.of({"run-gone"}))
    with board_server(db) as url:
        bad_priority = post(client, url, number, "priority", {"priority": "whenever"})
        prio = post(client, url, number, "priority", {"priority": "urgent"})
        release = post(client, url, number, "release", {"reason": "agent died"})
        unconfirmed = post(client, url, number, "force-claim", {"run_id": "run-new"})
        forced = post(
            client,
            url,
            number,
            "force-claim",
            {"run_id": "run-new", "confirmation": FORCE_CLAIM_CONFIRMATION},
        )
        comment = post(client, url, number, "comment", {"body": "taking it over"})
        empty = post(client, url, number, "comment", {"body": "  "})
        unknown = post(client, url, number, "explode")
        missing = post(client, url, 999, "unblock")
    assert bad_priority.status_code == 400 and bad_priority.json()["code"] == "INVALID_INPUT"
    assert prio.status_code == 200 and release.status_code == 200
    assert unconfirmed.status_code == 400
    assert unconfirmed.json()["code"] == "INVALID_CONFIRMATION"
    assert forced.status_code == 200 and "run-new" in forced.json()["message"]
    assert comment.status_code == 200
    assert empty.status_code == 400 and unknown.status_code == 404
    assert missing.status_code == 404 and missing.json()["code"] == "NOT_FOUND"
    issue = issues.get(q, number)
    assert (issue.priority.value, issue.claimed_by) == ("urgent", "run-new")
    [said] = notes.comments(q, number)
    assert (said.body, said.author) == ("taking it over", "board:alice")
    kinds = [(e.kind, e.actor) for e in notes.history(q, number)]
    assert ("updated", "board:alice") in kinds
    assert ("released", "board:alice") in kinds
    assert ("force_claimed", "run-new") in kinds
