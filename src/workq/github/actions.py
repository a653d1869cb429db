"""What contract C's GitHub tools do, over the REST client: open a pull request, list and read
issues, a pull request's merge readiness, its diff (cut at a size), add labels (creating the
missing ones), close an issue (idempotently).

Every call is one or a few requests, never retried here: a rate limit comes back as
:class:`RateLimited` with ``retry_after`` (seconds) among its facts, and every GitHub
refusal keeps GitHub's own message (``github_message``) in the error text.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Literal

from workq.github import checks
from workq.github.checks import CommitCheck, Outcome
from workq.github.client import GitHubClient
from workq.github.failures import RateLimited
from workq.github.models import GhIssue, GhLabel, GhPull, GhReview
from workq.github_schemas import (
    Check,
    IssueClosed,
    IssueDetail,
    IssueItem,
    IssueList,
    LabelsAdded,
    PullCreated,
    PullDiff,
    PullStatus,
    Review,
)

LIST_PAGES_MAX = 5
NEW_LABEL_COLOR = "ededed"


@contextmanager
def retry_after_seconds() -> Iterator[None]:
    """Give a rate limit its wait in whole seconds (contract C's retry-after)."""
    try:
        yield
    except RateLimited as exc:
        wait = max(0, int((exc.retry_at - datetime.now(UTC)).total_seconds() + 0.999))
        exc.facts["retry_after"] = wait
        raise


def create_pr(
    client: GitHubClient, repo: str, *, title: str, body: str, base: str, head: str, draft: bool
) -> PullCreated:
    with retry_after_seconds():
        pull = client.create_pull(repo, title=title, body=body, head=head, base=base, draft=draft)
    return PullCreated(
        pr_number=pull.number,
        url=pull.html_url,
        state=pull.state,
        draft=pull.draft,
        head=pull.head.ref,
        base=pull.base.ref,
    )


def _item(issue: GhIssue) -> IssueItem:
    return IssueItem(
        number=issue.number,
        title=issue.title,
        state=issue.state,
        labels=issue.label_names,
        url=issue.html_url,
        comments=issue.comments,
        updated_at=issue.updated_at,
    )


def list_issues(
    client: GitHubClient,
    repo: str,
    *,
    label: str | None,
    state: Literal["open", "closed", "all"],
    limit: int,
) -> IssueList:
    """Issues (pull requests left out), newest first, at most ``limit``."""
    found: list[IssueItem] = []
    more = False
    with retry_after_seconds():
        page = client.list_issues(
            repo, state=state, labels=[label] if label else None, per_page=min(100, limit + 10)
        )
        for turn in range(LIST_PAGES_MAX):
            for issue in page.items:
                if issue.is_pull_request:
                    continue
                if len(found) == limit:
                    more = True
                    break
                found.append(_item(issue))
            if more or page.next_url is None:
                break
            if turn == LIST_PAGES_MAX - 1:
                more = True
                break
            page = client.list_issues(repo, page_url=page.next_url)
    if len(found) == limit and page.next_url is not None:
        more = True
    return IssueList(issues=found, count=len(found), has_more=more)


def get_issue(client: GitHubClient, repo: str, number: int) -> IssueDetail:
    with retry_after_seconds():
        issue = client.get_issue(repo, number)
    return IssueDetail(
        number=issue.number,
        title=issue.title,
        body=issue.body or "",
        state=issue.state,
        state_reason=issue.state_reason,
        labels=issue.label_names,
        assignees=[a.login for a in issue.assignees],
        author=issue.user.login if issue.user else None,
        comments=issue.comments,
        url=issue.html_url,
        created_at=issue.created_at,
        updated_at=issue.updated_at,
        closed_at=issue.closed_at,
    )


def pr_status(client: GitHubClient, repo: str, number: int) -> PullStatus:
    """Checks (check runs and commit statuses of the head commit), reviews (each
    reviewer's latest), and whether it can merge, with the reasons when not."""
    with retry_after_seconds():
        pull = client.get_pull(repo, number)
        found = checks.on_commit(client, repo, pull.head.sha)
        reviews = _latest_reviews(client.list_reviews(repo, number))
    pending = sum(1 for c in found if c.outcome is Outcome.PENDING)
    passed = sum(1 for c in found if c.outcome is Outcome.PASSED)
    failed = len(found) - pending - passed
    approvals = sum(1 for r in reviews if r.state == "APPROVED")
    changes = sum(1 for r in reviews if r.state == "CHANGES_REQUESTED")
    return PullStatus(
        pr_number=pull.number,
        url=pull.html_url,
        state="merged" if pull.merged else pull.state,
        draft=pull.draft,
        merged=pull.merged,
        mergeable=pull.mergeable,
        mergeable_state=pull.mergeable_state,
        not_mergeable_because=_not_mergeable_because(pull, found, changes),
        checks=[
            Check(name=c.name, kind=c.kind, status=c.status, conclusion=c.conclusion, url=c.url)
            for c in found
        ],
        checks_passed=passed,
        checks_failed=failed,
        checks_pending=pending,
        reviews=reviews,
        approvals=approvals,
        changes_requested=changes,
    )


def _latest_reviews(reviews: Sequence[GhReview]) -> list[Review]:
    """Each reviewer's latest review (comments and pending reviews left out)."""
    latest: dict[str, Review] = {}
    for r in reviews:
        if r.state in ("COMMENTED", "PENDING"):
            continue
        who = r.user.login if r.user else ""
        latest[who] = Review(
            user=r.user.login if r.user else None, state=r.state, submitted_at=r.submitted_at
        )
    return list(latest.values())


def _not_mergeable_because(pull: GhPull, found: Sequence[CommitCheck], changes: int) -> list[str]:
    failing = [c.name for c in found if c.outcome is Outcome.FAILED]
    pending = sum(1 for c in found if c.outcome is Outcome.PENDING)
    why: list[str] = []
    if pull.merged:
        why.append("already merged")
    elif pull.state == "closed":
        why.append("closed")
    if pull.draft:
        why.append("draft")
    if pull.mergeable is False or pull.mergeable_state == "dirty":
        why.append(f"merge conflicts with {pull.base.ref}")
    elif pull.mergeable is None and not pull.merged:
        why.append("GitHub is still computing mergeability: ask again shortly")
    if failing:
        why.append(f"failing checks: {', '.join(failing)}")
    if pending:
        why.append(f"{pending} check(s) still running")
    if changes:
        why.append(f"{changes} review(s) request changes")
    if pull.mergeable_state == "blocked" and not (failing or pending or changes):
        why.append("blocked by branch protection (required reviews or checks)")
    if pull.mergeable_state == "behind":
        why.append(f"behind {pull.base.ref}")
    return why


def pr_diff(client: GitHubClient, repo: str, number: int, max_size: int) -> PullDiff:
    """The unified diff, cut to ``max_size`` bytes of UTF-8 (at a line end when one is
    near) with a warning that says how much was left out."""
    with retry_after_seconds():
        text = client.get_pull_diff(repo, number)
    data = text.encode()
    if len(data) <= max_size:
        return PullDiff(pr_number=number, diff=text, size=len(data), truncated=False, warning=None)
    cut = data[:max_size]
    newline = cut.rfind(b"\n")
    if newline >= max_size // 2:
        cut = cut[: newline + 1]
    kept = cut.decode(errors="ignore")
    warning = (
        f"diff truncated: showing {len(kept.encode())} of {len(data)} bytes "
        f"(max_size={max_size}); raise max_size or read the files one by one"
    )
    return PullDiff(pr_number=number, diff=kept, size=len(data), truncated=True, warning=warning)


def add_labels(client: GitHubClient, repo: str, number: int, labels: Sequence[str]) -> LabelsAdded:
    """Create the labels the repository lacks (a race with someone else creating one is
    fine), then add them all to the issue."""
    with retry_after_seconds():
        existing = {label.name.lower() for label in client.list_labels(repo)}
        created: list[str] = []
        for name in dict.fromkeys(labels):
            if name.lower() in existing:
                continue
            if client.create_label(repo, name, color=NEW_LABEL_COLOR) is not None:
                created.append(name)
            existing.add(name.lower())
        now: list[GhLabel] = client.add_labels(repo, number, list(dict.fromkeys(labels)))
    return LabelsAdded(issue_number=number, labels=[lb.name for lb in now], created=created)


def close_issue(client: GitHubClient, repo: str, number: int, comment: str | None) -> IssueClosed:
    """Comment (when given), then close as completed. An issue already closed is left as
    it is, comment included: a repeated call changes nothing."""
    with retry_after_seconds():
        issue = client.get_issue(repo, number)
        if issue.state == "closed":
            return IssueClosed(
                issue_number=number, state="closed", already_closed=True, comment_url=None
            )
        url = None
        if comment:
            url = client.create_comment(repo, number, comment).html_url
        closed = client.update_issue(repo, number, state="closed", state_reason="completed")
    return IssueClosed(
        issue_number=number, state=closed.state, already_closed=False, comment_url=url
    )
