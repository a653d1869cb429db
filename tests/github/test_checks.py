"""One reading of a commit's checks: every check run conclusion and commit status state
GitHub documents means the same to the GitHub tools' pr_status and to the landing queue."""

from __future__ import annotations

import pytest

from tests.github_fake.server import FakeGitHub
from workq.github import actions, checks
from workq.github.checks import Outcome
from workq.github.client import GitHubClient
from workq.github.landing import Lander
from workq.services.handle import Queue

REPO = "acme/widgets"
# As GitHub documents them (REST API: check runs, commit statuses).
DOCUMENTED_CONCLUSIONS = {
    "action_required",
    "cancelled",
    "failure",
    "neutral",
    "success",
    "skipped",
    "stale",
    "timed_out",
    "startup_failure",
}
DOCUMENTED_STATES = {"error", "failure", "pending", "success"}


def test_the_tables_hold_every_documented_conclusion_and_state() -> None:
    assert set(checks.CHECK_RUN_CONCLUSIONS) == DOCUMENTED_CONCLUSIONS
    assert set(checks.COMMIT_STATUS_STATES) == DOCUMENTED_STATES


@pytest.mark.parametrize(
    ("conclusion", "outcome"),
    [
        ("success", Outcome.PASSED),
        ("neutral", Outcome.PASSED),
        ("skipped", Outcome.PASSED),
        ("stale", Outcome.FAILED),
        ("startup_failure", Outcome.FAILED),
        ("a-conclusion-github-adds-later", Outcome.FAILED),
    ],
)
def test_a_completed_check_run(conclusion: str, outcome: Outcome) -> None:
    assert checks.of_check_run("completed", conclusion) is outcome


@pytest.mark.parametrize("status", ["queued", "in_progress", "waiting", "requested", "pending"])
def test_a_check_run_that_has_not_completed_is_pending(status: str) -> None:
    assert checks.of_check_run(status, None) is Outcome.PENDING


def test_a_completed_check_run_without_a_conclusion_is_pending() -> None:
    assert checks.of_check_run("completed", None) is Outcome.PENDING


def _readings(
    fake: FakeGitHub, client: GitHubClient, queue: Queue, name: str, *, state: str | None = None
) -> tuple[Outcome, Outcome]:
    """What pr_status and the landing make of the one check on a new pull request's head."""
    pull = fake.seed_pull(f"check {name}", head=f"topic-{name}")
    head = pull["head"]["sha"]
    if state is None:
        fake.add_check_run(head, name, conclusion=name)
    else:
        fake.add_status(head, name, state)
    status = actions.pr_status(client, REPO, pull["number"])
    by_status = {
        Outcome.PASSED: status.checks_passed,
        Outcome.FAILED: status.checks_failed,
        Outcome.PENDING: status.checks_pending,
    }
    assert sorted(by_status.values()) == [0, 0, 1], status
    tools = next(outcome for outcome, count in by_status.items() if count)
    failing, pending = Lander(queue, client, REPO).commit_checks(head)
    landing = Outcome.FAILED if failing else Outcome.PENDING if pending else Outcome.PASSED
    assert failing + pending in ([], [name])
    return tools, landing


@pytest.mark.parametrize("conclusion", sorted(checks.CHECK_RUN_CONCLUSIONS))
def test_pr_status_and_the_landing_read_a_check_run_alike(
    fake_github: FakeGitHub, gh_client: GitHubClient, queue: Queue, conclusion: str
) -> None:
    tools, landing = _readings(fake_github, gh_client, queue, conclusion)
    assert tools is landing is checks.CHECK_RUN_CONCLUSIONS[conclusion]


@pytest.mark.parametrize("state", sorted(checks.COMMIT_STATUS_STATES))
def test_pr_status_and_the_landing_read_a_commit_status_alike(
    fake_github: FakeGitHub, gh_client: GitHubClient, queue: Queue, state: str
) -> None:
    tools, landing = _readings(fake_github, gh_client, queue, state, state=state)
    assert tools is landing is checks.COMMIT_STATUS_STATES[state]


def test_a_running_check_run_is_pending_to_both(
    fake_github: FakeGitHub, gh_client: GitHubClient, queue: Queue
) -> None:
    pull = fake_github.seed_pull("running", head="topic-running")
    fake_github.add_check_run(pull["head"]["sha"], "ci", status="in_progress", conclusion=None)
    status = actions.pr_status(gh_client, REPO, pull["number"])
    assert status.checks_pending == 1
    assert Lander(queue, gh_client, REPO).commit_checks(pull["head"]["sha"]) == ([], ["ci"])
