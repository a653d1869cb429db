"""Plan files belong to their database: under ``plans/`` in the database's own folder, not
the folder the client started the server in, so a second database used from the same
folder never finds the first one's plan; ``workq plan relocate`` brings the files earlier
releases left in a client's folder home."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.server.conftest import call_ok, text
from tests.services.plans.conftest import serve
from tests.workq_cli import data, ok

pytestmark = pytest.mark.anyio


async def test_a_servers_plans_go_beside_its_database_not_into_the_clients_folder(
    tmp_path: Path,
) -> None:
    client_folder = tmp_path / "client"
    first, second = tmp_path / "first", tmp_path / "second"
    for folder in (client_folder, first, second):
        folder.mkdir()
    with anyio.fail_after(120):
        async with serve(client_folder, "r1", db=str(first / "q.db")) as client:
            got = await call_ok(client, "enter_plan_mode", slug="shared-name", goal="first's")
            assert "already existed" not in text(got)
        async with serve(client_folder, "r2", db=str(second / "q.db")) as client:
            again = await call_ok(client, "enter_plan_mode", slug="shared-name", goal="second's")
            assert "already existed" not in text(again)  # not the first one's, "kept"
    assert "first's" in (first / "plans" / "shared-name.md").read_text()
    assert "second's" in (second / "plans" / "shared-name.md").read_text()
    assert not (client_folder / "plans").exists()


def test_relocate_copies_old_plan_files_home_and_the_plans_follow(tmp_path: Path) -> None:
    db = tmp_path / "db" / "q.db"
    db.parent.mkdir()
    old = tmp_path / "old-client-folder"
    # As an earlier release did: the plan file under the client's folder.
    ok(
        "--db",
        db,
        "plan",
        "enter",
        "legacy",
        "Old plan",
        "--run-id",
        "r",
        env={"WORKQ_PLANS_DIR": str(old)},
    )
    (old / "legacy.md").write_text((old / "legacy.md").read_text() + "\nmy notes\n")
    moved = data("--db", db, "plan", "relocate")
    assert moved == [
        {
            "slug": "legacy",
            "old": str(old / "legacy.md"),
            "new": str(db.parent / "plans" / "legacy.md"),
            "why": "copied",
        }
    ]
    assert "my notes" in (db.parent / "plans" / "legacy.md").read_text()
    assert (old / "legacy.md").exists()  # copied, never moved: it may be another's too
    shown = data("--db", db, "plan", "show", "legacy")
    assert shown["plan"]["path"] == str(db.parent / "plans" / "legacy.md")
    assert data("--db", db, "plan", "relocate") == []
