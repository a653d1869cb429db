"""An issue goes into a repository where it is made or changed: issue_create, issue_update,
create_issue, `workq create --repo` and `workq update --repo`; a name no repository has is
refused with nothing written. `explain` says which issues a repository filter leaves out."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from tests.conftest import ADMIN, migrated_sqlite
from tests.server.conftest import call_error, call_ok, error_of, make_server, text
from tests.server.test_claim_faces import cli, cli_json
from tests.services.workspaces.gitrepo import make_repo
from workq.config import Settings
from workq.errors import NotFound
from workq.schemas import IssueType, ReadyFilter
from workq.services.handle import Queue
from workq.services.queue import issues, listing, notes, ready_queue
from workq.services.runtime import open_queue
from workq.services.workspaces import repositories, worktrees


def _events(queue: Queue, number: int) -> list[str]:
    return [e.kind for e in notes.history(queue, number)]


def test_the_service_places_an_issue_where_it_is_made_or_changed(
    queue: Queue, tmp_path: Path
) -> None:
    repositories.add(queue, "app", make_repo(tmp_path / "app"))
    repositories.add(queue, "lib", make_repo(tmp_path / "lib"))
    made = issues.create(queue, title="in app", repository="app", actor="lead")
    assert issues.get(queue, made.number).repository == "app"
    assert _events(queue, made.number) == ["created", "repository_set"]
    issues.update_issue(
        queue,
        made.number,
        repository="lib",
        actor="lead",
        by=ADMIN,
    )
    assert issues.get(queue, made.number).repository == "lib"
    with pytest.raises(NotFound, match="repository 'nowhere' is not registered"):
        issues.create(queue, title="lost", repository="nowhere")
    with pytest.raises(NotFound, match="repository 'nowhere' is not registered"):
        issues.update_issue(
            queue,
            made.number,
            title="renamed",
            repository="nowhere",
            by=ADMIN,
        )
    # Refused: nothing made, nothing changed.
    assert [i.number for i in listing.list_issues(queue).items] == [made.number]
    assert issues.get(queue, made.number).title == "in app"
    assert issues.get(queue, made.number).repository == "lib"


def test_explain_names_the_issues_a_repository_filter_leaves_out(
    queue: Queue, tmp_path: Path
) -> None:
    repositories.add(queue, "app", make_repo(tmp_path / "app"))
    repositories.add(queue, "lib", make_repo(tmp_path / "lib"))
    issues.create(queue, title="nowhere")  # 1
    issues.create(queue, title="lib work", repository="lib")  # 2
    issues.create(queue, title="app work", repository="app", issue_type="docs")  # 3
    wanted = ReadyFilter(repository="app")
    assert [r.number for r in ready_queue.ready(queue, wanted)] == [3]
    why = {n.number: n.reasons for n in ready_queue.explain(queue, wanted)}
    assert why == {1: ["in no repository, not app"], 2: ["in repository lib, not app"]}
    why = {n.number: n.reasons for n in ready_queue.explain(queue, ReadyFilter(agent="codex"))}
    assert why[1] == ["for agent claude, not codex"]
    typed = ReadyFilter(repository="app", exclude_types=[IssueType.DOCS])
    assert ready_queue.explain(queue, typed)[-1].reasons == ["of type docs, not asked for"]
    labelled = {n.number: n.reasons for n in ready_queue.explain(queue, ReadyFilter(labels=["x"]))}
    assert labelled[3] == ["without label x"]
    # Without a filter nothing is left out by one.
    assert ready_queue.explain(queue) == []


@pytest.mark.anyio
async def test_the_tools_take_a_repository(tmp_path: Path, sqlite_template: Path) -> None:
    db = migrated_sqlite(sqlite_template, tmp_path / "queue.db")
    queue = open_queue(Settings(db_path=db))
    try:
        repositories.add(queue, "mit", make_repo(tmp_path / "mit"))
    finally:
        queue.db.dispose()
    async with Client(make_server(db, "default,agit,priority", tests_gate="trust")) as client:
        await call_ok(client, "issue_create", title="one", repository="mit")
        await call_ok(client, "issue_create", title="two")
        await call_ok(client, "issue_update", number=2, repository="mit")
        created = await call_ok(
            client, "create_issue", title="three", priority="high", type="bug", repository="mit"
        )
        assert created.structured_content is not None
        assert created.structured_content["issue"]["number"] == 3
        # Seed 000's 'owner/repo' names a GitHub repository, not one of the queue's.
        await call_ok(
            client, "create_issue", title="four", priority="low", type="chore", repository="o/r"
        )
        refused = await call_error(client, "issue_create", title="five", repository="nowhere")
        assert error_of(refused)["code"] == "NOT_FOUND"
        assert "repository 'nowhere' is not registered" in text(refused)
        refused = await call_error(client, "issue_update", number=4, repository="nowhere")
        assert error_of(refused)["code"] == "NOT_FOUND"
        ready = await call_ok(client, "issue_ready", repository="mit", explain=True)
        assert ready.structured_content is not None
        assert ready.structured_content["issue"]["number"] == 3  # high before medium
        assert "#4 four: in no repository, not mit" in text(ready)
        claimed = await call_ok(
            client, "issue_claim_next", repository="mit", worktree=True, run_id="agent-1"
        )
        assert claimed.structured_content is not None
        assert claimed.structured_content["number"] == 3
        assert claimed.structured_content["worktree"] is not None
    queue = open_queue(Settings(db_path=db))
    try:
        placed = {
            i.number: issues.get(queue, i.number).repository
            for i in listing.list_issues(queue).items
        }
    finally:
        queue.db.dispose()
    assert placed == {1: "mit", 2: "mit", 3: "mit", 4: None}


def test_the_cli_takes_a_repository(tmp_path: Path) -> None:
    make_repo(tmp_path / "app")
    assert cli(tmp_path, "repo", "add", "app", str(tmp_path / "app")).returncode == 0
    assert cli_json(tmp_path, "create", "first", "--repo", "app")["repository"] == "app"
    cli_json(tmp_path, "create", "second")
    assert cli_json(tmp_path, "update", "2", "--repo", "app")["repository"] == "app"
    refused = cli(tmp_path, "create", "third", "--repo", "nowhere")
    assert refused.returncode != 0
    assert "repository 'nowhere' is not registered" in refused.stderr
    assert [i["number"] for i in cli_json(tmp_path, "list")["items"]] == [1, 2]
    cli_json(tmp_path, "create", "loose")
    shown = cli_json(tmp_path, "ready", "--repo", "app", "--explain")
    assert [i["number"] for i in shown["ready"]] == [1, 2]
    assert shown["not_ready"] == [
        {"number": 3, "title": "loose", "reasons": ["in no repository, not app"]}
    ]


@pytest.mark.anyio
async def test_a_worktree_per_claim_on_every_claim_path(
    tmp_path: Path, sqlite_template: Path
) -> None:
    """A repository registered with a worktree per claim gets one whichever face claims:
    the default toolset's issue_claim and issue_claim_next, select_next_issue, the CLI."""
    db = migrated_sqlite(sqlite_template, tmp_path / "queue.db")
    queue = open_queue(Settings(db_path=db))
    try:
        repositories.add(queue, "app", make_repo(tmp_path / "app"), auto_worktree=True)
        for n in range(1, 6):
            issues.create(queue, title=f"piece {n}", repository="app", issue_type="bug")
        issues.create(queue, title="not in a repository", priority="low")  # 6
    finally:
        queue.db.dispose()
    async with Client(make_server(db, "default,priority")) as client:
        claimed = await call_ok(client, "issue_claim", number=1, run_id="agent-1")
        assert "worktree: " in text(claimed)
        nxt = await call_ok(client, "issue_claim_next", run_id="agent-2")
        assert nxt.structured_content is not None
        assert nxt.structured_content["number"] == 2
        assert "worktree: " in text(nxt)
        await call_ok(client, "select_next_issue")
    shown = cli(tmp_path, "claim", "4", "--run-id", "agent-4")
    assert shown.returncode == 0, shown.stderr
    assert cli_json(tmp_path, "claim-next", "--run-id", "agent-5")["number"] == 5
    plain = cli_json(tmp_path, "claim-next", "--run-id", "agent-6")
    assert plain["number"] == 6 and "worktree" not in plain
    queue = open_queue(Settings(db_path=db))
    try:
        made = {n: worktrees.get_for_issue(queue, n) for n in range(1, 7)}
    finally:
        queue.db.dispose()
    assert made.pop(6) is None
    paths = [Path(info.path) for info in made.values() if info is not None]
    assert len(paths) == 5 and all(path.is_dir() for path in paths), made
