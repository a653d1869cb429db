"""What the checks on a commit say: every check run conclusion and commit status state GitHub
documents, read once as passed, failed or pending. The GitHub tools' ``pr_status`` and the
landing queue read a commit's checks here, so they never disagree on one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from workq.github.client import GitHubClient


class Outcome(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    PENDING = "pending"


# The conclusions of a completed check run.
CHECK_RUN_CONCLUSIONS: dict[str, Outcome] = {
    "success": Outcome.PASSED,
    # Branch protection counts a required check that is neutral or skipped as passing.
    "neutral": Outcome.PASSED,
    "skipped": Outcome.PASSED,
    "failure": Outcome.FAILED,
    "timed_out": Outcome.FAILED,
    "cancelled": Outcome.FAILED,
    "action_required": Outcome.FAILED,
    "startup_failure": Outcome.FAILED,
    # GitHub marks a check stale after 14 days incomplete: only a re-run makes it pass, and
    # waiting brings none, so it fails (a landing is refused rather than waiting forever).
    "stale": Outcome.FAILED,
}
# The states of a commit status.
COMMIT_STATUS_STATES: dict[str, Outcome] = {
    "success": Outcome.PASSED,
    "pending": Outcome.PENDING,
    "failure": Outcome.FAILED,
    "error": Outcome.FAILED,
}


def of_check_run(status: str, conclusion: str | None) -> Outcome:
    """A check run: pending until it completes with a conclusion. A conclusion GitHub does
    not document fails: nothing is merged on a result workq cannot read."""
    if status != "completed" or conclusion is None:
        return Outcome.PENDING
    return CHECK_RUN_CONCLUSIONS.get(conclusion, Outcome.FAILED)


def of_commit_status(state: str) -> Outcome:
    """A commit status (an undocumented state fails, as an undocumented conclusion does)."""
    return COMMIT_STATUS_STATES.get(state, Outcome.FAILED)


@dataclass(frozen=True)
class CommitCheck:
    """One check run or commit status on a commit, and what it says."""

    name: str
    kind: Literal["check_run", "status"]
    status: str
    conclusion: str | None
    url: str | None
    outcome: Outcome
    id: int | None = None  # a check run's: its annotations are read by it
    title: str | None = None  # a check run's output title, a status's description
    summary: str | None = None  # a check run's output summary
    annotations_count: int = 0


def on_commit(client: GitHubClient, repo: str, sha: str) -> list[CommitCheck]:
    """The check runs (the first 100), then the commit statuses, of commit ``sha``."""
    found = [
        CommitCheck(
            name=run.name,
            kind="check_run",
            status=run.status,
            conclusion=run.conclusion,
            url=run.html_url or run.details_url,
            outcome=of_check_run(run.status, run.conclusion),
            id=run.id,
            title=run.output.title if run.output else None,
            summary=run.output.summary if run.output else None,
            annotations_count=run.output.annotations_count if run.output else 0,
        )
        for run in client.list_check_runs(repo, sha).check_runs
    ]
    found += [
        CommitCheck(
            name=status.context,
            kind="status",
            status="pending" if status.state == "pending" else "completed",
            conclusion=None if status.state == "pending" else status.state,
            url=status.target_url,
            outcome=of_commit_status(status.state),
            title=status.description,
        )
        for status in client.get_combined_status(repo, sha).statuses
    ]
    return found


def named(checks: Iterable[CommitCheck], outcome: Outcome) -> list[str]:
    """The names of the checks with ``outcome``, each once (a CI may report one check both
    as a check run and as a commit status)."""
    return list(dict.fromkeys(check.name for check in checks if check.outcome == outcome))
