"""The GitHub tools' seven (contract C, profile ``github-tools``), by their names and
parameters, and the workflow server's submit_pr, over workq's REST client
(``workq.github.actions``). Every failure is ``isError`` with GitHub's own message kept; a
rate limit names ``retry_after`` seconds and is never retried here."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from workq.errors import InvalidInput
from workq.github_schemas import (
    DIFF_DEFAULT_MAX,
    IssueClosed,
    IssueDetail,
    IssueList,
    LabelsAdded,
    PullCreated,
    PullDiff,
    PullStatus,
    Submitted,
)
from workq.server.params import Number
from workq.server.registry import Registry
from workq.server.results import clip, ok, worded

# GitHub is an open world: say only what differs from the spec's defaults.
READS_GITHUB = ToolAnnotations(read_only_hint=True)
WRITES_GITHUB = ToolAnnotations(destructive_hint=False)
CLOSES = ToolAnnotations(destructive_hint=False, idempotent_hint=True)

GhNumber = Annotated[int, Field(strict=True, ge=1, le=2**31 - 1)]
Branch = Annotated[str, Field(min_length=1, max_length=255)]
LabelName = Annotated[str, Field(min_length=1, max_length=50)]


def _issues_text(found: IssueList) -> str:
    lines = [
        f"#{i.number} [{i.state}] {clip(i.title)}"
        + (f" ({', '.join(i.labels)})" if i.labels else "")
        for i in found.issues
    ]
    if found.has_more:
        lines.append(f"Showing {found.count}; raise limit to see more")
    return "\n".join(lines)


def _issue_text(issue: IssueDetail) -> str:
    text = f"#{issue.number} [{issue.state}] {issue.title}\n{issue.url}"
    if issue.labels:
        text += f"\nlabels: {', '.join(issue.labels)}"
    if issue.body:
        text += f"\n\n{issue.body}"
    return text


def _status_text(found: PullStatus) -> str:
    lines = [
        f"PR #{found.pr_number} [{found.state}] mergeable: "
        + {True: "yes", False: "no", None: "unknown"}[found.mergeable]
        + f" ({found.mergeable_state})",
        f"checks: {found.checks_passed} passed, {found.checks_failed} failed, "
        f"{found.checks_pending} pending",
        f"reviews: {found.approvals} approved, {found.changes_requested} changes requested",
    ]
    lines += [f"  {c.name}: {c.conclusion or c.status}" for c in found.checks]
    if found.not_mergeable_because:
        lines.append("not mergeable: " + "; ".join(found.not_mergeable_because))
    return "\n".join(lines)


def register(reg: Registry) -> None:
    _register_github_tools(reg)
    _register_submit_pr(reg)


def _register_github_tools(reg: Registry) -> None:
    """Contract C's seven."""
    state = reg.state  # github_list_issues has a parameter named state: it uses reg.state

    @reg.tool(WRITES_GITHUB)
    def github_create_pr(
        title: Annotated[str, Field(min_length=1, max_length=256)],
        body: Annotated[str, Field(max_length=65_536)],
        base: Branch,
        head: Branch,
        draft: bool = False,
    ) -> Annotated[CallToolResult, PullCreated]:
        """Open a pull request from head into base (draft if asked)."""
        from workq.github import actions

        with worded("Could not create the pull request"):
            link = state.github.check(state.mirror_repo)
            made = actions.create_pr(
                link.client, link.repo, title=title, body=body, base=base, head=head, draft=draft
            )
        kind = "draft pull request" if made.draft else "pull request"
        return ok(f"Created {kind} #{made.pr_number}: {made.url}", made)

    @reg.tool(READS_GITHUB)
    def github_list_issues(
        label: Annotated[LabelName | None, Field(description="Only issues with this label")] = None,
        state: Literal["open", "closed", "all"] = "open",
        limit: Annotated[int, Field(strict=True, ge=1, le=100)] = 30,
    ) -> Annotated[CallToolResult, IssueList]:
        """GitHub issues of the repository (pull requests left out), newest first."""
        from workq.github import actions

        with worded("Could not list GitHub issues"):
            link = reg.state.github.check(reg.state.mirror_repo)
            found = actions.list_issues(
                link.client, link.repo, label=label, state=state, limit=limit
            )
        if not found.issues:
            return ok("No issues match", found)
        return ok(_issues_text(found), found)

    @reg.tool(READS_GITHUB)
    def github_get_issue(issue_number: GhNumber) -> Annotated[CallToolResult, IssueDetail]:
        """One GitHub issue in full: body, state, labels, assignees, comment count."""
        from workq.github import actions

        with worded(f"Could not read GitHub issue #{issue_number}"):
            link = state.github.check(state.mirror_repo)
            issue = actions.get_issue(link.client, link.repo, issue_number)
        return ok(_issue_text(issue), issue)

    @reg.tool(READS_GITHUB)
    def github_pr_status(pr_number: GhNumber) -> Annotated[CallToolResult, PullStatus]:
        """A pull request's checks (names and conclusions), reviews, and whether it can
        merge, with the reasons when it cannot."""
        from workq.github import actions

        with worded(f"Could not read the status of pull request #{pr_number}"):
            link = state.github.check(state.mirror_repo)
            found = actions.pr_status(link.client, link.repo, pr_number)
        return ok(_status_text(found), found)

    @reg.tool(READS_GITHUB)
    def github_get_pr_diff(
        pr_number: GhNumber,
        max_size: Annotated[
            int, Field(strict=True, ge=1_000, le=10_000_000, description="Bytes kept")
        ] = DIFF_DEFAULT_MAX,
    ) -> Annotated[CallToolResult, PullDiff]:
        """A pull request's unified diff, cut at max_size bytes with a warning."""
        from workq.github import actions

        with worded(f"Could not read the diff of pull request #{pr_number}"):
            link = state.github.check(state.mirror_repo)
            found = actions.pr_diff(link.client, link.repo, pr_number, max_size)
        text = f"WARNING: {found.warning}\n\n{found.diff}" if found.warning else found.diff
        return ok(text or f"Pull request #{pr_number} changes nothing", found)

    @reg.tool(WRITES_GITHUB)
    def github_add_labels(
        issue_number: GhNumber,
        labels: Annotated[list[LabelName], Field(min_length=1, max_length=20)],
    ) -> Annotated[CallToolResult, LabelsAdded]:
        """Add labels to an issue or pull request; labels the repository lacks are
        created first."""
        from workq.github import actions

        with worded(f"Could not label GitHub issue #{issue_number}"):
            link = state.github.check(state.mirror_repo)
            done = actions.add_labels(link.client, link.repo, issue_number, labels)
        text = f"Issue #{issue_number} labels: {', '.join(done.labels)}"
        if done.created:
            text += f"\nCreated labels: {', '.join(done.created)}"
        return ok(text, done)

    @reg.tool(CLOSES)
    def github_close_issue(
        issue_number: GhNumber,
        comment: Annotated[str | None, Field(max_length=65_536)] = None,
    ) -> Annotated[CallToolResult, IssueClosed]:
        """Close an issue as completed, with an optional comment first. Closing a closed
        issue succeeds and changes nothing."""
        from workq.github import actions

        with worded(f"Could not close GitHub issue #{issue_number}"):
            link = state.github.check(state.mirror_repo)
            done = actions.close_issue(link.client, link.repo, issue_number, comment)
        if done.already_closed:
            return ok(f"Issue #{issue_number} was already closed", done)
        return ok(f"Closed issue #{issue_number}", done)


