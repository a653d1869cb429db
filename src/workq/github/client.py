"""A thin synchronous client for the GitHub REST endpoints workq uses: the mirror's issues,
labels and comments, and the pull requests, reviews and checks of the landing queue and the
GitHub tools.

It sends one request per call (:mod:`workq.github.transport`) and never retries, sleeps,
caches or follows redirects: the sync worker owns those decisions. Every failure is one of
:mod:`workq.github.failures`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Literal, Self
from urllib.parse import quote

import httpx2

from workq.domain import dates
from workq.github.failures import GitHubRejected, Unclear
from workq.github.models import (
    GhAnnotation,
    GhCheckRuns,
    GhCombinedStatus,
    GhComment,
    GhIssue,
    GhLabel,
    GhPull,
    GhRepo,
    GhReview,
    GhReviewComment,
    GhUser,
)
from workq.github.rate_limits import RateLimitInfo
from workq.github.transport import (
    DEFAULT_API_URL,
    DEFAULT_TIMEOUT,
    USER_AGENT,
    Page,
    Transport,
)

DIFF_MEDIA_TYPE = "application/vnd.github.diff"

IssueStateFilter = Literal["open", "closed", "all"]
IssueSort = Literal["created", "updated", "comments"]
SortDirection = Literal["asc", "desc"]
IssueState = Literal["open", "closed"]
StateReason = Literal["completed", "not_planned", "reopened", "duplicate"]


class GitHubClient:
    """One GitHub API endpoint (github.com, an Enterprise server, or the test fake) and token.

    ``repo`` arguments are ``"OWNER/NAME"``. Calls are synchronous; the client may be shared
    between threads but the worker sends one request at a time.
    """

    def __init__(
        self,
        token: str,
        *,
        base_url: str = DEFAULT_API_URL,
        timeout: float = DEFAULT_TIMEOUT,
        user_agent: str = USER_AGENT,
        trust_env: bool | None = None,
        transport: httpx2.BaseTransport | None = None,
    ) -> None:
        """``trust_env``: use proxy and TLS settings from the environment; by default yes,
        except for a loopback base URL (the test fake), which must never go through a proxy.
        """
        self.transport = Transport(
            token,
            base_url=base_url,
            timeout=timeout,
            user_agent=user_agent,
            trust_env=trust_env,
            transport=transport,
        )
        self.base_url = self.transport.base_url
        self.timeout = timeout

    @property
    def last_rate_limit(self) -> RateLimitInfo | None:
        """The ``x-ratelimit-*`` headers of the latest answer that had them."""
        return self.transport.last_rate_limit

    def __repr__(self) -> str:
        return f"GitHubClient(base_url={self.base_url!r})"

    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # endpoints ------------------------------------------------------------------------------

    def get_user(self) -> GhUser:
        """``GET /user``: who the token belongs to."""
        return self.transport.model(GhUser, self.transport.send("GET", "user"))

    def get_repo(self, repo: str) -> GhRepo:
        """``GET /repos/{o}/{r}``, with the token's ``permissions``."""
        return self.transport.model(GhRepo, self.transport.send("GET", _repo_path(repo)))

    def get_rate_limit(self) -> RateLimitInfo:
        """``GET /rate_limit`` (costs no quota): the core limit."""
        data = self.transport.json(self.transport.send("GET", "rate_limit"))
        try:
            core = data["resources"]["core"]
            return RateLimitInfo(
                int(core["limit"]),
                int(core["remaining"]),
                datetime.fromtimestamp(int(core["reset"]), UTC),
                int(core["used"]) if "used" in core else None,
                "core",
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise Unclear("GitHub's rate_limit answer could not be read", method="GET") from exc

    def list_issues(
        self,
        repo: str,
        *,
        state: IssueStateFilter = "open",
        since: datetime | None = None,
        sort: IssueSort = "created",
        direction: SortDirection = "desc",
        creator: str | None = None,
        labels: Sequence[str] | None = None,
        per_page: int = 100,
        page_url: str | None = None,
        etag: str | None = None,
    ) -> Page[GhIssue]:
        """One page of ``GET /repos/{o}/{r}/issues`` (pull requests included: check
        ``is_pull_request``).

        For the next page pass ``page_url=page.next_url`` (the filters are then taken from
        that URL). With ``etag``, a 304 comes back as ``Page(not_modified=True)``.
        """
        if page_url is not None:
            return self.transport.page(GhIssue, self.transport.page_url(page_url), None, etag)
        params: dict[str, str] = {
            "state": state,
            "sort": sort,
            "direction": direction,
            "per_page": str(_clamp_per_page(per_page)),
        }
        if since is not None:
            params["since"] = dates.iso_z(since)
        if creator:
            params["creator"] = creator
        if labels:
            params["labels"] = ",".join(labels)
        return self.transport.page(GhIssue, f"{_repo_path(repo)}/issues", params, etag)

    def get_issue(self, repo: str, number: int) -> GhIssue:
        """``GET /repos/{o}/{r}/issues/{n}``."""
        return self.transport.model(GhIssue, self.transport.send("GET", _issue_path(repo, number)))

    def create_issue(
        self,
        repo: str,
        *,
        title: str,
        body: str | None = None,
        labels: Sequence[str] | None = None,
    ) -> GhIssue:
        """``POST /repos/{o}/{r}/issues``. Never retried: after :class:`Unclear`, look for the
        issue before creating it again."""
        payload: dict[str, Any] = {"title": title}
        if body is not None:
            payload["body"] = body
        if labels is not None:
            payload["labels"] = list(labels)
        response = self.transport.send("POST", f"{_repo_path(repo)}/issues", json=payload)
        return self.transport.model(GhIssue, response)

    def update_issue(
        self,
        repo: str,
        number: int,
        *,
        title: str | None = None,
        body: str | None = None,
        state: IssueState | None = None,
        state_reason: StateReason | None = None,
        labels: Sequence[str] | None = None,
    ) -> GhIssue:
        """``PATCH /repos/{o}/{r}/issues/{n}`` with the given (absolute) values; None leaves a
        field alone. GitHub ignores ``state_reason`` unless ``state`` changes in the same
        request; ``labels`` replaces the whole set."""
        payload: dict[str, Any] = {}
        if title is not None:
            payload["title"] = title
        if body is not None:
            payload["body"] = body
        if state is not None:
            payload["state"] = state
        if state_reason is not None:
            payload["state_reason"] = state_reason
        if labels is not None:
            payload["labels"] = list(labels)
        if not payload:
            raise ValueError("update_issue needs at least one field to change")
        response = self.transport.send("PATCH", _issue_path(repo, number), json=payload)
        return self.transport.model(GhIssue, response)

    def list_labels(self, repo: str) -> list[GhLabel]:
        """Every label of the repository (``GET /repos/{o}/{r}/labels``, following ``Link``
        next; one request per 100 labels)."""
        labels: list[GhLabel] = []
        page = self.transport.page(GhLabel, f"{_repo_path(repo)}/labels", {"per_page": "100"}, None)
        labels.extend(page.items)
        while page.next_url is not None:
            page = self.transport.page(GhLabel, self.transport.page_url(page.next_url), None, None)
            labels.extend(page.items)
        return labels

    def create_label(
        self, repo: str, name: str, *, color: str, description: str | None = None
    ) -> GhLabel | None:
        """``POST /repos/{o}/{r}/labels``. Returns the label, or None when it already existed
        (a 422 ``already_exists``: someone else created it, which is success)."""
        payload: dict[str, Any] = {"name": name, "color": color.lstrip("#")}
        if description is not None:
            payload["description"] = description
        try:
            response = self.transport.send("POST", f"{_repo_path(repo)}/labels", json=payload)
        except GitHubRejected as exc:
            if exc.status == 422 and any(e.get("code") == "already_exists" for e in exc.errors):
                return None
            raise
        return self.transport.model(GhLabel, response)

    def list_comments(
        self,
        repo: str,
        number: int,
        *,
        since: datetime | None = None,
        per_page: int = 100,
        page_url: str | None = None,
    ) -> Page[GhComment]:
        """One page of ``GET /repos/{o}/{r}/issues/{n}/comments``, oldest first."""
        if page_url is not None:
            return self.transport.page(GhComment, self.transport.page_url(page_url), None, None)
        params = {"per_page": str(_clamp_per_page(per_page))}
        if since is not None:
            params["since"] = dates.iso_z(since)
        return self.transport.page(GhComment, f"{_issue_path(repo, number)}/comments", params, None)

    def create_comment(self, repo: str, number: int, body: str) -> GhComment:
        """``POST /repos/{o}/{r}/issues/{n}/comments``. Never retried (it can duplicate)."""
        response = self.transport.send(
            "POST", f"{_issue_path(repo, number)}/comments", json={"body": body}
        )
        return self.transport.model(GhComment, response)

    def add_labels(self, repo: str, number: int, labels: Sequence[str]) -> list[GhLabel]:
        """``POST /repos/{o}/{r}/issues/{n}/labels``: add to the issue's labels; answers
        every label the issue now has."""
        response = self.transport.send(
            "POST", f"{_issue_path(repo, number)}/labels", json={"labels": list(labels)}
        )
        return self.transport.models(GhLabel, response)

    def create_pull(
        self, repo: str, *, title: str, body: str, head: str, base: str, draft: bool = False
    ) -> GhPull:
        """``POST /repos/{o}/{r}/pulls``. Never retried (it can duplicate)."""
        payload = {"title": title, "body": body, "head": head, "base": base, "draft": draft}
        response = self.transport.send("POST", f"{_repo_path(repo)}/pulls", json=payload)
        return self.transport.model(GhPull, response)

    def get_pull(self, repo: str, number: int) -> GhPull:
        """``GET /repos/{o}/{r}/pulls/{n}``."""
        return self.transport.model(GhPull, self.transport.send("GET", _pull_path(repo, number)))

    def list_pulls(
        self, repo: str, *, head: str | None = None, state: IssueStateFilter = "open"
    ) -> list[GhPull]:
        """The first 100 pull requests of ``GET /repos/{o}/{r}/pulls`` (``head`` is
        ``owner:branch``)."""
        params = {"state": state, "per_page": "100"}
        if head:
            params["head"] = head
        return self.transport.page(GhPull, f"{_repo_path(repo)}/pulls", params, None).items

    def merge_pull(
        self,
        repo: str,
        number: int,
        *,
        sha: str,
        merge_method: str,
        commit_title: str | None = None,
    ) -> str:
        """``PUT /repos/{o}/{r}/pulls/{n}/merge``, only while the head is ``sha`` (409
        otherwise; 405 when GitHub finds it not mergeable). The merge commit's sha. Sent
        again, GitHub refuses a merged pull request (405): it never merges twice."""
        payload: dict[str, str] = {"sha": sha, "merge_method": merge_method}
        if commit_title:
            payload["commit_title"] = commit_title
        response = self.transport.send("PUT", f"{_pull_path(repo, number)}/merge", json=payload)
        return str(self.transport.json(response)["sha"])

    def update_pull_branch(self, repo: str, number: int, *, expected_head_sha: str) -> None:
        """``PUT /repos/{o}/{r}/pulls/{n}/update-branch``: merge the base into the head
        branch (202: GitHub does it shortly); 422 when the head is no longer
        ``expected_head_sha``."""
        payload = {"expected_head_sha": expected_head_sha}
        self.transport.send("PUT", f"{_pull_path(repo, number)}/update-branch", json=payload)

    def get_pull_diff(self, repo: str, number: int) -> str:
        """``GET /repos/{o}/{r}/pulls/{n}`` as ``application/vnd.github.diff``: the diff."""
        response = self.transport.send(
            "GET", _pull_path(repo, number), headers={"Accept": DIFF_MEDIA_TYPE}
        )
        return response.text

    def list_reviews(self, repo: str, number: int) -> list[GhReview]:
        """The first 100 reviews of a pull request, oldest first."""
        path = f"{_pull_path(repo, number)}/reviews"
        return self.transport.page(GhReview, path, {"per_page": "100"}, None).items

    def list_review_comments(self, repo: str, number: int) -> list[GhReviewComment]:
        """The first 100 review comments of a pull request (``GET .../pulls/{n}/comments``),
        oldest first."""
        path = f"{_pull_path(repo, number)}/comments"
        return self.transport.page(GhReviewComment, path, {"per_page": "100"}, None).items

    def list_check_run_annotations(
        self, repo: str, check_run_id: int, *, per_page: int = 100
    ) -> list[GhAnnotation]:
        """The first ``per_page`` annotations of a check run (``GET
        /repos/{o}/{r}/check-runs/{id}/annotations``)."""
        if check_run_id < 1:
            raise ValueError(f"not a check run id: {check_run_id}")
        path = f"{_repo_path(repo)}/check-runs/{int(check_run_id)}/annotations"
        params = {"per_page": str(_clamp_per_page(per_page))}
        return self.transport.page(GhAnnotation, path, params, None).items

    def list_check_runs(self, repo: str, ref: str) -> GhCheckRuns:
        """``GET /repos/{o}/{r}/commits/{ref}/check-runs`` (the first 100)."""
        path = f"{_repo_path(repo)}/commits/{quote(ref, safe='')}/check-runs"
        return self.transport.model(
            GhCheckRuns, self.transport.send("GET", path, params={"per_page": "100"})
        )

    def get_combined_status(self, repo: str, ref: str) -> GhCombinedStatus:
        """``GET /repos/{o}/{r}/commits/{ref}/status``: the commit statuses, combined."""
        path = f"{_repo_path(repo)}/commits/{quote(ref, safe='')}/status"
        return self.transport.model(GhCombinedStatus, self.transport.send("GET", path))


def _repo_path(repo: str) -> str:
    owner, _, name = repo.strip().partition("/")
    if not owner or not name or "/" in name:
        raise ValueError(f"a repository is OWNER/NAME, not {repo!r}")
    return f"repos/{quote(owner, safe='')}/{quote(name, safe='')}"


def _issue_path(repo: str, number: int) -> str:
    if number < 1:
        raise ValueError(f"not an issue number: {number}")
    return f"{_repo_path(repo)}/issues/{int(number)}"


def _pull_path(repo: str, number: int) -> str:
    if number < 1:
        raise ValueError(f"not a pull request number: {number}")
    return f"{_repo_path(repo)}/pulls/{int(number)}"


def _clamp_per_page(per_page: int) -> int:
    return min(100, max(1, per_page))
