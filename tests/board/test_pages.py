"""The board's pages, read over HTTP from a real `workq board` process."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx2
from sqlalchemy import update

from tests.board.conftest import board_server, cli
from tests.board.html_check import column_numbers, unsafe
from tests.conftest import ADMIN
from workq.db.tables import agents as agents_t
from workq.db.tables import events
from workq.db.tables import issues as issues_t
from workq.domain.authority import Authority
from workq.services.handle import Queue
from workq.services.queue import agents as registered
from workq.services.queue import blocking, claims, dependencies, issues, notes, ready_queue

HOSTILE_TITLE = '<script>alert("t")</script><img src=x onerror=alert(1)>'
HOSTILE_BODY = "\n\n".join(
    [
        "<script>alert('d')</script>",
        "[click](javascript:alert(1)) [upper](JaVaScRiPt:alert(2)) [data](data:text/html,x)",
        '<a href="javascript:alert(3)">raw</a> <iframe src="https://example.org"></iframe>',
        "<img src=x onerror=alert(4)> ![img](javascript:alert(5))",
        "[ok](https://example.org/page) and **bold**",
        "`<script>` in code",
    ]
)


def new(q: Queue, title: str, **kw: object) -> int:
    return issues.create(q, title=title, actor="cli-test", **kw).number  # type: ignore[arg-type]


def test_each_issue_is_in_its_column(db: Path, q: Queue, client: httpx2.Client) -> None:
    ready, held, waiting, blocked, done = (new(q, f"{n} one") for n in range(5))
    claims.claim(q, held, Authority.of({"run-a"}))
    dependencies.depend(q, blocker=ready, blocked=waiting)
    blocking.block(q, blocked, "needs a decision", by=Authority.overriding("admin", who="admin"))
    claims.claim(q, done, Authority.of({"run-b"}))
    claims.complete(q, done, Authority.of(["run-b"]))
    with board_server(db) as url:
        page = client.get(f"{url}/")
    assert page.status_code == 200
    assert column_numbers(page.text) == {
        "ready": [ready],
        "in_progress": [held],
        "waiting": [waiting],
        "blocked": [blocked],
        "done": [done],
    }
    assert "run-a" in page.text
    assert "needs a decision" in page.text
    assert f'href="/issues/{ready}"' in page.text  # what it waits on, as a link


def test_ready_is_in_claim_order_and_pages(db: Path, q: Queue, client: httpx2.Client) -> None:
    for i in range(55):
        new(q, f"task {i}", priority=["low", "medium", "high", "urgent"][i % 4])
    order = [r.number for r in ready_queue.ready(q, limit=60)]
    with board_server(db) as url:
        first = client.get(f"{url}/")
        second = client.get(f"{url}/", params={"page_ready": "1"})
    shown = column_numbers(first.text)["ready"] + column_numbers(second.text)["ready"]
    assert shown == order
    assert len(column_numbers(first.text)["ready"]) == 50
    assert 'data-count="ready">55<' in first.text
    assert 'rel="next"' in first.text and 'rel="prev"' in second.text


def test_filters_and_search(db: Path, q: Queue, client: httpx2.Client) -> None:
    bug = new(q, "crash on start", issue_type="bug", labels=["ui"])
    chore = new(q, "tidy the docs", issue_type="chore", agent="gemini")
    with board_server(db) as url:
        by_type = client.get(f"{url}/", params={"type": "bug"})
        by_label = client.get(f"{url}/", params={"label": "ui"})
        by_agent = client.get(f"{url}/", params={"agent": "gemini"})
        found = client.get(f"{url}/", params={"q": "tidy"})
    assert column_numbers(by_type.text)["ready"] == [bug]
    assert column_numbers(by_label.text)["ready"] == [bug]
    assert column_numbers(by_agent.text)["ready"] == [chore]
    results = found.text.split('<div id="columns"')[0]
    assert re.search(rf'href="/issues/{chore}">#{chore} tidy the docs', results)
    assert f'href="/issues/{bug}"' not in results


def test_hostile_text_is_shown_as_text(db: Path, q: Queue, client: httpx2.Client) -> None:
    number = new(q, HOSTILE_TITLE, description=HOSTILE_BODY)
    notes.comment(q, number, HOSTILE_BODY, author="someone")
    huge = new(q, "huge", description="word " * 13_000)
    blocking.block(
        q, huge, "<script>alert('reason')</script>", by=Authority.overriding("admin", who="admin")
    )
    with board_server(db) as url:
        pages = {
            "board": client.get(f"{url}/"),
            "issue": client.get(f"{url}/issues/{number}"),
            "huge": client.get(f"{url}/issues/{huge}"),
            "search": client.get(f"{url}/", params={"q": "script"}),
        }
    for name, page in pages.items():
        assert page.status_code == 200, name
        assert unsafe(page.text) == [], name
        assert "default-src 'self'" in page.headers["content-security-policy"]
    issue = pages["issue"].text
    assert "&lt;script&gt;alert(&#34;t&#34;)&lt;/script&gt;" in issue  # the title, as text
    assert '<a href="https://example.org/page" rel="noopener noreferrer nofollow">ok</a>' in issue
    assert "<strong>bold</strong>" in issue
    assert "<code>&lt;script&gt;</code>" in issue
    assert "&lt;script&gt;alert(&#39;reason&#39;)" in pages["board"].text
    assert pages["huge"].text.count("word") >= 13_000


def test_the_issue_view(db: Path, q: Queue, client: httpx2.Client) -> None:
    first, second, third = new(q, "first"), new(q, "second"), new(q, "third")
    dependencies.depend(q, blocker=first, blocked=second, actor="cli-test")
    dependencies.depend(q, blocker=second, blocked=third, actor="cli-test")
    notes.comment(q, second, "looked at it", author="cli-test")
    issues.update_issue(q, second, priority="high", actor="cli-test", by=ADMIN)
    with board_server(db) as url:
        page = client.get(f"{url}/issues/{second}").text
        missing = client.get(f"{url}/issues/999")
        nonsense = client.get(f"{url}/issues/abc")
    waits, blocks = page.split("Waits on:")[1].split("Blocks:")
    assert f'href="/issues/{first}">#{first} first (open)' in waits
    assert f'href="/issues/{third}">#{third} third (open)' in blocks
    assert "looked at it" in page
    for kind in ("created", "dependency_added", "commented", "updated"):
        assert f"<b>{kind}</b> by cli-test" in page
    assert missing.status_code == 404 and nonsense.status_code == 404


def test_agents_and_graph(db: Path, q: Queue, client: httpx2.Client) -> None:
    a, b, c = new(q, "base"), new(q, "middle"), new(q, "top")
    dependencies.depend(q, blocker=a, blocked=b)
    dependencies.depend(q, blocker=b, blocked=c)
    claims.claim(q, a, Authority.of({"run-7"}))
    worker = registered.register(q, "worker", "claude")
    idle = registered.register(q, "idle", "codex")
    held = new(q, "elsewhere")
    claims.claim(q, held, Authority.of({worker.agent_id}))
    # The lease says nothing of a registered agent's last heartbeat: it has its own.
    q.db.write(
        lambda conn: conn.execute(
            update(agents_t)
            .where(agents_t.c.id == worker.agent_id)
            .values(last_seen_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
        )
    )
    with board_server(db) as url:
        agents = client.get(f"{url}/agents").text
        graph = client.get(f"{url}/graph").text
    assert "<td>run-7</td>" in agents and f'href="/issues/{a}"' in agents
    row = agents[agents.index(f"<td>{worker.agent_id}</td>") :].split("</tr>")[0]
    assert "2026-01-02 03:04" in row and f'href="/issues/{held}"' in row
    assert f"<td>{idle.agent_id}</td>" in agents
    idle_row = agents[agents.index(f"<td>{idle.agent_id}</td>") :].split("</tr>")[0]
    assert "<td>none</td>" in idle_row
    boxes = re.findall(
        r'href="/issues/(\d+)"><g[^>]*>\s*<title>[^<]*</title>\s*<rect x="(\d+)"', graph
    )
    xs = {int(n): int(x) for n, x in boxes}
    assert xs[a] < xs[b] < xs[c]
    assert graph.count('class="edge"') == 2
    assert graph.count('<svg x="') == len(boxes)  # each label is clipped to its box


def test_without_a_token_only_loopback_host_names_are_served(
    db: Path, q: Queue, client: httpx2.Client
) -> None:
    with board_server(db) as url:
        rebound = client.get(f"{url}/", headers={"host": "attacker.example:80"})
        local = client.get(f"{url}/", headers={"host": "localhost"})
    assert rebound.status_code == 403
    assert local.status_code == 200


def test_with_a_token_every_page_needs_it(db: Path, q: Queue, client: httpx2.Client) -> None:
    new(q, "secret work")
    with board_server(db, "--token", "s3cret") as url:
        bare = client.get(f"{url}/")
        feed = client.get(f"{url}/events")
        bearer = client.get(f"{url}/", headers={"authorization": "Bearer s3cret"})
        wrong = client.post(f"{url}/login", data={"token": "nope"})
        right = client.post(f"{url}/login", data={"token": "s3cret"})
        cookie = right.cookies.get("workq_board")
        after = client.get(f"{url}/")  # the client keeps the cookie
    assert bare.status_code == 403 and "secret work" not in bare.text
    assert 'name="token"' in bare.text
    assert feed.status_code == 403
    assert bearer.status_code == 200 and "secret work" in bearer.text
    assert wrong.status_code == 403
    assert right.status_code == 303 and cookie == "s3cret"
    assert "httponly" in right.headers["set-cookie"].lower()
    assert "samesite=strict" in right.headers["set-cookie"].lower()
    assert after.status_code == 200


def test_a_public_bind_needs_a_token(db: Path) -> None:
    done = cli(db, "board", "--host", "0.0.0.0", check=False)
    assert done.returncode == 1
    assert "INVALID_INPUT" in done.stderr and "--token" in done.stderr


def test_a_bad_page_or_event_id_is_400_naming_it(db: Path, q: Queue, client: httpx2.Client) -> None:
    new(q, "one")
    with board_server(db) as url:
        for path, params, name in (
            ("/", {"page_ready": "\u00b2"}, "page_ready"),
            ("/columns", {"page_done": "\u00b2"}, "page_done"),
            ("/", {"page_ready": "9" * 5000}, "page_ready"),
            ("/", {"page_waiting": "-1"}, "page_waiting"),
            ("/events", {"after": "\u00b2"}, "after"),
            ("/events", {"after": "99999999999999999999999"}, "after"),
        ):
            answer = client.get(f"{url}{path}", params=params)
            assert answer.status_code == 400, (path, params)
            assert answer.text.startswith(f"{name} must be a whole number from 0 to")
        assert client.get(f"{url}/", params={"page_ready": "0"}).status_code == 200


def test_the_issue_page_offers_only_the_actions_that_apply(
    db: Path, q: Queue, client: httpx2.Client
) -> None:
    free = new(q, "nothing to undo")
    stuck = new(q, "stuck")
    blocking.block(q, stuck, "asks a question", by=Authority.overriding("admin", who="admin"))
    held = new(q, "held")
    claims.claim(q, held, Authority.of({"run-a"}))
    with board_server(db) as url:
        pages = {n: client.get(f"{url}/issues/{n}").text for n in (free, stuck, held)}
    assert 'data-action="unblock"' not in pages[free]
    assert 'data-action="release"' not in pages[free]
    assert 'data-action="unblock"' in pages[stuck]
    assert 'data-action="release"' in pages[held] and "lease: <time" in pages[held]
    assert "lease until" not in pages[held]


def test_history_reads_as_words_and_an_empty_description_says_so(
    db: Path, q: Queue, client: httpx2.Client
) -> None:
    number = new(q, "plain")
    issues.update_issue(q, number, title="renamed", actor="cli-test", by=ADMIN)
    with board_server(db) as url:
        page = client.get(f"{url}/issues/{number}").text
    history = page[page.index('<ol class="history">') :]
    history = history[: history.index("</ol>")]
    assert "was title=plain; now title=renamed" in history
    assert "{" not in history and "&#34;" not in history  # no JSON
    assert "description=" not in history  # an empty value is left out
    assert "No description." in page
    assert '<div class="description"></div>' not in page


def test_a_stalled_claim_shows_on_the_board(db: Path, q: Queue, client: httpx2.Client) -> None:
    from workq.services.queue import policies

    stuck, busy = new(q, "stuck"), new(q, "busy")
    policies.settle(q, "stall_after", "10m")
    claims.claim(q, stuck, Authority.of({"run-a"}))
    claims.claim(q, busy, Authority.of({"run-b"}))
    an_hour_ago = datetime.now(UTC) - timedelta(hours=1)
    with q.db.engine.begin() as conn:  # stuck was claimed an hour ago, and nothing since
        conn.execute(update(events).where(events.c.number == stuck).values(created_at=an_hour_ago))
        conn.execute(
            update(issues_t).where(issues_t.c.number == stuck).values(claimed_at=an_hour_ago)
        )
    with board_server(db) as url:
        board = client.get(f"{url}/").text
        agents_page = client.get(f"{url}/agents").text
        stuck_page = client.get(f"{url}/issues/{stuck}").text
        busy_page = client.get(f"{url}/issues/{busy}").text
    assert board.count("stalled since") == 1
    assert agents_page.count("stalled since") == 1
    assert "Stalled since" in stuck_page and "Stalled since" not in busy_page
