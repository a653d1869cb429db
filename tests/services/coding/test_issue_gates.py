"""The ``coding`` toolset's issue_gates (a server built in this process, working in a real
repository): one gate by its name or number, or only the files the branch changes."""

from __future__ import annotations

from contextlib import chdir
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.server.conftest import call_error, call_ok, error_of, text
from tests.services.coding.gaterepo import commit, gated_repo
from workq.config import Settings
from workq.server.app import build_server
from workq.vcs import git

pytestmark = pytest.mark.anyio
LIMIT = 120


def _data(result: Any) -> dict[str, Any]:
    assert result.structured_content is not None
    data: dict[str, Any] = result.structured_content
    return data


def _ran(report: dict[str, Any]) -> dict[str, bool]:
    return {g["name"]: g["passed"] for g in report["gates"] if not g["skipped"]}


async def test_one_gate_or_only_the_changed_files(tmp_path: Path) -> None:
    # main already holds a lint finding the work did not make.
    repo = gated_repo(tmp_path / "app", app="x = 1  # BAD\n")
    settings = Settings(db_path=tmp_path / "q.db", toolsets="default,coding", run_id="dev")
    with chdir(repo), anyio.fail_after(LIMIT):
        async with Client(build_server(settings)) as client:
            await call_ok(client, "issue_create", title="Gated work")
            await call_ok(client, "issue_claim", number=1)

            nothing = await call_ok(client, "issue_gates", changed=True)
            assert _data(nothing)["gates"] == []
            assert "no file changed against main, so no gate ran" in text(nothing)

            git.switch_new(repo, "feature", "main")
            commit(repo, {"src/new.py": "y = 2\n"}, "feat: new")
            mine = await call_ok(client, "issue_gates", changed=True)
            # The lint of the changed file passes; the tests gate is not run.
            assert _ran(_data(mine)) == {"lint": True}
            assert "changed against main: src/new.py" in text(mine)
            assert _data(mine)["evidence"] == "none"

            (repo / "src" / "wip.py").write_text("z = 3  # BAD\n")
            wip = await call_ok(client, "issue_gates", changed=True)
            assert _ran(_data(wip)) == {"lint": False}
            found = [i["file"] for i in _data(wip)["gates"][0]["issues"]]
            assert found == ["src/wip.py"]
            (repo / "src" / "wip.py").unlink()

            tests = await call_ok(client, "issue_gates", gate="tests")
            assert _ran(_data(tests)) == {"tests": True}
            by_number = await call_ok(client, "issue_gates", gate=1)
            assert _ran(_data(by_number)) == {"lint": False}  # the whole checkout's lint
            both = await call_ok(client, "issue_gates", gate="tests", changed=True)
            assert _ran(_data(both)) == {"tests": True}  # named, so run

            unknown = await call_error(client, "issue_gates", gate="typecheck")
            assert error_of(unknown)["code"] == "INVALID_INPUT"
            assert "no gate 'typecheck' (gates: 1=lint, 2=tests)" in text(unknown)
            twice = await call_error(client, "issue_gates", files=["src/new.py"], changed=True)
            assert "give files or changed=true, not both" in text(twice)
