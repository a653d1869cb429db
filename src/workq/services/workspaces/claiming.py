"""Claims with a worktree: claim, then make the issue's worktree (git outside the claim's
transaction); if it cannot be made, a new claim is given back and the error reported."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from sqlalchemy import bindparam, select

from workq.db.prepared import Prepared
from workq.db.tables import issues, repositories
from workq.domain.authority import Authority
from workq.domain.decisions import Action
from workq.errors import Conflict, InvalidInput, WorkqError
from workq.nowait import before_waiting
from workq.schemas import (
    Briefing,
    Claim,
    ClaimedIssue,
    ReadyFilter,
    RepoOverview,
    WorkspaceInfo,
)
from workq.services.handle import Queue
from workq.services.queue import claims, door, ready_queue
from workq.services.queue import issues as issue_service
from workq.services.workspaces import conflicts, handoff, worktrees
from workq.services.workspaces import repositories as repository_service
from workq.services.workspaces.worktrees import check_branch, get_for_issue, spawn

C = TypeVar("C", Claim, ClaimedIssue)

# Asked after every claim_next: prepared (db/prepared.py).
_placed = Prepared(
    select(issues.c.repository, repositories.c.auto_worktree)
    .select_from(issues.outerjoin(repositories, repositories.c.name == issues.c.repository))
    .where(issues.c.number == bindparam("number"))
)


def _repository_of(q: Queue, number: int) -> tuple[str | None, bool] | None:
    """The issue's repository and whether it makes a worktree per claim; None: no issue."""
    with q.db.read() as conn:
        found = _placed.rows(conn, {"number": number})
    if not found:
        return None
    return found[0].repository, bool(found[0].auto_worktree)


def per_claim(q: Queue, number: int) -> bool:
    """Whether issue ``number``'s repository makes a worktree for every claim."""
    placed = _repository_of(q, number)
    return placed is not None and placed[1]


def attach(
    q: Queue,
    number: int,
    by: Authority,
    wanted: bool | None,
    *,
    branch: str | None = None,
    placed: tuple[str | None, bool] | None = None,
) -> WorkspaceInfo | None:
    """After ``by`` claimed issue ``number``: its worktree, made if ``wanted`` (None: as
    its repository is configured), on ``branch`` (default: named from the issue). On
    failure to make it, raises (the caller gives the claim back). ``placed``: its
    repository and whether that makes a worktree per claim, when already read."""
    repo, auto = placed or _repository_of(q, number) or (None, False)
    if wanted is None:
        wanted = auto
    if not wanted:
        return get_for_issue(q, number)
    if repo is None:
        raise _no_repository(number)
    return spawn(q, repo, number, by=by, branch=branch)


def spawn_task(
    q: Queue,
    repo: str,
    number: int | None,
    *,
    title: str,
    by: Authority,
    branch: str | None = None,
) -> tuple[int, WorkspaceInfo, Briefing | None]:
    """agit's spawn: issue ``number`` (None: a new one titled ``title``) claimed under
    ``by``'s run id, put in ``repo``, with its worktree on ``branch``, and the briefing
    of an earlier claim that did not complete. Every check that can refuse comes first,
    so a refused spawn creates, assigns and claims nothing; a claim taken here is given
    back if the worktree then cannot be made."""
    holder = claims.claimer(by)
    found = repository_service.get(q, repo)
    if branch is not None:
        check_branch(Path(found.path), branch, found.default_branch)
    if number is None:
        with q.db.read() as conn:
            door.refuse_planning(conn, by, Action.CLAIM)
        number = issue_service.create(q, title=title, actor=holder).number
    else:
        placed = issue_service.get(q, number).repository
        if placed not in (None, repo):
            raise Conflict(
                f"Issue #{number} belongs to repository {placed!r}, not {repo!r}",
                number=number,
            )
    taken = claims.claim(q, number, by)
    try:
        repository_service.assign(q, number, repo, by=by, actor=holder)
        info = spawn(q, repo, number, by=by, branch=branch)
    except WorkqError as exc:
        if taken.already_held:
            raise
        raise given_back(q, number, by, exc) from None
    return number, info, _briefing(q, taken)


def _briefing(q: Queue, taken: Claim) -> Briefing | None:
    """The briefing for a new claim of an issue claimed before (its fence counts every
    claim: a first claim reads nothing more); none for a claim renewed by its holder."""
    if taken.already_held or taken.fence <= 1:
        return None
    return handoff.briefing(q, taken.number)


def _with(q: Queue, taken: C, info: WorkspaceInfo | None) -> C:
    """``taken`` with its worktree and its briefing, when it has them."""
    extra: dict[str, object] = {}
    if info is not None:
        extra["worktree"] = info
    briefed = _briefing(q, taken)
    if briefed is not None:
        extra["briefing"] = briefed
    return taken.model_copy(update=extra) if extra else taken


