"""0015_landings: upgrading a database with a registered repository keeps it, landing
locally (the old behaviour); the landing queue works afterwards; downgrading drops only the
new table and columns."""

from __future__ import annotations

import subprocess
from pathlib import Path

from sqlalchemy import inspect, text

from tests.db import upgrades
from tests.services.workspaces.gitrepo import make_repo
from workq.config import Settings
from workq.db import migrate
from workq.domain.authority import Authority
from workq.services.handle import Queue
from workq.services.queue import claims
from workq.services.runtime import open_database
from workq.services.workspaces import landings, repositories

REVISION = "0015_landings"
REPOSITORY = (
    "INSERT INTO repositories (name, path, default_branch, worktree_dir, auto_worktree,"
    " merge_mode, created_at) VALUES ('app', :path, 'main', :folder, false, 'squash', :now)"
)


def test_upgrade_to_landings_with_data(settings: Settings, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "app")
    db = open_database(settings)
    try:
        previous = upgrades.before(db, REVISION, "in the repository")
        with db.engine.begin() as conn:
            conn.execute(
                text(REPOSITORY),
                {"path": str(repo), "folder": str(repo / ".worktrees"), "now": upgrades.MADE_AT},
            )
            conn.execute(text("UPDATE issues SET repository = 'app' WHERE number = 1"))

        migrate.upgrade(db, "head")
        queue = Queue(db=db, lease_seconds=60)
        kept = repositories.get(queue, "app")
        assert (kept.merge_mode, kept.land, kept.on_refused, kept.update_branch) == (
            "squash",
            "local",
            "return",
            True,
        )
        repositories.configure(queue, "app", land="pr", github_repo="acme/app")
        claims.claim(queue, 1, Authority.of({"agent-a"}))
        tip = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True
        ).stdout.strip()
        queued = landings.queue(
            queue,
            1,
            repo="app",
            branch="1-work",
            worktree_id=None,
            tip=tip,
            by=Authority.of(["agent-a"]),
            actor=None,
        )
        assert queued.state == "queued"
        assert [d.number for d in landings.due(queue, "ACME/app")] == [1]

        migrate.downgrade(db, previous)
        assert "landings" not in inspect(db.engine).get_table_names()
        columns = {c["name"] for c in inspect(db.engine).get_columns("repositories")}
        assert "land" not in columns and "merge_mode" in columns
        with db.engine.connect() as conn:
            row = conn.execute(text("SELECT title, repository FROM issues WHERE number = 1")).one()
        assert tuple(row) == ("in the repository", "app")
    finally:
        db.dispose()
