"""Contract E's submit_pr: push the issue's branch and open its pull request, with a body
that names the workq issue and closes its GitHub twin (``Fixes #N``) when it is mirrored.
The pull request is recorded on the issue, and a progress comment says so (which the
mirror carries to the twin)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from workq.domain import names
from workq.domain.authority import Authority
from workq.domain.decisions import Action
from workq.errors import InvalidInput
from workq.github import actions
from workq.github.client import GitHubClient
from workq.github.failures import GitHubRejected
from workq.github.models import GhPull
from workq.github_schemas import Submitted
from workq.schemas import Issue
from workq.services.handle import Queue
from workq.services.queue import door, issues, notes
from workq.services.sync import mirror, pulls
from workq.services.workspaces import worktrees
from workq.vcs import git

REMOTE = "origin"


def issue_branch(q: Queue, number: int, cwd: Path) -> tuple[Path, str]:
    """Where an issue's work is and on which branch: its worktree when it has one (a
    worktree per claim), else the branch checked out where the server runs.

    Raises:
        InvalidInput: a detached HEAD.
    """
    workspace = worktrees.get_for_issue(q, number)
    if workspace is not None and Path(workspace.path).is_dir():
        return Path(workspace.path), workspace.branch
    branch = git.current_branch(cwd)
    if branch is None:
        raise InvalidInput(
            f"the work tree at {cwd} has no branch checked out (detached HEAD)",
            hint="check out the issue's branch, then call submit_pr again",
        )
    return cwd, branch


def pr_body(issue: Issue, description: str | None, fixes: int | None) -> str:
    parts = [description.strip()] if description and description.strip() else []
    parts.append(f"workq issue #{issue.number}: {issue.title}")
    if fixes is not None:
        parts.append(f"Fixes #{fixes}")
    parts.append(f"<!-- workq:issue={issue.id} -->")
    return "\n\n".join(parts) + "\n"


def _open_or_find(
    client: GitHubClient, repo: str, *, title: str, body: str, head: str, base: str
) -> tuple[GhPull, bool]:
    try:
        return client.create_pull(repo, title=title, body=body, head=head, base=base), False
    except GitHubRejected as exc:
        exists = any("already exists" in str(e.get("message", "")) for e in exc.errors)
        if not exists:
            raise
        owner = names.owner(repo)
        found = client.list_pulls(repo, head=f"{owner}:{head}")
        if not found:
            raise
        return found[0], True


def submit(
    q: Queue,
    client: GitHubClient,
    repo: str,
    number: int,
    *,
    title: str,
    description: str | None,
    labels: Sequence[str],
    cwd: Path,
    by: Authority,
    actor: str,
) -> Submitted:
    """Push, open (or find the open one), label, record: each external write asked of the
    door first (the live holder of the issue's claim, not planning, nothing it waits on:
    the ``land`` row of domain/decisions.py), and the record made in a transaction that
    asks it again.

    Raises:
        InvalidInput: a detached HEAD, or the base branch checked out.
        GitFailed: the push failed (git's message).
        GitHubCallError: GitHub refused (its message kept).
    """
    door.ask(q, Action.LAND, number, by)
    issue = issues.get(q, number)
    where, branch = issue_branch(q, number, cwd)
    with actions.retry_after_seconds():
        base = client.get_repo(repo).default_branch
    if branch == base:
        raise InvalidInput(
            f"the checked-out branch is {base}, the repository's base branch",
            hint="commit the issue's work on its own branch, then call submit_pr again",
        )
    door.ask(q, Action.LAND, number, by)
    git.push(where, REMOTE, branch)
    link = mirror.github_link(q, number)
    fixes = link.gh_number if link is not None and link.repo.lower() == repo.lower() else None
    body = pr_body(issue, description, fixes)
    door.ask(q, Action.LAND, number, by)
    with actions.retry_after_seconds():
        pull, reused = _open_or_find(client, repo, title=title, body=body, head=branch, base=base)
    door.ask(q, Action.LAND, number, by)
    added = actions.add_labels(client, repo, pull.number, labels).labels if labels else []
    pulls.opened(
        q,
        number,
        repo=repo,
        pr_number=pull.number,
        url=pull.html_url,
        branch=branch,
        by=by,
        actor=actor,
    )
    notes.comment(
        q, number, f"Pull request #{pull.number}: {pull.html_url}", kind="progress", author=actor
    )
    return Submitted(
        pr_number=pull.number,
        pr_url=pull.html_url,
        issue_number=number,
        branch=branch,
        base=base,
        fixes=fixes,
        labels=added,
        reused=reused,
    )