def _no_repository(number: int) -> InvalidInput:
    return InvalidInput(
        f"Issue #{number} belongs to no repository: no worktree can be made for it",
        number=number,
        hint="put it in one first (workq repo assign), or claim without worktree",
        field="worktree",
    )


def given_back(
    q: Queue,
    number: int,
    by: Authority,
    error: WorkqError,
    reason: str = "its worktree could not be made",
) -> WorkqError:
    """Release the claim ``by`` just took because its workspace could not be made."""
    try:
        claims.release(q, number, by, reason=reason)
    except WorkqError:  # pragma: no cover - reported below with the cause
        error.facts["claim_kept"] = True
        return error
    error.facts["claim_released"] = True
    return error


def claim(
    q: Queue,
    number: int,
    by: Authority,
    *,
    worktree: bool | None = None,
    branch: str | None = None,
) -> Claim:
    """``claims.claim`` under ``by``'s run id, then the issue's worktree (made when
    ``worktree``, or when its repository makes one per claim; on ``branch`` if given). If
    it cannot be made, a new claim is given back. Every face's claim comes here, so a
    repository registered with a worktree per claim gets one whichever face claimed.
    An issue in no repository is refused before the claim, so nothing changes."""
    if worktree:
        placed = _repository_of(q, number)
        if placed is not None and placed[0] is None:
            raise _no_repository(number)
    taken = claims.claim(q, number, by)
    try:
        info = attach(q, number, by, worktree, branch=branch)
    except WorkqError as exc:
        if taken.already_held:
            raise
        raise given_back(q, number, by, exc) from None
    return _with(q, taken, info)


def claim_next(
    q: Queue,
    by: Authority,
    f: ReadyFilter | None,
    *,
    worktree: bool | None = None,
    then: claims.Received | None = None,
) -> ClaimedIssue | None:
    """``claims.claim_next`` under ``by``'s run id, with the claimed issue's worktree as
    ``claim`` makes it (when ``worktree``, or when its repository makes one per claim).
    Asked for a worktree, only issues that belong to a repository are considered.
    ``then``: called with the claim inside its transaction (``claims.Received``)."""
    if _asks_workspace(f, worktree):
        before_waiting("a claim in a repository")
    f = _for_worktree(f, worktree)
    taken = claims.claim_next(q, by, f, then=then)
    if taken is None:
        return None
    return finish_claim_next(q, by, f, taken, worktree=worktree)


def finish_claim_next(
    q: Queue,
    by: Authority,
    f: ReadyFilter | None,
    taken: ClaimedIssue,
    *,
    worktree: bool | None = None,
) -> ClaimedIssue:
    """What ``claim_next`` adds to the claim ``taken`` after it committed: its worktree
    (made if asked for, or if its repository makes one per claim; on failure the claim is
    given back and the error raised) and the briefing of the claim before. Safe to run
    again for the same claim (a crash between the claim and this): the worktree made is
    the one it has."""
    # Where the issue is, as the claim's statement read it (else asked: a task's claim
    # finished after a restart).
    placed = taken.placement or _repository_of(q, taken.number)
    asked = _asks_workspace(f, worktree)
    if not asked and (placed is None or not placed[1]):  # no repository, or no auto worktrees
        return _with(q, taken, None)
    try:
        info = attach(q, taken.number, by, worktree, placed=placed)
    except WorkqError as exc:
        if taken.already_held:
            raise
        raise given_back(q, taken.number, by, exc) from None
    return _with(q, taken, info)


def _asks_workspace(f: ReadyFilter | None, worktree: bool | None) -> bool:
    """Whether a claim_next asked about a worktree or a repository (``attach`` runs)."""
    return worktree is not None or bool(f and f.repository)


def claimable(q: Queue, f: ReadyFilter | None, *, worktree: bool | None) -> bool:
    """Whether ``claim_next`` may find an issue now, for any holder: a read, which takes no
    write lock. A waiting call asks it before trying again, so that one new issue costs
    its many waiters one claim each (a write) only when it is there to take; False is
    true for every holder, so waiting calls of one server share it."""
    return ready_queue.any_ready(q, _for_worktree(f, worktree))


def _for_worktree(f: ReadyFilter | None, worktree: bool | None) -> ReadyFilter | None:
    if worktree and not (f and f.repository):
        return (f or ReadyFilter()).model_copy(update={"in_a_repository": True})
    return f


def overview(q: Queue, name: str) -> RepoOverview:
    """Repository ``name`` with its worktrees and the files two of them both change.

    Raises:
        NotFound: no such repository.
    """
    repo = repository_service.get(q, name)
    return RepoOverview(
        **repo.model_dump(),
        worktrees=worktrees.list_worktrees(q, name),
        conflicts=conflicts.scan(q, name).conflicts,
    )
