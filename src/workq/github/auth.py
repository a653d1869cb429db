"""Before the first push: find the token, reach GitHub, and check the repository (contract C's
fail-fast rule). The token is read from ``GITHUB_TOKEN`` or ``gh auth token`` and never
printed, logged or put in an error."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

from workq.config import token_word
from workq.domain import dates, names
from workq.errors import GitHubError
from workq.github.client import GitHubClient
from workq.github.failures import AuthFailed, NotFoundOnGitHub, RateLimited, Unclear
from workq.github.models import GhRepo, GhUser
from workq.github.transport import DEFAULT_API_URL


class SyncSetupError(GitHubError):
    """The GitHub mirror cannot start."""

    code = "GITHUB_SETUP"


class GitHubUnreachable(SyncSetupError):
    """GitHub could not be reached to check the token and the repository."""

    code = "GITHUB_UNREACHABLE"
    hint = "check the network and GITHUB_API_URL; the queue itself keeps working"


def check_repo_name(repo: str) -> str:
    repo = repo.strip()
    if not names.is_github_repo(repo):
        raise SyncSetupError(
            f"a repository is OWNER/NAME, not {repo!r}", hint="e.g. --repo acme/widgets"
        )
    return repo


def api_url(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    return (env.get("GITHUB_API_URL") or "").strip() or DEFAULT_API_URL


def resolve_token(env: Mapping[str, str] | None = None) -> str:
    """``GITHUB_TOKEN``, else what ``gh auth token`` prints.

    Raises:
        SyncSetupError: neither gives a token.
    """
    env = os.environ if env is None else env
    token = (env.get("GITHUB_TOKEN") or "").strip()
    if token:
        try:
            return token_word(token)
        except ValueError:
            raise SyncSetupError(
                "GITHUB_TOKEN is not a token: it holds a space, newline or control character",
                hint="set GITHUB_TOKEN to the token alone (one word)",
            ) from None
    gh = shutil.which("gh")
    if gh is not None:
        try:
            done = subprocess.run(
                [gh, "auth", "token"],
                capture_output=True,
                text=True,
                timeout=15,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired):
            done = None
        if done is not None and done.returncode == 0 and done.stdout.strip():
            return done.stdout.strip()
    raise SyncSetupError(
        "no GitHub token",
        hint="set GITHUB_TOKEN, or log in with 'gh auth login' so that 'gh auth token' works",
    )


@dataclass(frozen=True)
class Access:
    user: GhUser
    repo: GhRepo


def preflight(client: GitHubClient, repo: str) -> Access:
    """Who the token is, and that it may write issues of ``repo``.

    Raises:
        SyncSetupError: the token is refused, the repository is unknown or read-only.
        GitHubUnreachable: GitHub did not answer (nothing is known yet).
    """
    repo = check_repo_name(repo)
    where = client.base_url
    try:
        user = client.get_user()
        found = client.get_repo(repo)
    except AuthFailed as exc:
        raise SyncSetupError(
            f"GitHub at {where} refused the token ({exc.status})",
            hint="check GITHUB_TOKEN (or 'gh auth status'); the token needs the repo scope "
            "or Issues read/write",
        ) from exc
    except NotFoundOnGitHub as exc:
        raise SyncSetupError(
            f"unknown repository {repo} on {where}, or the token cannot see it",
            hint="check --repo OWNER/NAME and the token's access",
            repo=repo,
        ) from exc
    except RateLimited as exc:
        raise GitHubUnreachable(
            f"GitHub's rate limit is exhausted until {dates.stamp(exc.retry_at)}",
            hint="wait, or use another token",
        ) from exc
    except Unclear as exc:
        raise GitHubUnreachable(f"could not reach GitHub at {where}: {exc.message}") from exc
    if not found.can_push:
        raise SyncSetupError(
            f"the token of {user.login} has no push access to {found.full_name}",
            hint="grant it write access (Issues: read and write), or use another token",
            repo=found.full_name,
        )
    if found.archived:
        raise SyncSetupError(f"{found.full_name} is archived: its issues cannot change")
    if not found.has_issues:
        raise SyncSetupError(
            f"{found.full_name} has issues turned off", hint="turn them on in its settings"
        )
    return Access(user=user, repo=found)
