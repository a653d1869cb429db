"""Contract E's git steps around a claim: a feature branch, an issue started on its branch (or
in its worktree), TDD phase commits and comments; the merge into the default branch is
to_main.py's.

Where the work happens: an issue with a worktree (``start_work_on_issue(worktree=true)``,
or a repository that makes one per claim) is worked on in it; otherwise the server's own
checkout is switched to the issue's branch, as contract E does. git never runs inside a
database transaction; a claim taken for a branch that then cannot be made is given back.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Connection, select

from workq.db.tables import issues as issues_t
from workq.db.tables import worktrees as worktrees_t
from workq.domain import branches, fields, tdd
from workq.domain.authority import Authority
from workq.domain.checklists import checkbox_items
from workq.domain.decisions import Action
from workq.domain.workflow import branch_name
from workq.errors import (
    BranchExists,
    Conflict,
    InvalidInput,
    LeaseLapsed,
    NotFound,
    NothingToCommit,
    OnDefaultBranch,
    PlanModeActive,
    Step,
    WorkqError,
)
from workq.schemas import (
    BranchCreated,
    BranchLinked,
    Comment,
    Issue,
    IssueContext,
    Status,
    TddCommit,
    WorkStarted,
)
from workq.services.handle import Queue, load, record
from workq.services.queue import door, issues, notes, predicates
from workq.services.workspaces import (
    checkouts,
    claiming,
    hooks,
    repositories,
    worktrees,
)
from workq.services.workspaces.checkouts import Checkout
from workq.services.workspaces.repositories import ACTIVE
from workq.vcs import git


def _open_issue(q: Queue, number: int) -> Issue:
    issue = issues.get(q, number)
    if issue.status == Status.DONE:
        raise Conflict(f"Issue #{number} is done: no work to start on it", number=number)
    return issue


def _context(issue: Issue) -> IssueContext:
    return IssueContext(
        number=issue.number,
        title=issue.title,
        acceptance_criteria=checkbox_items(issue.description),
    )


def _holds(q: Queue, number: int, by: Authority) -> bool:
    """Whether ``by`` holds issue ``number``'s claim, live or lapsed (claiming it again
    renews it): the door's only refusal, if any, is not about who holds it."""
    refused = door.refusal(q, Action.STEP, number, by)
    return refused is None or isinstance(refused, (LeaseLapsed, PlanModeActive))


def _new_branch(co: Checkout, branch: str) -> str:
    """Create ``branch`` from the default branch and check it out; the commit it starts at.
    Refused on a dirty checkout (ERR_UNCOMMITTED_CHANGES) or an existing branch."""
    if not git.is_valid_branch_name(branch, co.root):
        raise InvalidInput(f"invalid branch name {branch!r:.80}", field="name")
    checkouts.require_clean(co.path)
    if git.branch_exists(co.root, branch):
        raise BranchExists(f"branch {branch} already exists", branch=branch)
    base = git.head(co.root, "refs/heads/" + co.default_branch)
    git.switch_new(co.path, branch, base)
    return base


def create_feature_branch(
    q: Queue, where: Path, branch_type: str, name: str, *, actor: str | None = None
) -> BranchCreated:
    """Contract E's create_feature_branch in the checkout at ``where``: ``{type}/{name}``
    (TDD-002) from the default branch, checked out, and recorded as workq's (so a merge's
    cleanup may delete it). No pull: workq works offline."""
    branch = tdd.feature_branch(branch_type, name)
    co = checkouts.at(q, where)
    _new_branch(co, branch)
    checkouts.record_created(q, co.root, branch, actor=actor)
    return BranchCreated(branch_name=branch, created_from=co.default_branch)


def _status(q: Queue, number: int) -> str:
    status = issues.get(q, number).status
    return "In Progress" if status == Status.IN_PROGRESS else status.value


