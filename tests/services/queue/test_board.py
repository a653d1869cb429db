"""services/queue/overview.py on every engine: the columns, the agents, the graph and the feed."""

from __future__ import annotations

from datetime import timedelta

from tests.conftest import FakeClock
from workq.domain.authority import Authority
from workq.schemas import BoardFilter, BoardView, IssueType
from workq.services.handle import Queue
from workq.services.queue import blocking, claims, dependencies, issues, overview


def _numbers(view: BoardView) -> dict[str, list[int]]:
    return {c.name: [card.number for card in c.cards] for c in view.columns}


def test_columns_agents_graph_and_changes(queue: Queue, clock: FakeClock) -> None:
    ready, held, waiting, blocked, done, expired = (
        issues.create(queue, title=f"issue {i}", issue_type="bug" if i % 2 else "task").number
        for i in range(6)
    )
    claims.claim(queue, held, Authority.of({"run-a"}))
    claims.claim(queue, expired, Authority.of({"run-gone"}))
    dependencies.depend(queue, blocker=ready, blocked=waiting)
    blocking.block(
        queue, blocked, "a person must decide", by=Authority.overriding("admin", who="admin")
    )
    claims.claim(queue, done, Authority.of({"run-b"}))
    claims.complete(queue, done, Authority.of(["run-b"]))
    clock.advance(45)
    claims.heartbeat(queue, held, Authority.of(["run-a"]))
    clock.advance(30)  # run-gone's lease (60 s) has run out, run-a's renewed one has not
    view = overview.view(queue)
    assert _numbers(view) == {
        "ready": [ready, expired],
        "in_progress": [held],
        "waiting": [waiting],
        "blocked": [blocked],
        "done": [done],
    }
    assert {c.name: c.count for c in view.columns} == {
        "ready": 2, "in_progress": 1, "waiting": 1, "blocked": 1, "done": 1,
    }  # fmt: skip
    [card] = view.columns[3].cards
    assert card.blocked_reason == "a person must decide" and card.since is not None
    assert view.columns[2].cards[0].waiting_on == [ready]
    bugs = overview.view(queue, BoardFilter(issue_type=IssueType.BUG))
    assert all(card.issue_type == IssueType.BUG for c in bugs.columns for card in c.cards)
    [agent] = [a for a in overview.agents(queue) if a.run_id == "run-a"]
    assert [c.number for c in agent.claims] == [held]
    assert agent.last_heartbeat == clock.now - timedelta(seconds=30)
    nodes, edges, more = overview.open_graph(queue)
    assert edges == [(ready, waiting)] and not more
    assert {n.number for n in nodes} == {ready, waiting}
    changes = overview.changes(queue, 0)
    assert changes[-1].id == overview.last_change(queue) == view.last_event
    assert (changes[-1].number, changes[-1].kind) == (done, "completed")
