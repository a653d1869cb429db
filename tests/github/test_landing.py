"""Landing through pull requests, against the fake GitHub whose repository is a real bare git
repository on disk with a protected ``main`` (a direct push is refused): the merge queue
queues the branch and answers at once, and the sync worker's passes push it, open (or find)
its one pull request, wait for its checks, merge it through the REST API, then complete the
issue and remove its worktree and branch. Refusals (a failing check, a conflict, another
agent asking) change nothing they should not; a 502 after the create opens no second pull
request; a lost merge answer merges once."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from mcp import Client

from tests.board.conftest import board_server
from tests.github.landing_helpers import AGENT, Origin, make_origin
from tests.github.mirror_helpers import FAST, REPO, env_for
from tests.github.tools_helpers import git
from tests.github.tools_helpers import workq as workq_on_fake
from tests.github_fake.server import FakeGitHub
from tests.server.conftest import call_ok, make_server
from tests.services.workspaces.gitrepo import make_repo
from tests.workq_cli import workq
from workq.domain.authority import Authority
from workq.errors import NothingToMerge, NotHolder, WorktreeDirty
from workq.github.failures import AuthFailed
from workq.github.landing import LandOptions, LandReport
from workq.github.sync import Session, connect
from workq.schemas import Status
from workq.services.queue import claims, issues, notes
from workq.services.sync import pulls
from workq.services.workspaces import gitflow, landings, merges, repositories, to_main, worktrees

QUICK = LandOptions(check_interval=0.0, backoff_base=0.0)


class Landing(Origin):
    """An ``Origin`` with a sync session whose passes move its landings."""

    def __init__(self, origin: Origin, fake: FakeGitHub, session: Session) -> None:
        super().__init__(q=origin.q, work=origin.work, bare=origin.bare)
        self.fake = fake
        self.session = session

    def land_pass(self) -> LandReport:
        return self.session.lander.run_pass()


@pytest.fixture
def landing(tmp_path: Path, fake_github: FakeGitHub) -> Iterator[Landing]:
    origin = make_origin(tmp_path, fake_github)
    session = connect(origin.q, REPO, env=env_for(fake_github, fake_github.url), options=FAST)
    session.lander.options = QUICK
    try:
        yield Landing(origin, fake_github, session)
    finally:
        session.close()
        origin.q.db.dispose()


def test_a_direct_push_to_the_protected_branch_is_refused(landing: Landing) -> None:
    (landing.work / "README").write_text("pushed straight to main\n")
    git(landing.work, "commit", "-q", "-am", "straight")
    with pytest.raises(subprocess.CalledProcessError) as refused:
        git(landing.work, "push", "origin", "main")
    assert "GH006: Protected branch update failed for refs/heads/main" in refused.value.stderr


def test_landing_answers_at_once_then_the_worker_merges_completes_and_cleans(
    landing: Landing,
) -> None:
    number = landing.issue("Add a feature", "feature.py", "x = 1\n")
    info = worktrees.get_for_issue(landing.q, number)
    assert info is not None
    tip = git(Path(info.path), "rev-parse", "HEAD")

    queued = landing.land(number)
    assert (queued.state, queued.head_sha, queued.pr_number) == ("queued", tip, None)
    assert landing.fake.pulls() == []  # nothing pushed or opened yet: the agent is free
    assert issues.get(landing.q, number).status == Status.IN_PROGRESS

    report = landing.land_pass()
    assert report.landed == [number]
    (pull,) = landing.fake.pulls()
    assert pull["merged"] and pull["head"]["ref"] == info.branch
    assert f"workq issue #{number}: Add a feature" in pull["body"]
    assert "feature.py" in landing.main_files()

    done = landings.require(landing.q, number)
    assert (done.state, done.pr_number) == ("landed", pull["number"])
    assert done.merge_sha == git(landing.bare, "rev-parse", "main")
    assert issues.get(landing.q, number).status == Status.DONE
    assert not Path(info.path).exists()
    assert git(landing.work, "branch", "--list", info.branch) == ""
    link = pulls.of_issue(landing.q, number)
    assert link is not None and link.merged_at is not None
    # The checkout fetched what landed.
    assert git(landing.work, "rev-parse", "refs/remotes/origin/main") == done.merge_sha
    kinds = [e.kind for e in notes.history(landing.q, number)]
    assert kinds.count("completed") == 1 and kinds.count("worktree_merged") == 1

    again = landing.land_pass()
    assert again == LandReport()  # nothing left to move
    rerun = merges.merge_issue(landing.q, number, by=Authority.of([AGENT]))
    assert rerun.already_merged and rerun.commit == done.merge_sha


def test_only_the_holder_lands_and_a_refusal_changes_nothing(landing: Landing) -> None:
    number = landing.issue("Mine", "mine.py", "a = 1\n")
    with pytest.raises(NotHolder):
        merges.merge_issue(landing.q, number, by=Authority.of(["run-b"]))
    assert landings.get(landing.q, number) is None
    info = worktrees.get_for_issue(landing.q, number)
    assert info is not None
    (Path(info.path) / "mine.py").write_text("a = 2\n")  # uncommitted
    with pytest.raises(WorktreeDirty):
        landing.land(number)
    assert landings.get(landing.q, number) is None
    assert landing.land_pass() == LandReport()
    assert landing.fake.pulls() == []


def test_a_failing_check_returns_it_to_its_holder_and_a_new_commit_lands(
    landing: Landing,
) -> None:
    landing.fake.protect_branch("main", required_checks=["ci"])
    number = landing.issue("Fix the bug", "bug.py", "broken = True\n")
    landing.land(number)
    first = landing.land_pass()
    assert first.waiting == 1 and first.landed == []
    (pull,) = landing.fake.pulls()
    head = pull["head"]["sha"]
    status = landings.require(landing.q, number)
    assert status.state == "open" and "waiting" in (status.detail or "")

    landing.fake.add_check_run(head, "ci", conclusion="failure")
    assert landing.land_pass().refused == [number]
    status = landings.require(landing.q, number)
    assert status.state == "refused" and "check ci failed" in (status.detail or "")
    issue = issues.get(landing.q, number)
    assert issue.status == Status.IN_PROGRESS and issue.claimed_by == AGENT
    said = [c.body for c in notes.comments(landing.q, number)]
    assert any("Landing refused: check ci failed" in body for body in said)
    assert not landing.fake.pulls()[0]["merged"]

    fixed = landing.commit(number, "bug.py", "broken = False\n")
    assert landing.land(number).state == "queued"
    assert landing.land_pass().waiting == 1
    (pull,) = landing.fake.pulls()  # the same pull request, with the new head
    assert pull["head"]["sha"] == fixed
    landing.fake.add_check_run(fixed, "ci", conclusion="success")
    assert landing.land_pass().landed == [number]
    assert issues.get(landing.q, number).status == Status.DONE
    assert git(landing.bare, "show", "main:bug.py") == "broken = False"


def test_a_502_after_the_create_opens_no_second_pull_request(landing: Landing) -> None:
    number = landing.issue("Once", "once.py", "one = 1\n")
    landing.land(number)
    landing.fake.inject_fault("POST", "/repos/*/*/pulls", kind="error", status=502, when="after")
    report = landing.land_pass()
    assert report.landed == [] and report.refused == []
    assert len(landing.fake.pulls()) == 1
    assert "retrying" in (landings.require(landing.q, number).detail or "")

    assert landing.land_pass().landed == [number]
    assert len(landing.fake.pulls()) == 1


def test_a_lost_merge_answer_merges_once(landing: Landing) -> None:
    number = landing.issue("Lost", "lost.py", "lost = 1\n")
    landing.land(number)
    landing.fake.inject_fault(
        "PUT", "/repos/*/*/pulls/*/merge", kind="error", status=502, when="after"
    )
    report = landing.land_pass()
    assert report.landed == []
    assert landings.require(landing.q, number).state == "merging"
    main = git(landing.bare, "rev-parse", "main")
    assert landing.land_pass().landed == [number]
    assert git(landing.bare, "rev-parse", "main") == main  # merged once, not twice
    assert landings.require(landing.q, number).merge_sha == main


def test_a_conflict_is_refused_with_its_files(landing: Landing) -> None:
    first = landing.issue("First", "shared.py", "first\n")
    second = landing.issue("Second", "shared.py", "second\n")
    landing.land(first)
    landing.land(second)
    report = landing.land_pass()
    assert report.landed == [first] and report.refused == [second]
    why = landings.require(landing.q, second).detail or ""
    assert "shared.py" in why, why
    assert issues.get(landing.q, second).claimed_by == AGENT


def test_a_refused_landing_blocks_its_issue_when_the_repository_says_so(
    landing: Landing,
) -> None:
    repositories.configure(landing.q, "app", on_refused="block")
    landing.fake.protect_branch("main", required_checks=["ci"])
    number = landing.issue("Blocked", "b.py", "b = 1\n")
    landing.land(number)
    landing.land_pass()
    (pull,) = landing.fake.pulls()
    landing.fake.add_check_run(pull["head"]["sha"], "ci", conclusion="failure")
    landing.land_pass()
    issue = issues.get(landing.q, number)
    assert issue.is_blocked and "check ci failed" in (issue.blocked_reason or "")
    assert issue.claimed_by is None


def test_a_claim_that_ended_does_not_land(landing: Landing) -> None:
    number = landing.issue("Gave up", "g.py", "g = 1\n")
    landing.land(number)
    claims.release(landing.q, number, Authority.of([AGENT]), discard=True)
    assert landing.land_pass().refused == [number]
    assert landing.fake.pulls() == []
    branch = landings.require(landing.q, number).branch
    assert git(landing.bare, "branch", "--list", branch) == ""  # not even pushed
    assert "claim that asked" in (landings.require(landing.q, number).detail or "")


def test_a_branch_behind_its_base_is_brought_up_to_date(landing: Landing) -> None:
    landing.fake.protect_branch("main", up_to_date=True)
    first = landing.issue("One", "one.py", "1\n")
    second = landing.issue("Two", "two.py", "2\n")
    landing.land(first)
    landing.land(second)
    report = landing.land_pass()
    assert report.landed == [first]
    assert landing.land_pass().landed == [second]
    assert {"one.py", "two.py"} <= set(landing.main_files())


@pytest.mark.anyio
async def test_where_a_landing_stands_on_every_face(landing: Landing, tmp_path: Path) -> None:
    landing.fake.protect_branch("main", required_checks=["ci"])
    number = landing.issue("Shown", "shown.py", "s = 1\n")
    landing.land(number)
    landing.land_pass()
    (pull,) = landing.fake.pulls()
    db = tmp_path / "queue.db"

    shown = cli(db, "merge", str(number), "--status")
    assert shown.returncode == 0, shown.stderr
    assert "open" in shown.stdout and f"pull request #{pull['number']}" in shown.stdout
    assert "waiting for checks: ci" in shown.stdout or "waiting for required" in shown.stdout
    as_json = json.loads(cli(db, "merge", str(number), "--status", "--json").stdout)
    assert (as_json["state"], as_json["pr_number"]) == ("open", pull["number"])
    none = cli(db, "merge", "999", "--status")
    assert none.returncode != 0 and "NOT_FOUND" in none.stderr

    async with Client(make_server(db, toolsets="default")) as client:
        got = await call_ok(client, "issue_get", number=number)
    assert got.structured_content is not None
    assert got.structured_content["landing"]["state"] == "open"
    assert got.structured_content["pull_request"]["number"] == pull["number"]

    with board_server(db) as url, httpx2.Client(timeout=30.0) as http:
        page = http.get(f"{url}/issues/{number}")
    assert page.status_code == 200
    assert "Landing:" in page.text and f"pull request #{pull['number']}" in page.text

    landing.fake.add_check_run(pull["head"]["sha"], "ci")
    synced = workq_on_fake(db, landing.fake, "sync", "github", "--repo", REPO, "--once")
    assert f"Landed through pull requests: #{number}" in synced
    assert "landed" in cli(db, "merge", str(number), "--status").stdout


def test_repository_landing_settings_on_the_command_line(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    repo = make_repo(tmp_path / "app")  # no GitHub remote
    refused = cli(db, "repo", "add", "app", str(repo), "--land", "pr")
    assert refused.returncode != 0 and "--github OWNER/NAME" in refused.stderr
    assert cli(db, "repo", "add", "app", str(repo), "--land", "bogus").returncode != 0
    assert json.loads(cli(db, "repo", "list", "--json").stdout) == []

    other = make_repo(tmp_path / "other")
    added = cli(db, "repo", "add", "other", str(other), "--land", "pr", "--github", "acme/o",
                "--no-update-branch", "--json")  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout)["update_branch"] is False
    assert cli(db, "repo", "add", "app", str(repo)).returncode == 0
    assert json.loads(cli(db, "repo", "status", "app", "--json").stdout)["update_branch"] is True
    bad = cli(db, "repo", "set", "app", "--on-refused", "shrug")
    assert bad.returncode != 0 and "on refused must be one of return, block" in bad.stderr
    bad = cli(db, "repo", "set", "app", "--land", "pr", "--github", "not a repo")
    assert bad.returncode != 0 and "OWNER/NAME" in bad.stderr
    kept = json.loads(cli(db, "repo", "status", "app", "--json").stdout)
    assert (kept["land"], kept["github_repo"]) == ("local", None)

    done = cli(
        db,
        "repo",
        "set",
        "app",
        "--land",
        "pr",
        "--github",
        "acme/app",
        "--on-refused",
        "block",
        "--no-update-branch",
    )
    assert done.returncode == 0, done.stderr
    assert "lands through pull requests on acme/app" in done.stdout
    now = json.loads(cli(db, "repo", "status", "app", "--json").stdout)
    assert (now["land"], now["github_repo"], now["on_refused"], now["update_branch"]) == (
        "pr",
        "acme/app",
        "block",
        False,
    )
    assert "through pull requests on acme/app" in cli(db, "repo", "status", "app").stdout
    assert cli(db, "repo", "set", "app", "--land", "local").returncode == 0
    assert json.loads(cli(db, "repo", "status", "app", "--json").stdout)["land"] == "local"


def cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return workq("--db", db, *args, env={"WORKQ_RUN_ID": AGENT})


def test_a_rate_limit_ends_the_pass_and_the_next_one_goes_on(landing: Landing) -> None:
    number = landing.issue("Limited", "limited.py", "l = 1\n")
    landing.land(number)
    landing.fake.inject_fault("GET", "/repos/*/*/pulls", kind="rate_limit", reset_in=1)
    report = landing.land_pass()
    assert report.held and report.landed == []
    status = landings.require(landing.q, number)
    assert status.state == "queued" and "rate limit" in (status.detail or "")
    assert landing.land_pass() == LandReport()  # not due before the limit resets
    time.sleep(1.2)
    assert landing.land_pass().landed == [number]
    assert len(landing.fake.pulls()) == 1


def test_a_merge_sent_with_a_head_that_moved_goes_back_to_the_checks(landing: Landing) -> None:
    landing.fake.protect_branch("main", required_checks=["ci"])
    number = landing.issue("Moved", "moved.py", "m = 1\n")
    landing.land(number)
    landing.land_pass()
    (pull,) = landing.fake.pulls()
    checked = pull["head"]["sha"]
    landing.fake.add_check_run(checked, "ci")
    # The head moves on GitHub after the worker checked it (it recorded that head to merge).
    (item,) = landings.due(landing.q, REPO)
    assert landings.move(landing.q, item, "merging", merge_sha=checked)
    newer = landing.commit(number, "moved.py", "m = 2\n")
    git(landing.work, "push", "-q", "--force", "origin", pull["head"]["ref"])
    report = landing.land_pass()
    assert report.landed == [] and report.merged == []
    assert landings.require(landing.q, number).state == "open"  # waits for ci on the new head
    said = [str(e.after) for e in notes.history(landing.q, number) if e.kind == "landing"]
    assert any("Head branch was modified" in after for after in said), said
    assert not landing.fake.pulls()[0]["merged"]
    assert git(landing.bare, "rev-parse", pull["head"]["ref"]) == newer
    # A head pushed by hand (not by workq, nor GitHub's update of what it pushed) is not
    # merged, checks passed or not: the holder lands it again, and workq pushes it.
    landing.fake.add_check_run(newer, "ci")
    assert landing.land_pass().refused == [number]
    assert "pushed by someone else" in (landings.require(landing.q, number).detail or "")
    assert landing.land(number).head_sha == newer
    assert landing.land_pass().landed == [number]


def test_a_waiting_landing_keeps_the_claim_that_asked(landing: Landing) -> None:
    landing.fake.protect_branch("main", required_checks=["ci"])
    number = landing.issue("Kept", "kept.py", "k = 1\n")
    landing.land(number)
    before = issues.get(landing.q, number).lease_expires_at
    assert before is not None
    time.sleep(0.05)
    landing.land_pass()
    after = issues.get(landing.q, number).lease_expires_at
    assert after is not None and after > before
    assert issues.get(landing.q, number).claimed_by == AGENT


def test_a_landing_asked_with_no_worker_running_says_what_to_start(landing: Landing) -> None:
    number = landing.issue("Nobody", "n.py", "n = 1\n")
    landing.session.worker.release_lease()
    done = merges.merge_issue(landing.q, number, by=Authority.of([AGENT]))
    assert done.landing is not None and done.landing.state == "queued"
    assert done.note is not None and f"workq sync github --repo {REPO} --watch" in done.note
    landing.session.worker.hold_lease()
    again = merges.merge_issue(landing.q, number, by=Authority.of([AGENT]))
    assert again.note is None and again.landing == done.landing


def test_a_refused_token_stops_the_pass_and_refuses_no_landing(landing: Landing) -> None:
    number = landing.issue("Token", "t.py", "t = 1\n")
    landing.land(number)
    landing.fake.inject_fault("GET", "/repos/*/*/pulls", kind="error", status=401)
    with pytest.raises(AuthFailed):
        landing.land_pass()
    assert landings.require(landing.q, number).state == "queued"
    assert landing.land_pass().landed == [number]


def test_merge_to_main_in_a_shared_checkout_lands_through_a_pull_request(
    landing: Landing,
) -> None:
    number = issues.create(landing.q, title="Shared checkout", repository="app").number
    started = gitflow.start_work_on_issue(landing.q, landing.work, number, by=Authority.of({AGENT}))
    (landing.work / "shared.py").write_text("s = 1\n")
    git(landing.work, "add", "shared.py")
    git(landing.work, "commit", "-q", "-m", "shared")
    asked = to_main.merge_to_main(landing.q, landing.work, by=Authority.of([AGENT]), number=number)
    assert asked.landing is not None and asked.landing.state == "queued"
    assert asked.commit_hash == "" and "landing through a pull request" in (asked.note or "")
    assert "shared.py" not in landing.main_files()

    git(landing.work, "switch", "-q", "main")  # its branch goes once checked out nowhere
    assert landing.land_pass().landed == [number]
    assert "shared.py" in landing.main_files()
    assert issues.get(landing.q, number).status == Status.DONE
    assert git(landing.work, "branch", "--list", started.branch_name) == ""
    again = to_main.merge_to_main(landing.q, landing.work, by=Authority.of([AGENT]), number=number)
    landed = landings.require(landing.q, number)
    assert again.already_merged and again.commit_hash == landed.merge_sha


def test_a_check_reported_as_a_run_and_a_status_is_named_once(landing: Landing) -> None:
    landing.fake.protect_branch("main", required_checks=["ci"])
    number = landing.issue("Both kinds", "both.py", "x = 1\n")
    landing.land(number)
    landing.land_pass()
    (pull,) = landing.fake.pulls()
    head = pull["head"]["sha"]
    landing.fake.add_check_run(head, "ci", status="in_progress", conclusion=None)
    landing.fake.add_status(head, "ci", "pending")
    assert landing.land_pass().waiting == 1
    detail = landings.require(landing.q, number).detail or ""
    assert detail.endswith("waiting for checks: ci"), detail


def test_a_branch_with_no_commits_is_nothing_to_merge_not_a_conflict(landing: Landing) -> None:
    number = issues.create(landing.q, title="Nothing yet", repository="app").number
    claims.claim(landing.q, number, Authority.of([AGENT]))
    worktrees.spawn(landing.q, "app", number, by=Authority.of([AGENT]))
    with pytest.raises(NothingToMerge) as refused:
        merges.merge_issue(landing.q, number, by=Authority.of([AGENT]))
    assert refused.value.code == "NOTHING_TO_MERGE"
    assert "commit the issue's work" in (refused.value.hint or "")