def link_issue_to_branch(
    q: Queue,
    where: Path,
    number: int,
    *,
    by: Authority,
    move_to_in_progress: bool = True,
) -> BranchLinked:
    """Link issue ``number`` to the branch the checkout at ``where`` is on; with
    ``move_to_in_progress``, claim it under ``by``'s run id unless ``by`` holds it.
    Without, the link is refused while another caller holds the issue."""
    fields.number(number)
    co = checkouts.at(q, where)
    branch = git.current_branch(co.path)
    if branch is None or branch == co.default_branch:
        raise OnDefaultBranch(
            f"the checkout at {co.path} is on {branch or 'a detached HEAD'}, not on a feature "
            "branch",
            hint=("create one first with ", Step.CREATE_BRANCH, ", then call again"),
        )
    _open_issue(q, number)
    action = Action.RESHAPE
    if move_to_in_progress:
        if door.refusal(q, Action.STEP, number, by) is not None:
            # Claimed (or claimed again, a lapsed lease renewed) as issue_claim would;
            # the claim says why if it cannot be.
            claiming.claim(q, number, by, worktree=False)
        action = Action.STEP
    base = git.merge_base(co.root, "refs/heads/" + co.default_branch, "refs/heads/" + branch)
    made = checkouts.created_here(q, co.root, branch)
    checkouts.link(
        q,
        number,
        branch,
        co.path,
        by=by,
        action=action,
        base_commit=base,
        created=made,
        actor=_actor(by),
    )
    return BranchLinked(branch_name=branch, issue_number=number, project_status=_status(q, number))


def _actor(by: Authority) -> str | None:
    """Who a step of ``by`` is recorded as: the run id it claims under (or the person who
    overrides)."""
    return by.acts_as or by.who


def start_work_on_issue(
    q: Queue,
    where: Path,
    number: int,
    *,
    by: Authority,
    branch_type: str = "feature",
    worktree: bool | None = None,
) -> WorkStarted:
    """Claim issue ``number`` under ``by``'s run id (the one claim path), put its work on
    branch ``{branch_type}/{number}-{slug}`` and link it: in a worktree of its own when
    asked (``worktree``) or when its repository makes one per claim, otherwise in the
    checkout at ``where``, switched to the branch (refused while that checkout is dirty).
    Calling again as the holder resumes: the branch is checked out again, nothing is made
    twice."""
    fields.number(number)
    issue = _open_issue(q, number)
    branch = tdd.feature_branch(branch_type, branch_name(number, issue.title))
    if worktree is None:  # as its repository says, or where it was started before
        worktree = claiming.per_claim(q, number) or worktrees.get_for_issue(q, number) is not None
    if worktree:
        return _start_in_worktree(q, where, issue, branch, by)
    co = checkouts.at(q, where)
    current = git.current_branch(co.path)
    exists = git.branch_exists(co.root, branch)
    if exists and not _holds(q, number, by):
        raise BranchExists(
            f"branch {branch} already exists, and issue #{number} is not yours",
            branch=branch,
            hint="claim the issue first (issue_claim), or check out the branch yourself",
        )
    if current != branch:
        checkouts.require_clean(co.path)
    taken = claiming.claim(q, number, by, worktree=False)
    try:
        if not exists:
            _new_branch(co, branch)
        elif current != branch:
            git.switch(co.path, branch)
    except WorkqError as exc:
        if taken.already_held:
            raise
        raise claiming.given_back(
            q, number, by, exc, reason="its branch could not be made"
        ) from None
    base = git.merge_base(co.root, "refs/heads/" + co.default_branch, "refs/heads/" + branch)
    made = not exists or checkouts.branch_made(q, number, branch)
    checkouts.link(
        q,
        number,
        branch,
        co.path,
        by=by,
        base_commit=base,
        created=made,
        actor=taken.claimed_by,
    )
    return WorkStarted(
        branch_name=branch,
        issue=_context(issue),
        path=str(co.path),
        worktree=False,
        created_from=co.default_branch,
        resumed=exists,
    )


