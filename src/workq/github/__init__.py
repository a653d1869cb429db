"""The optional GitHub mirror: a thin REST client (the sync worker builds on it)."""

from __future__ import annotations

from workq.github.client import GitHubClient
from workq.github.failures import (
    AuthFailed,
    GitHubCallError,
    GitHubRejected,
    MovedOnGitHub,
    NotFoundOnGitHub,
    RateLimited,
    Unclear,
)
from workq.github.models import GhComment, GhIssue, GhLabel, GhPermissions, GhRepo, GhUser
from workq.github.rate_limits import RateLimitInfo, rate_limit_retry_at
from workq.github.transport import API_VERSION, DEFAULT_API_URL, Page

__all__ = [
    "API_VERSION",
    "DEFAULT_API_URL",
    "AuthFailed",
    "GhComment",
    "GhIssue",
    "GhLabel",
    "GhPermissions",
    "GhRepo",
    "GhUser",
    "GitHubCallError",
    "GitHubClient",
    "GitHubRejected",
    "MovedOnGitHub",
    "NotFoundOnGitHub",
    "Page",
    "RateLimitInfo",
    "RateLimited",
    "Unclear",
    "rate_limit_retry_at",
]
