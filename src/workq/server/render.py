"""The text an agent reads: one line per fact, seed 002's wording first."""

from __future__ import annotations

from collections.abc import Sequence

from workq.schemas import Issue, IssueListItem, IssueSummary, ReadyIssue
from workq.server.results import clip, when


def summary_line(item: IssueSummary) -> str:
    line = f"#{item.number} [{item.status.value}] {item.priority.value} {item.issue_type.value}"
    line += f": {clip(item.title)}"
    if item.claimed_by:
        line += f" (claimed by {item.claimed_by})"
    if not isinstance(item, IssueListItem):
        return line + (" (blocked)" if item.is_blocked else "")
    if item.blocked_reason is not None:
        line += f" (blocked: {clip(item.blocked_reason)})"
    if item.waiting_on:
        line += " (waiting on " + ", ".join(f"#{n}" for n in item.waiting_on) + ")"
    return line


def page_footer(tool: str, shown: int, next_cursor: str | None) -> str:
    if next_cursor is None:
        return ""
    return f"\nShowing {shown}; more: call {tool} again with cursor={next_cursor!r}"


def ready_text(issue: ReadyIssue) -> str:
    head = f"Issue #{issue.number}: {issue.title}"
    facts = (
        f"priority: {issue.priority.value} · type: {issue.issue_type.value} · agent: {issue.agent}"
    )
    return f"{head}\n{facts}" + (f"\n\n{issue.description}" if issue.description else "")


def issue_text(issue: Issue, extra: Sequence[str] = ()) -> str:
    lines = [
        f"Issue #{issue.number}: {issue.title}",
        f"status: {issue.status.value} · priority: {issue.priority.value}"
        f" · type: {issue.issue_type.value} · agent: {issue.agent}",
    ]
    if issue.claimed_by:
        lines.append(f"claimed by {issue.claimed_by}, lease until {when(issue.lease_expires_at)}")
    if issue.is_blocked:
        lines.append(f"blocked: {issue.blocked_reason}")
    if issue.blocked_by:
        lines.append(f"waits for: {numbers(issue.blocked_by)} ({issue.open_blockers} not done)")
    if issue.blocks:
        lines.append(f"blocks: {numbers(issue.blocks)}")
    if issue.labels:
        lines.append(f"labels: {', '.join(issue.labels)}")
    if issue.worktree:
        lines.append(f"worktree: {issue.worktree.path} (branch {issue.worktree.branch})")
    elif issue.repository:
        lines.append(f"repository: {issue.repository}")
    if issue.touches:
        lines.append(f"touches: {', '.join(issue.touches)}")
    lines.extend(extra)
    lines.append(f"created {when(issue.created_at)} · updated {when(issue.updated_at)}")
    if issue.description:
        lines += ["", issue.description]
    return "\n".join(lines)


def numbers(values: Sequence[int]) -> str:
    return ", ".join(f"#{n}" for n in values)
