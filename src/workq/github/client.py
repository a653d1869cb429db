"""A thin synchronous client for the GitHub REST endpoints the mirror uses.

It sends one request per call and never retries, sleeps, caches or follows redirects: the
sync worker owns those decisions. Every failure becomes one of the exceptions below, which
carry what the worker needs to decide what to do next:

- :class:`RateLimited`: wait until ``retry_at`` (``secondary`` tells which limit);
- :class:`AuthFailed`: 401, or a 403 that is not a rate limit; retrying will not help;
- :class:`NotFoundOnGitHub`: 404 or 410 (``gone``: the issue was deleted);
- :class:`MovedOnGitHub`: a 301/302/307/308 (a transferred issue or renamed repository);
- :class:`Unclear`: timeout, connection error, 5xx or an unreadable answer: the request may
  or may not have been applied (``maybe_applied`` is False only when it never left);
- :class:`GitHubRejected`: any other 4xx, with GitHub's message and ``errors``.

The token is only ever placed in the ``Authorization`` header; it is never logged and never
part of an exception or ``repr``.
"""

from __future__ import annotations

import email.utils
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any, Generic, Literal, NoReturn, Self, TypeVar
from urllib.parse import quote

import httpx2
from pydantic import BaseModel, TypeAdapter, ValidationError

from workq import __version__
from workq.domain import dates
from workq.errors import GitHubError
from workq.github.models import (
    GhCheckRuns,
    GhCombinedStatus,
    GhComment,
    GhIssue,
    GhLabel,
    GhPull,
    GhRepo,
    GhReview,
    GhUser,
)

DEFAULT_API_URL = "https://api.github.com"
API_VERSION = "2022-11-28"
DEFAULT_TIMEOUT = 10.0
DIFF_MEDIA_TYPE = "application/vnd.github.diff"
SECONDARY_LIMIT_MIN_WAIT = timedelta(seconds=60)
USER_AGENT = f"workq/{__version__}"
_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})

IssueStateFilter = Literal["open", "closed", "all"]
IssueSort = Literal["created", "updated", "comments"]
SortDirection = Literal["asc", "desc"]
IssueState = Literal["open", "closed"]
StateReason = Literal["completed", "not_planned", "reopened", "duplicate"]

_SECONDARY_PATTERN = re.compile(r"secondary rate limit|abuse detection", re.IGNORECASE)

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")
_LIST_ADAPTERS: dict[type[BaseModel], TypeAdapter[Any]] = {}


# --------------------------------------------------------------------------------------------
# Errors


class GitHubCallError(GitHubError):
    """A GitHub API call failed."""

    def __init__(
        self,
        message: str | None = None,
        *,
        method: str | None = None,
        path: str | None = None,
        status: int | None = None,
        request_id: str | None = None,
        github_message: str | None = None,
        hint: str | None = None,
        **facts: Any,
    ) -> None:
        known = {
            "method": method,
            "path": path,
            "status": status,
            "request_id": request_id,
            "github_message": github_message,
        }
        merged = {k: v for k, v in known.items() if v is not None}
        merged.update(facts)
        super().__init__(message, hint=hint, **merged)
        self.method = method
        self.path = path
        self.status = status
        self.request_id = request_id
        self.github_message = github_message


class RateLimited(GitHubCallError):
    """GitHub's rate limit was hit; nothing was applied."""

    code = "GITHUB_RATE_LIMITED"
    hint = "retry the request after retry_at, not sooner"

    def __init__(
        self,
        message: str | None = None,
        *,
        retry_at: datetime,
        secondary: bool,
        **kwargs: Any,
    ) -> None:
        super().__init__(message, retry_at=dates.iso(retry_at), secondary=secondary, **kwargs)
        self.retry_at = retry_at
        self.secondary = secondary


class AuthFailed(GitHubCallError):
    """GitHub refused the token, or the token may not do this."""

    code = "GITHUB_AUTH_FAILED"
    hint = (
        "check the token (GITHUB_TOKEN or 'gh auth token') and its access to the repository; "
        "retrying will not help"
    )


class NotFoundOnGitHub(GitHubCallError):
    """GitHub has no such repository or issue (or the token cannot see it)."""

    code = "GITHUB_NOT_FOUND"

    def __init__(self, message: str | None = None, *, gone: bool = False, **kwargs: Any) -> None:
        super().__init__(message, gone=gone, **kwargs)
        self.gone = gone