def _start_in_worktree(
    q: Queue,
    where: Path,
    issue: Issue,
    branch: str,
    by: Authority,
) -> WorkStarted:
    number = issue.number
    repo = issue.repository
    if repo is None:
        # The issue is in no repository yet: the one the server runs in, if registered.
        with contextlib.suppress(InvalidInput):
            repo = checkouts.at(q, where).repo
        if repo is None:
            raise InvalidInput(
                f"Issue #{number} belongs to no repository: no worktree can be made for it",
                number=number,
                hint="put it in one first (workq repo assign), or start without worktree",
            )
        repositories.assign(q, number, repo, by=by, actor=_actor(by))
    taken = claiming.claim(q, number, by, worktree=True, branch=branch)
    info = taken.worktree
    if info is None:  # pragma: no cover - claim(worktree=True) makes one or raises
        raise NotFound(f"Issue #{number} has no worktree", number=number)
    registered = repositories.get(q, info.repository)
    checkouts.link(q, number, info.branch, Path(info.path), by=by, actor=taken.claimed_by)
    return WorkStarted(
        branch_name=info.branch,
        issue=_context(issue),
        path=info.path,
        worktree=True,
        created_from=registered.default_branch,
        resumed=taken.already_held,
    )


# --- where an issue's work is ----------------------------------------------------------------


@dataclass(frozen=True)
class Work:
    """An issue's branch (or a branch linked to no issue) and where it is checked out."""

    number: int | None
    branch: str
    path: Path
    root: Path
    into: str
    repo: str | None
    worktree_id: str | None = None
    base_commit: str | None = None
    merge_commit: str | None = None


def _in_worktree(q: Queue, number: int) -> Work | None:
    info = worktrees.get_for_issue(q, number)
    if info is None:
        return None
    repo = repositories.get(q, info.repository)
    return Work(
        number=number,
        branch=info.branch,
        path=Path(info.path),
        root=Path(repo.path),
        into=repo.default_branch,
        repo=repo.name,
        worktree_id=info.worktree_id,
    )


def _held_worktrees(q: Queue, by: Authority) -> list[int]:
    """The issues ``by`` holds (live claims: a lapsed one is not held) that have an
    active worktree."""
    now = q.now()
    with q.db.read() as conn:
        rows = conn.execute(
            select(issues_t.c.number, issues_t.c.status, issues_t.c.lease_expires_at)
            .select_from(issues_t.join(worktrees_t, worktrees_t.c.issue_id == issues_t.c.id))
            .where(predicates.held_by(sorted(by.run_ids), now), worktrees_t.c.state.in_(ACTIVE))
            .order_by(issues_t.c.number)
        ).all()
    return sorted({r.number for r in rows})


def _on_branch(q: Queue, co: Checkout, branch: str) -> Work:
    link = checkouts.of_branch(q, branch)
    number = link.number if link is not None else branches.issue_number(branch)
    if link is None and number is not None:
        try:
            issues.get(q, number)
        except NotFound:
            number = None
    return Work(
        number=number,
        branch=branch,
        path=co.path,
        root=co.root,
        into=co.default_branch,
        repo=co.repo,
        base_commit=link.base_commit if link else None,
        merge_commit=link.merge_commit if link else None,
    )


def locate(q: Queue, where: Path, by: Authority, number: int | None = None) -> Work:
    """Where the work is: issue ``number``'s worktree or linked branch; else the branch the
    checkout at ``where`` is on; else the one worktree of an issue ``by`` holds."""
    if number is not None:
        fields.number(number)
        issues.get(q, number)
        found = _in_worktree(q, number)
        if found is not None:
            return found
        link = checkouts.of_issue(q, number)
        if link is None:
            raise Conflict(
                f"Issue #{number} has no branch",
                number=number,
                hint="start_work_on_issue first (or link_issue_to_branch from its branch)",
            )
        linked = checkouts.at(q, Path(link.checkout))
        if git.current_branch(linked.path) != link.branch:
            raise Conflict(
                f"the checkout at {linked.path} is not on issue #{number}'s branch {link.branch}",
                number=number,
                hint="start_work_on_issue again to switch back to it",
            )
        return _on_branch(q, linked, link.branch)
    co: Checkout | None = None
    with contextlib.suppress(InvalidInput):
        co = checkouts.at(q, where)
    if co is not None:
        current = git.current_branch(co.path)
        if current is not None and current != co.default_branch:
            return _on_branch(q, co, current)
    mine = _held_worktrees(q, by)
    if len(mine) == 1:
        found = _in_worktree(q, mine[0])
        if found is not None:
            return found
    if len(mine) > 1:
        raise InvalidInput(
            f"you hold several issues with worktrees ({', '.join(f'#{n}' for n in mine)})",
            field="issue_number",
            hint="name one with issue_number",
        )
    where_said = f"the checkout at {co.path} is on {co.default_branch}" if co else f"{where}"
    raise OnDefaultBranch(
        f"no feature branch to work on: {where_said}, and you hold no issue with a worktree"
    )


