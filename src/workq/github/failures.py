"""The ways a call to GitHub fails. Each carries what the caller needs to decide what to do
next:

- :class:`RateLimited`: wait until ``retry_at`` (``secondary`` tells which limit);
- :class:`AuthFailed`: 401, or a 403 that is not a rate limit; retrying will not help;
- :class:`NotFoundOnGitHub`: 404 or 410 (``gone``: the issue was deleted);
- :class:`MovedOnGitHub`: a 301/302/307/308 (a transferred issue or renamed repository);
- :class:`Unclear`: timeout, connection error, 5xx or an unreadable answer: the request may
  or may not have been applied (``maybe_applied`` is False only when it never left);
- :class:`GitHubRejected`: any other 4xx, with GitHub's message and ``errors``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from workq.domain import dates
from workq.errors import GitHubError


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