class MovedOnGitHub(GitHubCallError):
    """The issue or repository moved (GitHub answered with a redirect)."""

    code = "GITHUB_MOVED"
    hint = "look the object up at its new location"

    def __init__(
        self, message: str | None = None, *, location: str | None = None, **kwargs: Any
    ) -> None:
        super().__init__(message, location=location, **kwargs)
        self.location = location


class Unclear(GitHubCallError):
    """The outcome is unknown: the request may or may not have been applied."""

    code = "GITHUB_UNCLEAR"
    hint = "read the state back before repeating a create; updates may simply be sent again"

    def __init__(
        self,
        message: str | None = None,
        *,
        maybe_applied: bool = True,
        retry_at: datetime | None = None,
        **kwargs: Any,
    ) -> None:
        if retry_at is not None:
            kwargs["retry_at"] = dates.iso(retry_at)
        super().__init__(message, maybe_applied=maybe_applied, **kwargs)
        self.maybe_applied = maybe_applied
        self.retry_at = retry_at


class GitHubRejected(GitHubCallError):
    """GitHub rejected the request."""

    code = "GITHUB_REJECTED"
    hint = "the request is invalid as sent; retrying it unchanged will not help"

    def __init__(
        self,
        message: str | None = None,
        *,
        errors: Sequence[Mapping[str, Any]] = (),
        **kwargs: Any,
    ) -> None:
        error_list = [dict(e) for e in errors]
        if error_list:
            kwargs["errors"] = error_list
        super().__init__(message, **kwargs)
        self.errors = error_list


# --------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class RateLimitInfo:
    """The ``x-ratelimit-*`` headers of a response (or the core entry of ``/rate_limit``)."""

    limit: int
    remaining: int
    reset: datetime
    used: int | None = None
    resource: str | None = None

    @classmethod
    def from_headers(cls, headers: Mapping[str, str]) -> RateLimitInfo | None:
        try:
            limit = int(headers["x-ratelimit-limit"])
            remaining = int(headers["x-ratelimit-remaining"])
            reset = datetime.fromtimestamp(int(headers["x-ratelimit-reset"]), UTC)
        except (KeyError, ValueError, OverflowError, OSError):
            return None
        used_raw = headers.get("x-ratelimit-used")
        used = int(used_raw) if used_raw and used_raw.isdigit() else None
        return cls(limit, remaining, reset, used, headers.get("x-ratelimit-resource"))


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a list. Follow ``next_url`` (exactly as GitHub gave it) for the next one.

    ``not_modified`` is True when GitHub answered 304 to ``If-None-Match``: ``items`` is then
    empty and means "no change since that ETag", not "nothing there".
    """

    items: list[T]
    next_url: str | None = None
    etag: str | None = None
    not_modified: bool = False

    @property
    def has_more(self) -> bool:
        return self.next_url is not None


def parse_retry_after(value: str | None, now: datetime) -> datetime | None:
    """A ``retry-after`` header (seconds, or an HTTP date) as a moment; None if absent/bad."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if text.isdigit():
        return now + timedelta(seconds=int(text))
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    return max(dates.utc(when), now)


def rate_limit_retry_at(
    status: int,
    headers: Mapping[str, str],
    message: str | None,
    now: datetime,
) -> tuple[datetime, bool] | None:
    """Whether a 403/429 is a rate limit: ``(retry_at, secondary)``, or None if it is not.

    The rule: a ``retry-after`` header wins; else ``x-ratelimit-remaining: 0`` means wait for
    ``x-ratelimit-reset``; else a "secondary rate limit" message (or any 429) means at least
    60 seconds.
    """
    if status not in (403, 429):
        return None
    remaining_zero = headers.get("x-ratelimit-remaining", "").strip() == "0"
    secondary_text = bool(message and _SECONDARY_PATTERN.search(message))
    retry_after = parse_retry_after(headers.get("retry-after"), now)
    if retry_after is not None:
        return retry_after, secondary_text or not remaining_zero
    if remaining_zero:
        try:
            reset = datetime.fromtimestamp(int(headers.get("x-ratelimit-reset", "")), UTC)
        except (ValueError, OverflowError, OSError):
            reset = now + SECONDARY_LIMIT_MIN_WAIT
        return max(reset, now), False
    if secondary_text or status == 429:
        return now + SECONDARY_LIMIT_MIN_WAIT, True
    return None


