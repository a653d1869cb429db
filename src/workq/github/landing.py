"""Moving the landing queue through GitHub: each pass of the sync worker takes the landings
that are due (services/workspaces/landings.py) one step or more further.

queued  -> the tip asked to land (``head_sha``, recorded when it was queued) is pushed to
           the issue's branch (forced: the issue's branch is its holder's), never whatever
           the local branch holds by then; the pull request is found by its branch, or
           opened (marked first: after a lost answer it is looked up, never opened twice)
open    -> GitHub's answer read: merged already, closed, a head nobody but workq pushed
           (the pushed tip, or GitHub's own update of it: refused otherwise), behind
           (brought up to date when the repository allows), conflicting (the files named),
           checks failing (the first failing one named), a reviewer's standing request for
           changes on that head, or waiting (checks running, required reviews, GitHub
           computing); once clean with every check passed, the merge of that head is
           recorded
merging -> ``PUT .../merge`` with the head it checked (GitHub refuses a moved head and a
           second merge); after a lost answer the pull request is read again
merged  -> the issue completed, the worktree and branch removed (pr_landings.finish_landing)

Who may land is the decision table's (domain/decisions.py, ``Action.LAND``): the claim that
asked (its holder's run id and fence, from the landing record), with a live lease, no open
blockers and not in plan mode. The door (services/queue/door.py) is asked before every
write to GitHub (each push, the pull request's creation, each update of its branch, each
merge call, retries included): refused, the landing stops with the refusal recorded and
nothing is pushed or merged. While landings wait, the worker keeps the asking claims'
leases alive, renewing at a third of the lease (``leases.renewal_period``), whatever its
length.

Failures are the mirror's: a rate limit ends the pass (the worker holds its requests), a
5xx or a lost answer retries the step later with backoff, a refusal of GitHub that waiting
cannot mend refuses the landing. A refused landing goes back to its holder with a comment
(or blocks the issue, as the repository says); the holder lands again with a new commit.
Refused for its checks or a review, what to repair is read first (github/refusals.py: the
failing checks' output and annotations, the requested changes) and kept with the landing;
the refusal that makes ``max_landing_rounds`` blocks the issue for a person
(landings.refuse records it all in one transaction).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workq.domain import backoff, leases, names
from workq.domain.decisions import Action
from workq.errors import GitFailed, NotFound, WorkqError
from workq.github import checks, landing_tips, refusals
from workq.github.checks import CommitCheck, Outcome
from workq.github.client import GitHubClient
from workq.github.failures import (
    AuthFailed,
    GitHubCallError,
    GitHubRejected,
    NotFoundOnGitHub,
    RateLimited,
    Unclear,
)
from workq.github.models import GhPull, GhReview
from workq.github.submit import REMOTE, pr_body
from workq.services.handle import Queue
from workq.services.queue import door, issues, notes
from workq.services.sync import mirror, pulls
from workq.services.workspaces import landings, pr_landings
from workq.services.workspaces.landings import Due
from workq.vcs import git

log = logging.getLogger("workq.github")
ACTOR = "workq-land"
MERGE_METHODS = {"merge": "merge", "squash": "squash"}


@dataclass(frozen=True)
class LandOptions:
    check_interval: float = 10.0  # seconds between looks at a pull request that waits
    backoff_base: float = 5.0  # first wait after a 5xx or a lost answer, doubled per attempt
    backoff_max: float = 600.0
    max_attempts: int = 8  # failed attempts at one step before the landing is refused
    # Seconds between renewals of the asking claims' leases: at most a third of the lease
    # (None: a third of it).
    keep_leases_every: float | None = None


@dataclass
class LandReport:
    moved: int = 0  # steps taken
    merged: list[int] = field(default_factory=list)  # issues whose pull request merged
    landed: list[int] = field(default_factory=list)  # issues completed and cleaned up
    refused: list[int] = field(default_factory=list)
    waiting: int = 0
    held: bool = False  # a rate limit ended the pass


class _Wait(Exception):
    """The landing waits (checks running, GitHub computing): look again later, in
    ``state`` (the one it is in when None) with ``changes``."""

    def __init__(
        self, why: str, seconds: float | None = None, *, state: str | None = None, **changes: Any
    ) -> None:
        super().__init__(why)
        self.why = why
        self.seconds = seconds
        self.state = state
        self.changes = changes


class _Refuse(Exception):
    """The landing cannot go on until its holder acts: say why. Refused for its checks or
    a review (``repairable``), what the holder needs is read from GitHub: the ``failing``
    checks' output and annotations, the requested changes (``reviews`` as read, if)."""

    def __init__(
        self,
        why: str,
        *,
        repairable: bool = False,
        failing: Sequence[CommitCheck] = (),
        reviews: Sequence[GhReview] | None = None,
        head: str | None = None,
    ) -> None:
        super().__init__(why)
        self.why = why
        self.repairable = repairable
        self.failing = failing
        self.reviews = reviews
        self.head = head  # the pull request's head it was refused on


