"""Helpers for the mirror's tests: a queue on a real SQLite file and a session on the fake."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.github_fake.server import ControlAPI, FakeGitHub, RemoteFakeGitHub
from workq.config import Settings
from workq.github.sync import PassResult, Session, connect, run_pass
from workq.github.worker import Options
from workq.services.handle import Queue
from workq.services.runtime import open_queue

REPO = "acme/widgets"
FAST = Options(write_interval=0.0, backoff_base=1.0, lease_seconds=30.0, poll_interval=0.05)
MARKER = re.compile(r"<!-- workq:id=([0-9a-f]{32}) -->")


def env_for(fake: FakeGitHub | RemoteFakeGitHub, url: str) -> dict[str, str]:
    return {"GITHUB_TOKEN": fake.token, "GITHUB_API_URL": url}


@dataclass
class Mirror:
    """A queue, the fake GitHub, and a connected sync session."""

    q: Queue
    fake: FakeGitHub
    session: Session

    def sync(self, *, with_import: bool = False) -> PassResult:
        return run_pass(self.session, with_import=with_import)

    def writes(self) -> list[Any]:
        return self.fake.writes()

    def gh_issues(self) -> list[dict[str, Any]]:
        return self.fake.issues()

    def gh_issue_of(self, number: int) -> dict[str, Any]:
        from workq.services.sync.mirror import github_link

        link = github_link(self.q, number)
        assert link is not None, f"#{number} is not linked"
        return self.fake.issue(link.gh_number)


def open_file_queue(path: Path) -> Queue:
    return open_queue(Settings(db_path=path, lease_seconds=600), migrate=True)


@contextmanager
def mirrored(
    tmp_path: Path, fake: FakeGitHub, *, options: Options = FAST, timeout: float = 1.0
) -> Iterator[Mirror]:
    q = open_file_queue(tmp_path / "queue.db")
    session = connect(q, REPO, env=env_for(fake, fake.url), options=options, timeout=timeout)
    try:
        yield Mirror(q=q, fake=fake, session=session)
    finally:
        session.close()
        q.db.dispose()


def labels_of(gh_issue: dict[str, Any]) -> set[str]:
    return {label["name"] for label in gh_issue["labels"]}


def markers(fake: ControlAPI) -> list[str]:
    """The local ids in the bodies of the repository's issues (one per issue)."""
    found = []
    for issue in fake.issues():
        match = MARKER.search(issue.get("body") or "")
        if match:
            found.append(match.group(1))
    return found
