"""What a refused landing's holder needs to repair it, read from GitHub: each failing check
(name, conclusion, output title and summary, the first annotations of a check run) and the
pull request's requested changes (the reviews whose author's standing verdict is "changes
requested", and their comments on the diff), every text cut to its bound
(domain/landing_failures.py).

Reading is best effort: the refusal stands whatever GitHub answers, so a call that fails
(a 5xx, a 404, a rate limit) leaves out what it would have read and says so in ``unread``;
after a rate limit or a refused token nothing more is asked.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TypeVar

from workq.domain import landing_failures as bounds
from workq.github.checks import CommitCheck
from workq.github.client import GitHubClient
from workq.github.failures import AuthFailed, GitHubCallError, RateLimited
from workq.github.models import GhReview, GhReviewComment
from workq.schemas import (
    ChangesRequested,
    CheckAnnotation,
    FailedCheck,
    LandingFailure,
    ReviewComment,
)

log = logging.getLogger("workq.github")
T = TypeVar("T")
# The review states that say nothing about merging: a reviewer's verdict is their latest
# review in another state (approved, changes requested, dismissed).
NO_VERDICT = ("COMMENTED", "PENDING")


def standing_changes(reviews: Sequence[GhReview]) -> list[GhReview]:
    """The reviews that request changes and still stand: each reviewer's latest verdict,
    when it is CHANGES_REQUESTED (a later approval or dismissal lifts it), oldest first."""
    latest: dict[str, GhReview] = {}
    for review in reviews:
        if review.state in NO_VERDICT:
            continue
        latest[review.user.login if review.user else f"#{review.id}"] = review
    return [r for r in latest.values() if r.state == "CHANGES_REQUESTED"]


class _Reader:
    """Calls to GitHub whose failure is noted, not raised; none after a rate limit or a
    refused token."""

    def __init__(self) -> None:
        self.unread: list[str] = []
        self.stopped: str | None = None

    def read(self, what: str, call: Callable[[], T]) -> T | None:
        if self.stopped is not None:
            self.unread.append(bounds.line(f"{what}: {self.stopped}", bounds.UNREAD_MAX) or what)
            return None
        try:
            return call()
        except GitHubCallError as exc:
            why = f"GitHub answered {exc.status}" if exc.status else exc.code
            if isinstance(exc, (RateLimited, AuthFailed)):
                self.stopped = f"not asked after {why}"
            log.info("reading %s for a refused landing: %s", what, exc.message)
            self.unread.append(bounds.line(f"{what}: {why}", bounds.UNREAD_MAX) or what)
            return None


def gather(
    client: GitHubClient,
    repo: str,
    *,
    reason: str,
    head: str,
    pr_number: int,
    failing: Sequence[CommitCheck] = (),
    reviews: Sequence[GhReview] | None = None,
) -> LandingFailure:
    """The failure of a landing refused on ``head`` of pull request ``pr_number``: the
    ``failing`` checks described (the first few, with the first annotations of each check
    run) and the standing requested changes (``reviews`` as read already, or read here),
    with their review comments."""
    reader = _Reader()
    checks = [_check(client, repo, c, reader) for c in failing[: bounds.CHECKS_MAX]]
    if reviews is None:
        reviews = reader.read("the reviews", lambda: client.list_reviews(repo, pr_number)) or []
    standing = standing_changes(reviews)
    notes: list[GhReviewComment] = []
    if standing:
        ids = {r.id for r in standing}
        found = reader.read(
            "the review comments", lambda: client.list_review_comments(repo, pr_number)
        )
        notes = [c for c in found or () if c.pull_request_review_id in ids]
    return LandingFailure(
        reason=bounds.line(reason, bounds.REASON_LIMIT) or "refused",
        head_sha=head,
        pr_number=pr_number,
        checks=checks,
        more_checks=max(0, len(failing) - bounds.CHECKS_MAX),
        reviews=[_review(r) for r in standing[: bounds.REVIEWS_MAX]],
        review_comments=[_review_comment(c) for c in notes[: bounds.COMMENTS_MAX]],
        unread=reader.unread,
    )


def _check(client: GitHubClient, repo: str, check: CommitCheck, reader: _Reader) -> FailedCheck:
    name = bounds.line(check.name, bounds.NAME_MAX) or "?"
    annotations: list[CheckAnnotation] = []
    if check.kind == "check_run" and check.id is not None and check.annotations_count > 0:
        run_id = check.id
        found = reader.read(
            f"the annotations of check {name}",
            lambda: client.list_check_run_annotations(
                repo, run_id, per_page=bounds.ANNOTATIONS_MAX
            ),
        )
        annotations = [
            CheckAnnotation(
                path=bounds.line(a.path, bounds.NAME_MAX) or "?",
                start_line=a.start_line,
                annotation_level=bounds.line(a.annotation_level, bounds.NAME_MAX),
                message=bounds.cut(a.message or a.title or "", bounds.MESSAGE_MAX) or "",
            )
            for a in (found or [])[: bounds.ANNOTATIONS_MAX]
        ]
    return FailedCheck(
        name=name,
        kind=check.kind,
        conclusion=bounds.line(check.conclusion, bounds.NAME_MAX),
        title=bounds.line(check.title, bounds.TITLE_MAX),
        summary=bounds.cut(check.summary, bounds.SUMMARY_MAX),
        url=bounds.line(check.url, bounds.NAME_MAX * 2),
        annotations=annotations,
        annotations_total=check.annotations_count,
    )


def _review(review: GhReview) -> ChangesRequested:
    return ChangesRequested(
        author=bounds.line(review.user.login, bounds.NAME_MAX) if review.user else None,
        body=bounds.cut(review.body, bounds.BODY_MAX) or None,
        commit_id=bounds.line(review.commit_id, 64),
        url=bounds.line(review.html_url, bounds.NAME_MAX * 2) or None,
    )


def _review_comment(comment: GhReviewComment) -> ReviewComment:
    return ReviewComment(
        author=bounds.line(comment.user.login, bounds.NAME_MAX) if comment.user else None,
        path=bounds.line(comment.path, bounds.NAME_MAX) or "?",
        line=comment.line if comment.line is not None else comment.original_line,
        body=bounds.cut(comment.body, bounds.COMMENT_BODY_MAX) or "",
        url=bounds.line(comment.html_url, bounds.NAME_MAX * 2) or None,
    )
