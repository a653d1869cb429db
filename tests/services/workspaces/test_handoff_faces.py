"""The hand-off through the faces: two real ``workq serve`` processes over stdio on one
queue (the second's claim answers with the briefing, in its text and its data), and the
CLI's claim."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import call_ok, stdio_server, text
from tests.services.workspaces.gitrepo import commit, make_repo
from tests.workq_cli import workq
from workq import config
from workq.config import Settings
from workq.domain.authority import Authority
from workq.services.queue import claims, issues, notes
from workq.services.runtime import open_queue
from workq.services.workspaces import claiming, repositories

# The servers run this tree's workq (the SDK starts them with a few variables only).
CODE = {"PYTHONPATH": str(Path(config.__file__).resolve().parents[1])}


def _data(result: Any) -> dict[str, Any]:
    assert result.structured_content is not None
    found: dict[str, Any] = result.structured_content
    return found


@pytest.mark.anyio
async def test_a_claim_over_stdio_answers_with_the_briefing(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "app")
    db = tmp_path / "q.db"
    q = open_queue(Settings(db_path=db))
    try:
        repositories.add(q, "app", repo)
    finally:
        q.db.dispose()
    tools = "default,workspaces,notes"
    async with stdio_server(db, "--toolsets", tools, "--run-id", "run-a", cwd=repo, env=CODE) as a:
        await call_ok(a, "issue_create", title="Parse input", repository="app")
        claimed = _data(await call_ok(a, "issue_claim", number=1, worktree=True))
        assert "briefing" not in claimed  # a first claim: none
        work = Path(claimed["worktree"]["path"])
        commit(work, {"src/parser.py": "def parse(): ...\n"}, "Add the parser")
        (work / "src" / "app.py").write_text("x = 2\n")
        await call_ok(a, "issue_comment", number=1, body="Tabs still break the lexer")
        await call_ok(a, "issue_release", number=1, reason="handing over", discard=True)
    # Another agent, on the default tools (no workspace fields in its schemas).
    async with stdio_server(db, "--run-id", "run-b", cwd=repo, env=CODE) as b:
        answer = await call_ok(b, "issue_claim_next")
        said = text(answer)
        brief = _data(answer)["briefing"]
    assert brief["previous_holder"] == "run-a" and brief["ended"] == "released"
    assert brief["reason"] == "handing over" and brief["commits"] == ["Add the parser"]
    assert brief["notes"][0]["body"] == "Tabs still break the lexer"
    assert brief["worktree"] == str(work) and brief["edits_ref"] == "refs/workq/saved/1/1"
    assert "Before you:" in said and "- Previous claim by run-a released" in said
    assert "1 commit(s) ahead: Add the parser" in said and "note by run-a: Tabs" in said
    assert (work / "src" / "app.py").read_text() == "x = 2\n"


def test_the_cli_claim_prints_the_briefing(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    q = open_queue(Settings(db_path=db))
    try:
        number = issues.create(q, title="Retry me").number
        claims.claim(q, number, Authority.of({"run-a"}))
        notes.comment(q, number, "The API answered 502 all afternoon", author="run-a")
        claims.release(q, number, Authority.of({"run-a"}), reason="API down")
        shown = workq("--db", db, "claim", str(number), "--run-id", "run-b")
        assert shown.returncode == 0, shown.stderr
        assert "Before you:" in shown.stdout
        assert "Previous claim by run-a released" in shown.stdout and "API down" in shown.stdout
        claims.release(q, number, Authority.of({"run-b"}))
        as_json = workq("--db", db, "claim", str(number), "--run-id", "run-c", "--json")
        assert as_json.returncode == 0, as_json.stderr
        brief = json.loads(as_json.stdout)["briefing"]
        assert brief["previous_holder"] == "run-b" and brief["ended"] == "released"
        assert brief["notes"][0]["body"] == "The API answered 502 all afternoon"
        first = issues.create(q, title="New").number
        plain = workq("--db", db, "claim", str(first), "--run-id", "run-a", "--json")
        assert "briefing" not in json.loads(plain.stdout)
        assert claiming.claim(q, first, Authority.of({"run-a"})).briefing is None
    finally:
        q.db.dispose()
