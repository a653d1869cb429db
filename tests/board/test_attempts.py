"""The issue page lists the attempts at an issue (the hand-off): each claim's holder, when
it began, how it ended and the work it left saved, escaped."""

from __future__ import annotations

from pathlib import Path

import httpx2

from tests.board.conftest import board_server
from tests.board.html_check import unsafe
from tests.services.workspaces.gitrepo import commit, make_repo
from workq.domain.authority import Authority
from workq.services.handle import Queue
from workq.services.queue import claims, issues
from workq.services.workspaces import claiming, repositories

# A valid git branch name that is markup.
BRANCH = "fix/<img_onerror=alert(1)>"


def test_the_issue_page_lists_the_attempts(
    db: Path, q: Queue, client: httpx2.Client, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "app")
    repositories.add(q, "app", repo)
    number = issues.create(q, title="Hand me over").number
    repositories.assign(q, number, "app", by=Authority.of(()))
    taken = claiming.claim(q, number, Authority.of({"agent-a"}), worktree=True, branch=BRANCH)
    assert taken.worktree is not None
    path = Path(taken.worktree.path)
    commit(path, {"a.txt": "a\n"}, "Half of it")
    (path / "b.txt").write_text("b\n")
    claims.release(q, number, Authority.of({"agent-a"}), discard=True)
    claiming.claim(q, number, Authority.of({"agent-b"}))
    with board_server(db) as url:
        page = client.get(f"{url}/issues/{number}").text
    attempts = page[page.index('<ol class="attempts">') :]
    attempts = attempts[: attempts.index("</ol>")]
    items = attempts.split("<li>")[1:]
    assert len(items) == 2
    assert "<b>agent-a</b> claimed" in items[0] and "released" in items[0]
    assert "1 commit(s) on fix/&lt;img_onerror=alert(1)&gt;" in items[0]
    assert f"edits saved as refs/workq/saved/{number}/1" in items[0]
    assert "<b>agent-b</b> claimed" in items[1] and "holding" in items[1]
    assert "<img" not in attempts and unsafe(page) == []
    assert "work_saved" in page  # and the history has the event