class Lander:
    """Moves the landings into one GitHub repository. Not thread-safe: one per worker."""

    def __init__(
        self,
        q: Queue,
        client: GitHubClient,
        repo: str,
        *,
        options: LandOptions | None = None,
        pace: Callable[[], None] | None = None,
    ) -> None:
        self.q = q
        self.client = client
        self.repo = repo
        self.options = options or LandOptions()
        self.pace = pace or (lambda: None)
        self._leases_kept = float("-inf")

    def renewal_period(self) -> float:
        """Seconds between renewals of the asking claims' leases: a third of the lease
        (less if the options say so)."""
        period = leases.renewal_period(self.q.lease_seconds)
        if self.options.keep_leases_every is not None:
            period = min(period, self.options.keep_leases_every)
        return period

    def keep_leases(self) -> None:
        """Renew the leases of the claims whose landings wait, when a renewal is due."""
        if time.monotonic() - self._leases_kept >= self.renewal_period():
            landings.keep_leases(self.q, self.repo)
            self._leases_kept = time.monotonic()

    def run_pass(self) -> LandReport:
        """Take every due landing as far as it goes now. A rate limit ends the pass."""
        report = LandReport()
        self.keep_leases()
        for item in landings.due(self.q, self.repo):
            self.keep_leases()  # a pass over many landings may outlast a short lease
            try:
                self._advance(item, report)
            except RateLimited as exc:
                log.warning("landing #%d: %s", item.number, exc.message)
                landings.move(
                    self.q, item, item.state, detail=exc.message, retry_in=_until(self.q, exc)
                )
                report.held = True
                break
        return report

    def _advance(self, item: Due, report: LandReport) -> None:
        while item.state in landings.ACTIVE:
            before = item.state
            try:
                self._step(item, report)
            except _Wait as wait:
                seconds = self.options.check_interval if wait.seconds is None else wait.seconds
                state = wait.state or item.state
                landings.move(
                    self.q, item, state, detail=wait.why, retry_in=seconds, **wait.changes
                )
                report.waiting += 1
                return
            except _Refuse as refusal:
                self._refuse(item, refusal.why, refusal)
                report.refused.append(item.number)
                return
            except (RateLimited, AuthFailed):
                raise  # the pass ends; a refused token stops the worker
            except (Unclear, GitFailed) as exc:  # lost answers, 5xx, a push that failed
                self._retry(item, exc.message, report)
                return
            except GitHubCallError as exc:
                self._refuse(item, f"GitHub refused: {exc.message}")
                report.refused.append(item.number)
                return
            report.moved += 1
            if item.state == before:  # nothing moved: the row changed under us
                return

    def _retry(self, item: Due, why: str, report: LandReport) -> None:
        if item.attempts + 1 >= self.options.max_attempts:
            self._refuse(item, f"gave up after {item.attempts + 1} attempts: {why}")
            report.refused.append(item.number)
            return
        wait = backoff.delay(item.attempts, self.options.backoff_base, self.options.backoff_max)
        log.warning("landing #%d (%s): %s; retrying", item.number, item.state, why)
        landings.move(
            self.q,
            item,
            item.state,
            detail=f"retrying: {why}",
            retry_in=wait,
            count_attempt=True,
        )

    # the steps ---------------------------------------------------------------------------

    def _step(self, item: Due, report: LandReport) -> None:
        if item.state == "queued":
            self._open(item)
        elif item.state == "open":
            self._check(item)
        elif item.state == "merging":
            self._merge(item, report)
        elif item.state == "merged":
            self._finish(item, report)

    def _ask(self, item: Due, write: str) -> None:
        """Ask the door whether the claim that asked to land the issue may still land it,
        right before ``write`` (a push, a merge call...) to GitHub.

        Raises:
            _Refuse: it may not (claim ended or taken over, lease lapsed, open blockers,
                plan mode, the issue done or deleted): nothing is written.
        """
        try:
            door.ask(self.q, Action.LAND, item.number, landings.asker(item))
        except NotFound:
            raise _Refuse("the issue was deleted") from None
        except WorkqError as exc:
            raise _Refuse(
                f"the claim that asked to land it may not {write} now ({exc.code}): {exc.message}"
            ) from None

    def _open(self, item: Due) -> None:
        """Push the tip asked to land, then find or open its pull request."""
        root = Path(item.root)
        if git.branch_tip(root, item.branch) is None:
            raise _Refuse(f"branch {item.branch} is gone")
        if landing_tips.commit(root, item.head_sha) is None:
            raise _Refuse(f"the tip asked to land, {item.head_sha[:12]}, is gone")
        self._ask(item, f"push {item.head_sha[:12]}")
        self.pace()
        landing_tips.push(root, item.head_sha, item.branch)
        pull = self._find_or_open(item)
        pulls.opened(
            self.q,
            item.number,
            repo=self.repo,
            pr_number=pull.number,
            url=pull.html_url,
            branch=item.branch,
            by=landings.asker(item),
            actor=ACTOR,
        )
        if item.pr_number != pull.number:
            notes.comment(
                self.q,
                item.number,
                f"Landing through pull request #{pull.number}: {pull.html_url}",
                kind="progress",
                author=ACTOR,
            )
        landings.move(
            self.q,
            item,
            "open",
            detail=f"pushed {item.head_sha[:12]}; waiting for checks",
            pr_number=pull.number,
            pr_url=pull.html_url,
        )

    def _find_or_open(self, item: Due) -> GhPull:
        if item.pr_number is not None:
            try:
                known = self.client.get_pull(self.repo, item.pr_number)
            except NotFoundOnGitHub:
                known = None
            if known is not None and known.state == "open":
                return known
        owner = names.owner(self.repo)
        found = self.client.list_pulls(self.repo, head=f"{owner}:{item.branch}")
        if found:
            return found[0]
        issue = issues.get(self.q, item.number)
        link = mirror.github_link(self.q, item.number)
        fixes = (
            link.gh_number if link is not None and link.repo.lower() == self.repo.lower() else None
        )
        self._ask(item, "open its pull request")
        self.pace()
        try:
            return self.client.create_pull(
                self.repo,
                title=issue.title,
                body=pr_body(issue, None, fixes),
                head=item.branch,
                base=item.default_branch,
            )
        except GitHubRejected as exc:
            if any("already exists" in str(e.get("message", "")) for e in exc.errors):
                found = self.client.list_pulls(self.repo, head=f"{owner}:{item.branch}")
                if found:
                    return found[0]
            raise

    def _check(self, item: Due) -> None:
        """Read the pull request and its checks; merge it when it is ready."""
        assert item.pr_number is not None
        pull = self.client.get_pull(self.repo, item.pr_number)
        if pull.merged:
            self._merged(item, pull.merge_commit_sha or "")
            return
        if pull.state == "closed":
            raise _Refuse(f"pull request #{pull.number} was closed without merging")
        head = pull.head.sha
        if head != item.head_sha:
            self._github_update_only(item, pull)
        found = checks.on_commit(self.client, self.repo, head)
        failing = [c for c in found if c.outcome is Outcome.FAILED]
        if failing:
            raise _Refuse(
                f"check {failing[0].name} failed on {head[:12]}",
                repairable=True,
                failing=failing,
                head=head,
            )
        state = pull.mergeable_state
        if state == "dirty" or pull.mergeable is False:
            raise _Refuse(self._conflicts(item, pull))
        if state == "behind":
            if not item.update_branch:
                raise _Refuse(
                    f"branch {item.branch} is behind {pull.base.ref}: merge it in and land again"
                )
            self._ask(item, f"bring {item.branch} up to date")
            self.pace()
            self.client.update_pull_branch(self.repo, pull.number, expected_head_sha=head)
            raise _Wait(f"bringing {item.branch} up to date with {pull.base.ref}")
        self._ready(pull, checks.named(found, Outcome.PENDING))
        self._ask(item, f"merge {head[:12]}")
        landings.move(self.q, item, "merging", detail=f"merging {head[:12]}", merge_sha=head)

    def _ready(self, pull: GhPull, pending: Sequence[str]) -> None:
        """Return when the pull request, clean of conflicts and failing checks, may merge
        now: not a draft, no check running, no standing request for changes on its head,
        GitHub's branch protection satisfied.

        Raises:
            _Wait: it waits (a draft, checks running, required reviews, GitHub computing).
            _Refuse: a reviewer requested changes on the head it lands.
        """
        state = pull.mergeable_state
        if pull.draft or state == "draft":
            raise _Wait("the pull request is a draft")
        if pending:
            raise _Wait(f"waiting for checks: {', '.join(pending)}")
        if state not in ("clean", "unstable", "has_hooks", "blocked"):
            raise _Wait(f"GitHub is computing mergeability ({state})", seconds=2.0)
        self._refuse_requested_changes(pull)
        if state == "blocked":
            raise _Wait("waiting for required reviews or checks")

    def _refuse_requested_changes(self, pull: GhPull) -> None:
        """Refuse when a reviewer's standing verdict on the pull request's head is "changes
        requested" (one given on an earlier head waits for its reviewer, as GitHub's branch
        protection says)."""
        reviews = self.client.list_reviews(self.repo, pull.number)
        on_head = [r for r in refusals.standing_changes(reviews) if r.commit_id == pull.head.sha]
        if on_head:
            who = ", ".join(dict.fromkeys(r.user.login if r.user else "?" for r in on_head))
            raise _Refuse(
                f"changes requested by {who} on {pull.head.sha[:12]}",
                repairable=True,
                reviews=reviews,
                head=pull.head.sha,
            )

    def _github_update_only(self, item: Due, pull: GhPull) -> None:
        """Return when the pull request's head, which is not the tip workq pushed, is
        GitHub's own update of it (``update-branch``: merge commits of the base into it, as
        many as the base moved), with the repository allowing updates; else refuse: a head
        someone else pushed to the branch is never merged.

        Raises:
            _Refuse: a head workq did not push, nor GitHub made from it.
            _Wait: the branch moved while it was read.
        """
        head = pull.head.sha
        if not item.update_branch:
            raise _Refuse(
                f"the pull request's head moved to {head[:12]}, not the tip asked to land "
                f"({item.head_sha[:12]})"
            )
        root = Path(item.root)
        fetched = git.fetch(root, REMOTE, pull.head.ref)
        if fetched != head:
            raise _Wait(f"{pull.head.ref} moved while it was read", seconds=2.0)
        base = git.fetch(root, REMOTE, pull.base.ref)
        if base is None or not landing_tips.updates_of(root, head, item.head_sha, base):
            raise _Refuse(
                f"the pull request's head {head[:12]} was pushed by someone else: it is "
                f"neither the tip workq pushed ({item.head_sha[:12]}) nor GitHub's update of "
                f"it with {pull.base.ref}; land again to push the tip you mean to land"
            )

    def commit_checks(self, sha: str) -> tuple[list[str], list[str]]:
        """The names of the failing and of the running checks (check runs and commit
        statuses) on ``sha``."""
        found = checks.on_commit(self.client, self.repo, sha)
        return checks.named(found, Outcome.FAILED), checks.named(found, Outcome.PENDING)

    def _conflicts(self, item: Due, pull: GhPull) -> str:
        """Why the pull request does not merge, with the conflicting files when this
        checkout can tell (its branch merged in memory into the fetched base)."""
        root = Path(item.root)
        try:
            base = git.fetch(root, REMOTE, pull.base.ref)
            tip = git.branch_tip(root, item.branch)
            check = git.merge_tree(root, base, tip) if base and tip else None
        except GitFailed:
            check = None
        if check is not None and check.conflicts:
            return f"merge conflicts with {pull.base.ref} in {', '.join(check.conflicts)}"
        return f"GitHub cannot merge pull request #{pull.number} into {pull.base.ref}"

    def _merge(self, item: Due, report: LandReport) -> None:
        """Merge with the head checked (``merge_sha`` holds it until the merge answers)."""
        assert item.pr_number is not None and item.merge_sha is not None
        pull = self.client.get_pull(self.repo, item.pr_number)
        if pull.merged:  # an earlier answer was lost
            self._merged(item, pull.merge_commit_sha or "")
            report.merged.append(item.number)
            return
        if pull.state == "closed":
            raise _Refuse(f"pull request #{pull.number} was closed without merging")
        self._ask(item, f"merge {item.merge_sha[:12]}")  # each call, a retry after a 5xx too
        self.pace()
        try:
            sha = self.client.merge_pull(
                self.repo,
                item.pr_number,
                sha=item.merge_sha,
                merge_method=MERGE_METHODS.get(item.merge_mode, "merge"),
                commit_title=f"{pull.title} (#{pull.number})",
            )
        except GitHubRejected as exc:
            if exc.status in (405, 409):  # not mergeable after all, or the head moved
                raise _Wait(f"not merged: {exc.message}", state="open", merge_sha=None) from None
            raise
        self._merged(item, sha)
        report.merged.append(item.number)

    def _merged(self, item: Due, sha: str) -> None:
        landings.move(self.q, item, "merged", detail=f"merged at {sha[:12]}", merge_sha=sha)

    def _finish(self, item: Due, report: LandReport) -> None:
        assert item.merge_sha is not None
        root = Path(item.root)
        pr_landings.finish_landing(
            self.q,
            item.number,
            item.repository,
            item.worktree_id,
            item.branch,
            merged=item.merge_sha,
            pushed=item.head_sha,
            actor=ACTOR,
        )
        if item.pr_number is not None:
            link = pulls.of_issue(self.q, item.number)
            if link is not None and link.merged_at is None:
                pulls.merged(self.q, link, self.q.now(), actor=ACTOR)
        try:  # the checkout learns what landed; a failed fetch leaves it for the next one
            git.fetch(root, REMOTE, item.default_branch)
        except GitFailed as exc:
            log.warning("landing #%d: fetch after the merge failed: %s", item.number, exc.message)
        landings.move(self.q, item, "landed", detail=f"landed at {item.merge_sha[:12]}")
        report.landed.append(item.number)

    def _refuse(self, item: Due, why: str, refusal: _Refuse | None = None) -> None:
        """Refused: back to its holder, or the issue blocked (as the repository says, and
        once its landing was refused max_landing_rounds times), with what to repair read
        from GitHub when its checks or a review refused it (services/workspaces/landings.py
        records it all at once). A new tip asked to land moves it again."""
        found = None
        if refusal is not None and refusal.repairable and item.pr_number is not None:
            found = refusals.gather(
                self.client,
                self.repo,
                reason=why,
                head=refusal.head or item.head_sha,
                pr_number=item.pr_number,
                failing=refusal.failing,
                reviews=refusal.reviews,
            )
        failure = landings.refuse(self.q, item, why, found, actor=ACTOR)
        if failure is None:  # moved meanwhile: a new tip was queued
            return
        item.state = "refused"
        blocked = " (the issue blocked)" if failure.blocked else ""
        log.info(
            "landing #%d refused, round %d of %d%s: %s",
            item.number,
            failure.round,
            failure.max_rounds,
            blocked,
            failure.reason,
        )


def _until(q: Queue, exc: RateLimited) -> float:
    return max(1.0, (exc.retry_at - q.now()).total_seconds())
