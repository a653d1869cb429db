"""A caller is a caller (design.md section 10): a run id belongs to the caller that bound
it, a refused call binds nothing, and a face that changes claimed work asks the door.

Two servers on one file here are two in-process ``WorkqServer``s (each binds as a process
of its own would); the HTTP sessions are sessions of one real ``workq serve --http``."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.server.conftest import CALL_TIMEOUT, call_error, call_ok, error_of, make_server, text
from tests.server.test_http import _told_run_id, http_server
from tests.storage import dump

pytestmark = pytest.mark.anyio


async def test_another_session_naming_a_sessions_run_id_is_refused(db: Path) -> None:
    with http_server(db) as url, anyio.fail_after(60):
        async with (
            Client(url, mode="legacy", read_timeout_seconds=CALL_TIMEOUT) as a,
            Client(url, mode="legacy", read_timeout_seconds=CALL_TIMEOUT) as b,
        ):
            theirs = _told_run_id(a.instructions)
            await call_ok(a, "issue_create", title="a's")
            await call_ok(a, "issue_create", title="free")
            await call_ok(a, "issue_claim", number=1)
            before = dump(db)
            for tool, arguments in (
                ("issue_complete", {"number": 1}),
                ("issue_release", {"number": 1}),
                ("issue_heartbeat", {"number": 1}),
                ("issue_claim", {"number": 2}),
            ):
                refused = await call_error(b, tool, run_id=theirs, **arguments)
                assert error_of(refused)["code"] == "RUN_ID_IN_USE", text(refused)
            assert dump(db) == before
            assert text(await call_ok(a, "issue_complete", number=1)) == "Completed issue #1"


async def test_a_refused_call_binds_nothing(db: Path) -> None:
    first, second = make_server(db, run_id="server-1"), make_server(db, run_id="server-2")
    async with Client(first) as one, Client(second) as two:
        await call_ok(one, "issue_create", title="done already")
        await call_ok(one, "issue_create", title="open")
        await call_ok(one, "issue_claim", number=1)
        await call_ok(one, "issue_complete", number=1)
        refused = await call_error(one, "issue_claim", number=1, run_id="agent-7")
        assert error_of(refused)["code"] == "NOT_CLAIMABLE"
        # agent-7 was never bound to the first server: the second may claim under it.
        claimed = await call_ok(two, "issue_claim", number=2, run_id="agent-7")
        assert claimed.structured_content is not None
        assert claimed.structured_content["claimed_by"] == "agent-7"
        # ... and now it is the second server's: the first is refused acting under it.
        taken = await call_error(one, "issue_release", number=2, run_id="agent-7")
        assert error_of(taken)["code"] == "RUN_ID_IN_USE"


async def test_another_caller_cannot_delete_or_reshape_a_claim_but_may_edit_it(
    db: Path,
) -> None:
    first, second = make_server(db, run_id="server-1"), make_server(db, run_id="server-2")
    async with Client(first) as one, Client(second) as two:
        await call_ok(one, "issue_create", title="mine", touches=["src/a/**"])
        await call_ok(one, "issue_claim", number=1)
        before = dump(db)
        for tool, arguments in (
            ("issue_delete", {}),
            ("issue_update", {"touches": []}),
            ("issue_update", {"touches": ["src/b/**"]}),
        ):
            refused = await call_error(two, tool, number=1, **arguments)
            assert error_of(refused)["code"] == "NOT_HOLDER", text(refused)
            assert "held by server-1" in text(refused)
        assert dump(db) == before
        await call_ok(two, "issue_update", number=1, priority="high")  # triage: anyone
        await call_ok(one, "issue_update", number=1, touches=["src/b/**"])  # its holder
        listed = (await call_ok(one, "issue_reservations")).structured_content
        assert listed is not None and [r["glob"] for r in listed["items"]] == ["src/b/**"]


async def test_a_force_claim_records_who_forced_it(db: Path) -> None:
    first, second = make_server(db, run_id="server-1"), make_server(db, run_id="server-2")
    async with Client(first) as one, Client(second) as two:
        await call_ok(one, "issue_create", title="stuck")
        await call_ok(one, "issue_claim", number=1)
        await call_ok(
            two,
            "issue_force_claim",
            number=1,
            confirmation="I understand this may cause conflicts",
            run_id="agent-9",
        )
        history = (await call_ok(two, "issue_history", number=1)).structured_content
    assert history is not None
    forced = [e for e in history["events"] if e["kind"] == "force_claimed"]
    assert forced and forced[0]["after"]["forced_by"] == "server-2"
    assert forced[0]["before"]["claimed_by"] == "server-1"
