"""At each sync pass: the pull requests submit_pr opened that GitHub now shows merged
complete their issues (once: the pull request is marked merged in the same step)."""

from __future__ import annotations

import logging

from workq.github.client import GitHubClient
from workq.github.failures import GitHubCallError, NotFoundOnGitHub, RateLimited
from workq.services.handle import Queue
from workq.services.sync import pulls

log = logging.getLogger("workq.github")
ACTOR = "github-sync"


def settle(q: Queue, client: GitHubClient, repo: str) -> list[int]:
    """Complete the issues whose pull request was merged; the issue numbers completed. A
    rate limit ends the round (the next pass goes on); other failures skip one pull."""
    completed: list[int] = []
    for link in pulls.unmerged(q, repo):
        try:
            pull = client.get_pull(repo, link.pr_number)
        except RateLimited as exc:
            log.warning("merged pull requests: %s", exc.message)
            break
        except NotFoundOnGitHub:
            continue
        except GitHubCallError as exc:
            log.warning("pull request #%d: %s", link.pr_number, exc.message)
            continue
        if not pull.merged or pull.merged_at is None:
            continue
        if pulls.merged(q, link, pull.merged_at, actor=ACTOR) is not None:
            completed.append(link.number)
    return completed