# --- commits and merges ------------------------------------------------------------------------


def commit_tdd_phase(
    q: Queue,
    where: Path,
    phase: str,
    component: str,
    *,
    by: Authority,
    actor: str | None = None,
    details: Sequence[str] = (),
    test_count: str | None = None,
    quality_gates: str | None = None,
    number: int | None = None,
) -> TddCommit:
    """Commit every change of the issue's checkout as TDD phase ``phase`` (contract E's
    message, TDD-003; a red commit holds tests only, TDD-001), with the repository's
    hooks, and record the commit on the issue. Only the holder of the issue's live claim
    may (the door, ``step``: another agent's work is neither committed into nor swept
    up), asked before git and again in the transaction that records the commit. Refused:
    nothing changes."""
    tdd.commit_message(phase, component, details, test_count, quality_gates)  # bad input first
    work = locate(q, where, by, number)
    issue, kind = None, None
    if work.number is not None:
        actor = worktrees.acted_as(door.ask(q, Action.STEP, work.number, by), by, actor)
        found = issues.get(q, work.number)
        issue, kind = (work.number, found.title), found.issue_type.value
    message = tdd.commit_message(
        phase, component, details, test_count, quality_gates, issue, issue_type=kind
    )
    if git.current_branch(work.path) != work.branch:
        raise Conflict(f"the checkout at {work.path} is not on {work.branch}", branch=work.branch)
    saved = git.index_tree(work.path)
    git.stage_all(work.path)
    try:
        staged = git.staged_paths(work.path)
        if not staged:
            raise NothingToCommit(f"the checkout at {work.path} has no changes to commit")
        if phase == "red":
            tdd.red_only_tests(staged)
        hooks.refuse_reserved(q, work.path, by=by, issue=work.number)
        if work.number is not None:  # the last word before the commit
            door.ask(q, Action.STEP, work.number, by)
        commit = git.commit(work.path, message, env=hooks.CHECKED)
    except WorkqError:
        if saved is not None:  # (an index with conflicts is left staged: it had no tree)
            git.restore_index(work.path, saved)
        raise
    if work.number is not None:
        record_step(
            q,
            work.number,
            "tdd_committed",
            actor,
            {"commit": commit, "phase": phase, "branch": work.branch, "message": message},
        )
    return TddCommit(commit_hash=commit, commit_message=message, issue_number=work.number)


def record_step(
    q: Queue, number: int, kind: str, actor: str | None, after: dict[str, object]
) -> None:
    def work(conn: Connection) -> None:
        with contextlib.suppress(NotFound):  # deleted meanwhile: the git step stands
            row = load(conn, number)
            record(
                q,
                conn,
                kind=kind,
                issue_id=row.id,
                number=number,
                actor=actor,
                now=q.now(),
                after=after,
            )

    q.db.write(work)


def add_issue_comment(
    q: Queue, number: int, body: str, comment_type: str | None, *, author: str | None
) -> Comment:
    """A comment on issue ``number``, with contract E's prefix for its kind."""
    text = tdd.comment_body(fields.comment(body), comment_type)
    return notes.comment(q, number, text, kind=comment_type or "note", author=author)
