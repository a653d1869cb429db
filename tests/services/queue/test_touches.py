"""Touches: the path globs an issue declares, through the services, the CLI and MCP, and
the migration that stores them."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.conftest import ADMIN
from tests.server.conftest import call_error, call_ok, error_of
from tests.server.test_claim_faces import cli, cli_json
from tests.services.plans.conftest import serve
from workq.errors import InvalidInput
from workq.services.handle import Queue
from workq.services.queue import issues, listing


def test_touches_are_stored_shown_replaced_and_cleared(queue: Queue) -> None:
    made = issues.create(queue, title="auth", touches=["./src/auth/", "*.py", "*.py"])
    assert made.touches == ["src/auth", "*.py"]
    assert issues.get(queue, made.number).touches == ["src/auth", "*.py"]
    issues.update_issue(queue, made.number, touches=["docs/**"], by=ADMIN)
    assert issues.get(queue, made.number).touches == ["docs/**"]
    issues.update_issue(queue, made.number, title="auth again", by=ADMIN)
    assert issues.get(queue, made.number).touches == ["docs/**"]
    issues.update_issue(queue, made.number, touches=[], by=ADMIN)
    assert issues.get(queue, made.number).touches == []


@pytest.mark.parametrize("bad", ["/etc/passwd", "../up", "a/[bc]", "x" * 201])
def test_a_bad_glob_changes_nothing(queue: Queue, bad: str) -> None:
    made = issues.create(queue, title="t", touches=["src/**"])
    with pytest.raises(InvalidInput) as refused:
        issues.update_issue(
            queue,
            made.number,
            title="new",
            touches=["ok.py", bad],
            by=ADMIN,
        )
    assert refused.value.facts["field"] == "touches"
    after = issues.get(queue, made.number)
    assert (after.title, after.touches) == ("t", ["src/**"])
    with pytest.raises(InvalidInput):
        issues.create(queue, title="u", touches=[bad])
    assert [i.number for i in listing.list_issues(queue).items] == [made.number]


def test_cli_create_show_and_update_touches(tmp_path: Path) -> None:
    made = cli_json(tmp_path, "create", "auth", "--touch", "src/auth/**", "--touch", "*.py")
    assert made["touches"] == ["src/auth/**", "*.py"]
    shown = cli(tmp_path, "show", "1")
    assert shown.returncode == 0
    updated = cli_json(tmp_path, "update", "1", "--touch", "docs/**")
    assert updated["touches"] == ["docs/**"]
    cleared = cli_json(tmp_path, "update", "1", "--clear-touches")
    assert cleared["touches"] == []
    refused = cli(tmp_path, "update", "1", "--touch", "../x")
    assert refused.returncode != 0 and "leaves the repository" in refused.stderr


@pytest.mark.anyio
async def test_mcp_create_get_and_update_touches(tmp_path: Path) -> None:
    with anyio.fail_after(60):
        async with serve(tmp_path, "agent-1") as client:
            await call_ok(client, "issue_create", title="auth", touches=["src/auth/**"])
            got = (await call_ok(client, "issue_get", number=1)).structured_content
            assert got is not None and got["touches"] == ["src/auth/**"]
            await call_ok(client, "issue_update", number=1, touches=["a.py", "b.py"])
            got = (await call_ok(client, "issue_get", number=1)).structured_content
            assert got is not None and got["touches"] == ["a.py", "b.py"]
            refused = error_of(await call_error(client, "issue_update", number=1, touches=["/abs"]))
            assert refused["code"] == "INVALID_INPUT"
