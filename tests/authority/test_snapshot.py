"""The matrix's snapshot sees every change a refused call must not make: a row of any
table (a run binding), a ref, a worktree, a file's bytes under a checkout (its size kept),
an uncommitted edit, a plan file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.authority import snapshot
from tests.authority.snapshot import git
from tests.conftest import migrated_sqlite
from tests.services.workspaces.gitrepo import make_repo
from workq.config import Settings
from workq.db import sqlite


def _bind(db: Path) -> None:
    conn = sqlite.connect(db)
    try:
        conn.execute(
            "INSERT INTO run_bindings (run_id, server, bound_at, expires_at) "
            "VALUES ('run-x', 'host:1:ab', '2026-01-01 00:00:00', '2026-01-01 00:10:00')"
        )
        conn.commit()
    finally:
        conn.close()


@pytest.mark.parametrize(
    "change",
    ["binding", "ref", "worktree", "same-size edit", "staged edit", "new file", "plan file"],
)
def test_a_snapshot_sees_every_change(change: str, tmp_path: Path, sqlite_template: Path) -> None:
    db = migrated_sqlite(sqlite_template, tmp_path / "queue.db")
    repo = make_repo(tmp_path / "app")
    work = tmp_path / "app" / ".worktrees" / "w1"
    git(repo, "worktree", "add", "-q", "-b", "feature/1", str(work))
    plans = tmp_path / "plans"
    plans.mkdir()
    (plans / "p.md").write_text("# Plan\n")
    settings = Settings(db_path=db)
    before = snapshot.take(settings, {"app": repo}, plans)
    changes: dict[str, Callable[[], object]] = {
        "binding": lambda: _bind(db),
        "ref": lambda: git(repo, "branch", "feature/2"),
        "worktree": lambda: git(repo, "worktree", "remove", str(work)),
        "same-size edit": lambda: (work / "README.md").write_text("HELLO\n"),
        "staged edit": lambda: (
            (work / "src" / "app.py").write_text("x = 2\n"),
            git(work, "add", "src/app.py"),
        ),
        "new file": lambda: (work / "notes.txt").write_text("not committed\n"),
        "plan file": lambda: (plans / "p.md").write_text("# Plan!\n"),
    }
    assert not before.differences(snapshot.take(settings, {"app": repo}, plans))
    changes[change]()
    assert before.differences(snapshot.take(settings, {"app": repo}, plans))
