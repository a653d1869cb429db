"""Why an issue is not ready: blocked, waiting on #N, claimed by X until T, paths reserved
by Y; through the service, `workq ready --explain` and issue_ready(explain=true)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.server.conftest import call_ok, text
from tests.server.test_claim_faces import cli, cli_json
from tests.services.plans.conftest import serve
from workq.domain.authority import Authority
from workq.services.handle import Queue
from workq.services.queue import blocking, claims, dependencies, issues, ready_queue


def _scene(queue: Queue) -> None:
    issues.create(queue, title="first")  # 1
    issues.create(queue, title="after first")  # 2: waits on 1
    dependencies.depend(queue, blocker=1, blocked=2)
    issues.create(queue, title="stuck")  # 3: blocked
    blocking.block(queue, 3, "needs a decision", by=Authority.overriding("admin", who="admin"))
    issues.create(queue, title="auth", touches=["src/auth/**"])  # 4: claimed by run-a
    claims.claim(queue, 4, Authority.of({"run-a"}))
    issues.create(queue, title="login", touches=["src/auth/login.py"])  # 5: paths reserved


def test_explain_names_every_reason(queue: Queue) -> None:
    _scene(queue)
    why = {n.number: n.reasons for n in ready_queue.explain(queue, holder="run-b")}
    assert why[2] == ["waiting on #1"]
    assert why[3] == ["blocked: needs a decision"]
    assert why[4][0].startswith("claimed by run-a until ")
    assert why[5][0].startswith("paths reserved by src/auth/** by run-a (#4, exclusive")
    assert 1 not in why
    # The holder's own reservations do not hold it back.
    assert 5 not in {n.number for n in ready_queue.explain(queue, holder="run-a")}


def test_cli_ready_explain(tmp_path: Path) -> None:
    cli_json(tmp_path, "create", "auth", "--touch", "src/**")
    cli_json(tmp_path, "create", "login", "--touch", "src/login.py")
    cli_json(tmp_path, "claim", "1", "--run-id", "run-a")
    shown = cli_json(tmp_path, "ready", "--explain", "--run-id", "run-b")
    assert shown["ready"] == []
    reasons = {n["number"]: n["reasons"] for n in shown["not_ready"]}
    assert reasons[1][0].startswith("claimed by run-a")
    assert reasons[2][0].startswith("paths reserved by src/** by run-a (#1")
    plain = cli(tmp_path, "ready", "--explain")
    assert plain.returncode == 0


@pytest.mark.anyio
async def test_issue_ready_explain(tmp_path: Path) -> None:
    with anyio.fail_after(60):
        async with serve(tmp_path, "agent-b") as client:
            await call_ok(client, "issue_create", title="auth", touches=["src/**"])
            await call_ok(client, "issue_create", title="login", touches=["src/login.py"])
            cli_json(tmp_path, "claim", "1", "--run-id", "agent-a")
            result = await call_ok(client, "issue_ready", explain=True)
            assert result.structured_content is not None
            assert result.structured_content["issue"] is None
            reasons = {n["number"]: n["reasons"] for n in result.structured_content["not_ready"]}
            assert reasons[2][0].startswith("paths reserved by src/** by agent-a")
            assert "Not ready:" in text(result)
            plain = await call_ok(client, "issue_ready")
            assert plain.structured_content == {"issue": None}
