"""The conflict scan: files that two or more active worktrees of a repository change
against their base (commits, staged and unstaged changes, untracked files). One diff per
worktree, run in parallel."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sqlalchemy import select

from workq.db.engine import retry_lost_read
from workq.db.tables import worktrees
from workq.schemas import ConflictReport, FileConflict
from workq.services.handle import Queue
from workq.services.workspaces.repositories import row as repository_row
from workq.vcs import git

WORKERS = 8


@retry_lost_read
def _active(q: Queue, repo: str) -> list[tuple[str, int | None, str, str]]:
    with q.db.read() as conn:
        repository_row(conn, repo)
        rows = conn.execute(
            select(worktrees.c.id, worktrees.c.number, worktrees.c.path, worktrees.c.base_commit)
            .where(worktrees.c.repository == repo, worktrees.c.state.in_(("active", "merging")))
            .order_by(worktrees.c.created_at)
        ).all()
    return [(r.id, r.number, r.path, r.base_commit) for r in rows]


def scan(q: Queue, repo: str) -> ConflictReport:
    active = [a for a in _active(q, repo) if Path(a[2]).is_dir()]

    def changed(item: tuple[str, int | None, str, str]) -> list[str]:
        return git.changed_files(Path(item[2]), item[3])

    with ThreadPoolExecutor(max_workers=min(WORKERS, max(1, len(active)))) as pool:
        results = list(pool.map(changed, active))
    touched: dict[str, list[int]] = {}
    for index, files in enumerate(results):
        for name in files:
            touched.setdefault(name, []).append(index)
    conflicts = [
        FileConflict(
            file=name,
            worktrees=[active[i][0] for i in where],
            issues=[n for i in where if (n := active[i][1]) is not None],
        )
        for name, where in sorted(touched.items())
        if len(where) > 1
    ]
    return ConflictReport(conflicts=conflicts, scanned_worktrees=len(active))