# --------------------------------------------------------------------------------------------
# The client


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
        if not token or not token.strip():
            raise ValueError("a GitHub token is required")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._base = httpx2.URL(self.base_url + "/")
        if trust_env is None:
            trust_env = self._base.host not in _LOOPBACK_HOSTS
        self._http = httpx2.Client(
            base_url=self._base,
            headers={
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": API_VERSION,
                "User-Agent": user_agent,
                "Authorization": f"Bearer {token.strip()}",
            },
            timeout=httpx2.Timeout(timeout),
            follow_redirects=False,
            trust_env=trust_env,
            transport=transport,
        )
        self.last_rate_limit: RateLimitInfo | None = None
        """The ``x-ratelimit-*`` headers of the latest answer that had them."""

    def __repr__(self) -> str:
        return f"GitHubClient(base_url={self.base_url!r})"

    def close(self) -> None:
        self._http.close()

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
        return self._model(GhUser, self._send("GET", "user"))

    def get_repo(self, repo: str) -> GhRepo:
        """``GET /repos/{o}/{r}``, with the token's ``permissions``."""
        return self._model(GhRepo, self._send("GET", _repo_path(repo)))

    def get_rate_limit(self) -> RateLimitInfo:
        """``GET /rate_limit`` (costs no quota): the core limit."""
        data = self._json(self._send("GET", "rate_limit"))
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
            return self._page(GhIssue, self._page_url(page_url), None, etag)
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
        return self._page(GhIssue, f"{_repo_path(repo)}/issues", params, etag)

    def get_issue(self, repo: str, number: int) -> GhIssue:
        """``GET /repos/{o}/{r}/issues/{n}``."""
        return self._model(GhIssue, self._send("GET", _issue_path(repo, number)))

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
        response = self._send("POST", f"{_repo_path(repo)}/issues", json=payload)
        return self._model(GhIssue, response)

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
        response = self._send("PATCH", _issue_path(repo, number), json=payload)
        return self._model(GhIssue, response)

    def list_labels(self, repo: str) -> list[GhLabel]:
        """Every label of the repository (``GET /repos/{o}/{r}/labels``, following ``Link``
        next; one request per 100 labels)."""
        labels: list[GhLabel] = []
        page = self._page(GhLabel, f"{_repo_path(repo)}/labels", {"per_page": "100"}, None)
        labels.extend(page.items)
        while page.next_url is not None:
            page = self._page(GhLabel, self._page_url(page.next_url), None, None)
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
            response = self._send("POST", f"{_repo_path(repo)}/labels", json=payload)
        except GitHubRejected as exc:
            if exc.status == 422 and any(e.get("code") == "already_exists" for e in exc.errors):
                return None
            raise
        return self._model(GhLabel, response)

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
            return self._page(GhComment, self._page_url(page_url), None, None)
        params = {"per_page": str(_clamp_per_page(per_page))}
        if since is not None:
            params["since"] = dates.iso_z(since)
        return self._page(GhComment, f"{_issue_path(repo, number)}/comments", params, None)

    def create_comment(self, repo: str, number: int, body: str) -> GhComment:
        """``POST /repos/{o}/{r}/issues/{n}/comments``. Never retried (it can duplicate)."""
        response = self._send("POST", f"{_issue_path(repo, number)}/comments", json={"body": body})
        return self._model(GhComment, response)

    def add_labels(self, repo: str, number: int, labels: Sequence[str]) -> list[GhLabel]:
        """``POST /repos/{o}/{r}/issues/{n}/labels``: add to the issue's labels; answers
        every label the issue now has."""
        response = self._send(
            "POST", f"{_issue_path(repo, number)}/labels", json={"labels": list(labels)}
        )
        return self._models(GhLabel, response)

    def create_pull(
        self, repo: str, *, title: str, body: str, head: str, base: str, draft: bool = False
    ) -> GhPull:
        """``POST /repos/{o}/{r}/pulls``. Never retried (it can duplicate)."""
        payload = {"title": title, "body": body, "head": head, "base": base, "draft": draft}
        response = self._send("POST", f"{_repo_path(repo)}/pulls", json=payload)
        return self._model(GhPull, response)

    def get_pull(self, repo: str, number: int) -> GhPull:
        """``GET /repos/{o}/{r}/pulls/{n}``."""
        return self._model(GhPull, self._send("GET", _pull_path(repo, number)))

    def list_pulls(
        self, repo: str, *, head: str | None = None, state: IssueStateFilter = "open"
    ) -> list[GhPull]:
        """The first 100 pull requests of ``GET /repos/{o}/{r}/pulls`` (``head`` is
        ``owner:branch``)."""
        params = {"state": state, "per_page": "100"}
        if head:
            params["head"] = head
        return self._page(GhPull, f"{_repo_path(repo)}/pulls", params, None).items

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
        response = self._send("PUT", f"{_pull_path(repo, number)}/merge", json=payload)
        return str(self._json(response)["sha"])

    def update_pull_branch(self, repo: str, number: int, *, expected_head_sha: str) -> None:
        """``PUT /repos/{o}/{r}/pulls/{n}/update-branch``: merge the base into the head
        branch (202: GitHub does it shortly); 422 when the head is no longer
        ``expected_head_sha``."""
        payload = {"expected_head_sha": expected_head_sha}
        self._send("PUT", f"{_pull_path(repo, number)}/update-branch", json=payload)

    def get_pull_diff(self, repo: str, number: int) -> str:
        """``GET /repos/{o}/{r}/pulls/{n}`` as ``application/vnd.github.diff``: the diff."""
        response = self._send("GET", _pull_path(repo, number), headers={"Accept": DIFF_MEDIA_TYPE})
        return response.text

    def list_reviews(self, repo: str, number: int) -> list[GhReview]:
        """The first 100 reviews of a pull request, oldest first."""
        path = f"{_pull_path(repo, number)}/reviews"
        return self._page(GhReview, path, {"per_page": "100"}, None).items

    def list_check_runs(self, repo: str, ref: str) -> GhCheckRuns:
        """``GET /repos/{o}/{r}/commits/{ref}/check-runs`` (the first 100)."""
        path = f"{_repo_path(repo)}/commits/{quote(ref, safe='')}/check-runs"
        return self._model(GhCheckRuns, self._send("GET", path, params={"per_page": "100"}))

    def get_combined_status(self, repo: str, ref: str) -> GhCombinedStatus:
        """``GET /repos/{o}/{r}/commits/{ref}/status``: the commit statuses, combined."""
        path = f"{_repo_path(repo)}/commits/{quote(ref, safe='')}/status"
        return self._model(GhCombinedStatus, self._send("GET", path))

    # plumbing -------------------------------------------------------------------------------

    def _page_url(self, url: str) -> httpx2.URL:
        """A ``Link`` URL, refused unless it points into this API (the token goes with it)."""
        target = httpx2.URL(url)
        if target.is_relative_url:
            return self._base.join(url)
        same_origin = (
            target.scheme == self._base.scheme
            and target.host == self._base.host
            and target.port == self._base.port
        )
        if not same_origin or not target.path.startswith(self._base.path):
            raise GitHubRejected(
                "refusing to follow a page link outside the API base URL",
                hint="check GITHUB_API_URL",
                link=str(target.copy_with(query=None)),
            )
        return target

    def _page(
        self,
        model: type[M],
        url: str | httpx2.URL,
        params: Mapping[str, str] | None,
        etag: str | None,
    ) -> Page[M]:
        headers = {"If-None-Match": etag} if etag else None
        response = self._send("GET", url, params=params, headers=headers, allow_304=True)
        if response.status_code == 304:
            return Page([], None, response.headers.get("etag") or etag, not_modified=True)
        items = self._models(model, response)
        next_url = response.links.get("next", {}).get("url")
        return Page(items, next_url, response.headers.get("etag"))

    def _send(
        self,
        method: str,
        url: str | httpx2.URL,
        *,
        params: Mapping[str, str] | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        allow_304: bool = False,
    ) -> httpx2.Response:
        request = self._http.build_request(method, url, params=params, json=json, headers=headers)
        path = request.url.raw_path.decode("ascii", "replace")
        try:
            response = self._http.send(request)
        except (httpx2.ConnectError, httpx2.ConnectTimeout) as exc:
            raise Unclear(
                f"could not connect to GitHub for {method} {path}: {type(exc).__name__}",
                maybe_applied=False,
                method=method,
                path=path,
            ) from exc
        except httpx2.PoolTimeout as exc:
            raise Unclear(
                f"no connection free for {method} {path}",
                maybe_applied=False,
                method=method,
                path=path,
            ) from exc
        except httpx2.TimeoutException as exc:
            raise Unclear(
                f"GitHub did not answer {method} {path} within {self.timeout:g} s",
                method=method,
                path=path,
            ) from exc
        except httpx2.TransportError as exc:
            raise Unclear(
                f"the connection failed during {method} {path}: {type(exc).__name__}",
                method=method,
                path=path,
            ) from exc

        rate = RateLimitInfo.from_headers(response.headers)
        if rate is not None:
            self.last_rate_limit = rate
        if 200 <= response.status_code < 300 or (allow_304 and response.status_code == 304):
            return response
        self._raise_for(method, path, response)

    def _raise_for(self, method: str, path: str, response: httpx2.Response) -> NoReturn:
        status = response.status_code
        data = _json_or_none(response)
        gh_message: str | None = None
        errors: list[Mapping[str, Any]] = []
        if isinstance(data, dict):
            if isinstance(data.get("message"), str):
                gh_message = data["message"]
            raw_errors = data.get("errors")
            if isinstance(raw_errors, list):
                errors = [e if isinstance(e, dict) else {"message": str(e)} for e in raw_errors]
        elif response.text.strip():
            gh_message = " ".join(re.sub(r"<[^>]+>", " ", response.text).split())[:200]
        facts: dict[str, Any] = {
            "method": method,
            "path": path,
            "status": status,
            "request_id": response.headers.get("x-github-request-id"),
            "github_message": gh_message,
        }
        said = f": {gh_message}" if gh_message else ""
        where = f"{method} {path}"
        now = datetime.now(UTC)

        limited = rate_limit_retry_at(status, response.headers, gh_message, now)
        if limited is not None:
            retry_at, secondary = limited
            which = "secondary" if secondary else "primary"
            raise RateLimited(
                f"GitHub {which} rate limit on {where}; retry at {dates.stamp(retry_at)}",
                retry_at=retry_at,
                secondary=secondary,
                **facts,
            )
        if status in (401, 403):
            raise AuthFailed(f"GitHub answered {status} to {where}{said}", **facts)
        if status in (404, 410):
            raise NotFoundOnGitHub(
                f"GitHub answered {status} to {where}{said}", gone=status == 410, **facts
            )
        if status in (301, 302, 303, 307, 308):
            location = response.headers.get("location")
            raise MovedOnGitHub(
                f"GitHub answered {status} to {where}: moved to {location}",
                location=location,
                **facts,
            )
        if status >= 500 or status < 200:
            raise Unclear(
                f"GitHub answered {status} to {where}{said}",
                retry_at=parse_retry_after(response.headers.get("retry-after"), now),
                **facts,
            )
        raise GitHubRejected(f"GitHub answered {status} to {where}{said}", errors=errors, **facts)

    def _json(self, response: httpx2.Response) -> Any:
        try:
            return response.json()
        except ValueError as exc:
            raise Unclear(
                f"GitHub's answer to {response.request.method} was not JSON",
                method=response.request.method,
                path=response.request.url.raw_path.decode("ascii", "replace"),
                status=response.status_code,
            ) from exc

    def _model(self, model: type[M], response: httpx2.Response) -> M:
        try:
            return model.model_validate(self._json(response))
        except ValidationError as exc:
            raise _unreadable(response, model.__name__) from exc

    def _models(self, model: type[M], response: httpx2.Response) -> list[M]:
        adapter = _LIST_ADAPTERS.get(model)
        if adapter is None:
            adapter = _LIST_ADAPTERS[model] = TypeAdapter(list[model])  # type: ignore[valid-type]
        try:
            return list(adapter.validate_python(self._json(response)))
        except ValidationError as exc:
            raise _unreadable(response, f"list of {model.__name__}") from exc


def _unreadable(response: httpx2.Response, what: str) -> Unclear:
    return Unclear(
        f"GitHub's answer to {response.request.method} is not a {what}",
        method=response.request.method,
        path=response.request.url.raw_path.decode("ascii", "replace"),
        status=response.status_code,
    )


def _json_or_none(response: httpx2.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


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