def _register_submit_pr(reg: Registry) -> None:
    """The workflow server's submit_pr (contract E)."""
    state = reg.state

    @reg.tool(WRITES_GITHUB)
    def submit_pr(
        title: Annotated[str, Field(min_length=1, max_length=256)],
        description: Annotated[str | None, Field(max_length=60_000)] = None,
        labels: Annotated[list[LabelName] | None, Field(max_length=20)] = None,
        number: Annotated[
            Number | None, Field(description="Default: the one issue this session holds")
        ] = None,
    ) -> Annotated[CallToolResult, Submitted]:
        """Push the issue's branch (the checked-out one) and open its pull request; the
        body names the issue and closes its GitHub twin (Fixes #N). The pull request is
        recorded on the issue; merging it completes the issue at the next sync."""
        from workq.github import submit
        from workq.services.plans import workflow

        q = state.queue()
        with worded("Could not submit the pull request"):
            by = state.authority()
            if number is None:
                held = workflow.status(q, None, by)
                if len(held) != 1:
                    raise InvalidInput(
                        f"this session holds {len(held)} issues: say which with number",
                        field="number",
                    )
                number = held[0].issue_number
            link = state.github.check(state.mirror_repo)
            done = submit.submit(
                q,
                link.client,
                link.repo,
                number,
                title=title,
                description=description,
                labels=labels or (),
                cwd=state.github.cwd,
                by=by,
                actor=state.run_id,
            )
        text = f"Opened pull request #{done.pr_number} for issue #{number}: {done.pr_url}"
        if done.reused:
            text = (
                f"Pull request #{done.pr_number} of {done.branch} was already open: {done.pr_url}"
            )
        text += f"\nPushed {done.branch} (base {done.base})"
        if done.fixes is not None:
            text += f"; closes GitHub issue #{done.fixes} when merged"
        return ok(text, done)
