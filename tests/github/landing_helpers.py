"""A repository that lands through pull requests on the fake GitHub: a bare ``origin`` on
disk (which the fake serves) and its clone, registered with ``land="pr"``; issues claimed
in worktrees of their own, with commits, queued to land."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.github.mirror_helpers import FAST, REPO, env_for
from tests.github.tools_helpers import clone_with_remote, git
from tests.github_fake.server import PROJECT_ROOT, FakeGitHub
from workq.config import Settings
from workq.domain.authority import Authority
from workq.github.landing import LandOptions, LandReport
from workq.github.sync import Session, connect
from workq.schemas import LandingStatus
from workq.services.handle import Queue
from workq.services.queue import claims, issues
from workq.services.runtime import open_queue
from workq.services.workspaces import merges, repositories, worktrees

AGENT = "run-a"


@dataclass
class Origin:
    """Queue ``q`` whose repository ``app`` (checkout ``work``, origin ``bare``) lands
    through pull requests on the fake."""

    q: Queue
    work: Path
    bare: Path

    def issue(self, title: str, path: str, text: str, *, run_id: str = AGENT) -> int:
        """An issue of ``app`` claimed by ``run_id`` in its own worktree, with one commit
        writing ``text`` to ``path``."""
        number = issues.create(self.q, title=title, repository="app").number
        claims.claim(self.q, number, Authority.of({run_id}))
        worktrees.spawn(self.q, "app", number, by=Authority.of({run_id}))
        self.commit(number, path, text)
        return number

    def commit(self, number: int, path: str, text: str) -> str:
        info = worktrees.get_for_issue(self.q, number)
        assert info is not None
        where = Path(info.path)
        (where / path).write_text(text)
        git(where, "add", path)
        git(where, "commit", "-q", "-m", f"#{number}: {path}")
        return git(where, "rev-parse", "HEAD")

    def land(self, number: int, *, run_id: str = AGENT) -> LandingStatus:
        done = merges.merge_issue(self.q, number, by=Authority.of([run_id]))
        assert done.merged is False and done.landing is not None
        return done.landing

    def main_files(self) -> list[str]:
        return git(self.bare, "ls-tree", "--name-only", "main").split()


def bare_and_clone(root: Path) -> tuple[Path, Path]:
    """A bare ``root/remote.git`` whose main has one commit, pushed from its clone
    ``root/work``."""
    bare = root / "remote.git"
    git(root, "init", "-q", "--bare", "-b", "main", str(bare))
    work = clone_with_remote(root, str(bare))
    git(work, "push", "-q", "origin", "main")
    return bare, work


def make_origin(root: Path, fake: FakeGitHub) -> Origin:
    """A bare repository with ``main`` (protected on the fake) and a clone of it, registered
    as ``app`` in a new queue at ``root/queue.db`` (the tests gate trusted)."""
    bare, work = bare_and_clone(root)
    fake.set_git_dir(str(bare))
    fake.protect_branch("main")
    settings = Settings(db_path=root / "queue.db", lease_seconds=600, tests_gate="trust")
    q = open_queue(settings, migrate=True)
    repositories.add(q, "app", work, land="pr", github_repo=REPO)
    return Origin(q=q, work=work, bare=bare)


def sync_worker(db: Path, fake: FakeGitHub, *args: str) -> subprocess.Popen[bytes]:
    """The real ``workq sync github --repo REPO ARGS`` on ``db`` against the fake, in a
    process group of its own (its git children die with it); stderr to ``worker.log``."""
    env = {
        **os.environ,
        "GITHUB_TOKEN": fake.token,
        "GITHUB_API_URL": fake.url,
        "WORKQ_GITHUB_PACE": "0",
        "PYTHONPATH": str(PROJECT_ROOT / "src"),
    }
    argv = [sys.executable, "-m", "workq.cli.main", "--db", str(db), "sync", "github"]
    with (db.parent / "worker.log").open("a") as log:
        return subprocess.Popen(
            [*argv, "--repo", REPO, *args],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
        )


def worker_log(db: Path) -> str:
    return (db.parent / "worker.log").read_text()


class Landing(Origin):
    """An ``Origin`` with a sync session whose passes move its landings."""

    def __init__(self, origin: Origin, fake: FakeGitHub, session: Session) -> None:
        super().__init__(q=origin.q, work=origin.work, bare=origin.bare)
        self.fake = fake
        self.session = session

    def land_pass(self) -> LandReport:
        return self.session.lander.run_pass()


@contextmanager
def landing_on(root: Path, fake: FakeGitHub) -> Iterator[Landing]:
    """``make_origin`` at ``root`` with a sync session on ``fake`` that moves its landings
    without waiting between steps."""
    origin = make_origin(root, fake)
    session = connect(origin.q, REPO, env=env_for(fake, fake.url), options=FAST)
    session.lander.options = LandOptions(check_interval=0.0, backoff_base=0.0)
    try:
        yield Landing(origin, fake, session)
    finally:
        session.close()
        origin.q.db.dispose()
