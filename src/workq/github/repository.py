"""Which GitHub repository the GitHub tools act on, and the check that they can.

The repository comes from, in order: the setting (``--github-repo`` /
``WORKQ_GITHUB_REPO``), the database's configured mirror, or the ``origin`` remote (else
the only remote) of the git work tree the server runs in. The token comes from
``GITHUB_TOKEN`` or ``gh auth token``, as for the mirror.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from workq.domain.names import github_repo_of_remote
from workq.errors import GitFailed
from workq.github.auth import (
    GitHubUnreachable,
    SyncSetupError,
    api_url,
    check_repo_name,
    resolve_token,
)
from workq.github.client import GitHubClient
from workq.github.failures import AuthFailed, NotFoundOnGitHub, RateLimited, Unclear
from workq.vcs import git


class GitHubToolsSetup(SyncSetupError):
    """The GitHub tools cannot work yet."""

    code = "GITHUB_SETUP"


def repo_from_work_tree(cwd: Path) -> str:
    """The repository named by the git remote of the work tree ``cwd`` stands in.

    Raises:
        GitHubToolsSetup: not in a git work tree, or no remote that names a repository.
    """
    fix = "run the server inside a clone of the repository, or set --github-repo OWNER/NAME"
    try:
        git.toplevel(cwd)
        names = git.remotes(cwd)
    except GitFailed as exc:
        raise GitHubToolsSetup(
            f"no GitHub repository: {cwd} is not in a git repository", hint=fix
        ) from exc
    chosen = "origin" if "origin" in names else (names[0] if len(names) == 1 else None)
    url = git.remote_url(cwd, chosen) if chosen else None
    repo = github_repo_of_remote(url) if url else None
    if repo is None:
        said = f"remote {chosen} is {url}" if url else "no origin remote"
        raise GitHubToolsSetup(
            f"no GitHub repository: the git repository at {cwd} has {said}", hint=fix
        )
    return repo


@dataclass(frozen=True)
class Connection:
    client: GitHubClient
    repo: str
    login: str


def connect(
    *,
    setting: str | None,
    mirror: Callable[[], str | None],
    cwd: Path,
    env: Mapping[str, str] | None = None,
    timeout: float = 10.0,
) -> Connection:
    """A client whose token GitHub accepts, for a repository it can see.

    Raises:
        GitHubToolsSetup: no token, a refused token, no repository, an unknown one.
        GitHubUnreachable: GitHub did not answer.
    """
    repo = check_repo_name(setting) if setting else (mirror() or repo_from_work_tree(cwd))
    try:
        token = resolve_token(env)
    except SyncSetupError as exc:
        raise GitHubToolsSetup(f"{exc.message} for {repo}", hint=exc.hint, repo=repo) from exc
    client = GitHubClient(token, base_url=api_url(env), timeout=timeout)
    where = client.base_url
    try:
        user = client.get_user()
        found = client.get_repo(repo)
    except AuthFailed as exc:
        client.close()
        raise GitHubToolsSetup(
            f"GitHub at {where} refused the token ({exc.status}) for {repo}: {exc.github_message}",
            hint="set GITHUB_TOKEN to a valid token (or log in with 'gh auth login')",
            repo=repo,
        ) from exc
    except NotFoundOnGitHub as exc:
        client.close()
        raise GitHubToolsSetup(
            f"unknown repository {repo} on {where}, or the token cannot see it",
            hint="check --github-repo OWNER/NAME (or the git remote) and the token's access",
            repo=repo,
        ) from exc
    except (RateLimited, Unclear) as exc:
        client.close()
        raise GitHubUnreachable(
            f"could not reach GitHub at {where} for {repo}: {exc.message}",
            hint="check the network and GITHUB_API_URL; the queue keeps working, and the "
            "GitHub tools work again at the next call that reaches it",
            repo=repo,
        ) from exc
    return Connection(client=client, repo=found.full_name, login=user.login)
