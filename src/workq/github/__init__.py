"""The optional GitHub mirror: a thin REST client (the sync worker builds on it)."""

from __future__ import annotations

from workq.github.client import (
    API_VERSION,
    DEFAULT_API_URL,
    AuthFailed,
    GitHubCallError,
    GitHubClient,
    GitHubRejected,
    MovedOnGitHub,
    NotFoundOnGitHub,
    Page,
    RateLimited,
    RateLimitInfo,
    Unclear,
    rate_limit_retry_at,
)
from workq.github.models import GhComment, GhIssue, GhLabel, GhPermissions, GhRepo, GhUser

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
