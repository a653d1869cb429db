"""A git worktree per claimed issue: made under the repository's worktree folder on a
branch named from the issue, recorded and listed (removing them: worktree_cleanup.py).

git never runs inside a database transaction: a worktree is first recorded as
``creating`` (so a crash leaves a trace that prune finds), then made by git, then marked
``active``; if git fails, the record is dropped and the error reported."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, bindparam, delete, or_, select, update

from workq.db.engine import retry_lost_read
from workq.db.prepared import Prepared
from workq.db.tables import events, issues, worktrees
from workq.domain import branches
from workq.domain.authority import Authority
from workq.domain.decisions import Action
from workq.errors import (
    Conflict,
    GitFailed,
    InvalidInput,
    NotFound,
    Step,
    UnmergedWork,
)
from workq.schemas import (
    AgentInfo,
    Issue,
    Status,
    WorkspaceInfo,
    WorktreeInfo,
)
from workq.services.handle import Ending, Queue, load, new_id, record
from workq.services.queue import door
from workq.services.queue import issues as issue_service
from workq.services.workspaces.repositories import ACTIVE
from workq.services.workspaces.repositories import row as repository_row
from workq.vcs import git

# How long a worktree may stay "creating" before prune takes it for an interrupted spawn.
CREATING_GRACE_SECONDS = 600


def _info(r: Any) -> WorkspaceInfo:
    return WorkspaceInfo(worktree_id=r.id, repository=r.repository, path=r.path, branch=r.branch)


def listed(r: Any, disk: bool = False) -> WorktreeInfo:
    return WorktreeInfo(
        id=r.id,
        repository=r.repository,
        number=r.number,
        path=r.path,
        branch=r.branch,
        base_commit=r.base_commit,
        state=r.state,
        agent=r.agent,
        disk_bytes=git.disk_usage(Path(r.path)) if disk and Path(r.path).is_dir() else None,
    )


# Asked by every completion and release (refuse_unmerged) and by issue_get: prepared
# (db/prepared.py), not compiled per call. The states are written out (an IN list is
# compiled at each execution).
_active = Prepared(
    select(worktrees)
    .where(
        worktrees.c.number == bindparam("number"),
        or_(*(worktrees.c.state == state for state in ACTIVE)),
    )
    .order_by(worktrees.c.created_at.desc())
    .limit(1)
)


def active_row(conn: Connection, number: int) -> Any:
    found = _active.rows(conn, {"number": number})
    return found[0] if found else None


def of_issue(conn: Connection, number: int) -> WorkspaceInfo | None:
    """The active worktree of issue ``number``, if it has one."""
    found = active_row(conn, number)
    return _info(found) if found is not None and found.state != "creating" else None


@retry_lost_read
def refuse_unmerged(
    q: Queue, number: int, action: str, first: Callable[[], None] = lambda: None
) -> None:
    """UnmergedWork if issue ``number``'s active worktree has commits its repository's
    default branch lacks (its branch gone or unreadable: nothing to lose here). ``first``
    runs before git is asked, only when there is a worktree (a caller's own refusals that
    must win, such as who holds the claim). The queue asks it before a claim ends (an
    ``ending`` hook: see :func:`install`)."""
    with q.db.read() as conn:
        w = active_row(conn, number)
        if w is None or w.state != "active":
            return
        r = repository_row(conn, w.repository)
    first()
    root = Path(r.path)
    if git.branch_tip(root, w.branch) is None or git.branch_tip(root, r.default_branch) is None:
        return
    ahead = git.commits_ahead(root, w.branch, r.default_branch)
    if ahead:
        some = f"{ahead} commit{'s' if ahead > 1 else ''}"
        raise UnmergedWork(
            f"Issue #{number}'s worktree has {some} on {w.branch} that {r.default_branch} "
            f"lacks: {action} it would leave them behind",
            number=number,
            branch=w.branch,
            commits=ahead,
            hint=(
                "merge them first with ",
                Step.MERGE,
                ", or release with discard (the branch is kept)",
            ),
        )


def _has_active(conn: Connection, number: int) -> bool:
    """Whether issue ``number`` has an active worktree (the only kind that can hold
    commits to lose): asked inside the change that would end its claim."""
    found = active_row(conn, number)
    return found is not None and found.state == "active"


UNMERGED = Ending(concerns=_has_active, ask=refuse_unmerged)


def install(q: Queue) -> None:
    """Have the queue refuse to end a claim whose worktree holds unmerged commits (once)."""
    if UNMERGED not in q.ending:
        q.ending.append(UNMERGED)


@retry_lost_read
def issue(q: Queue, number: int) -> Issue:
    """Issue ``number`` as the queue shows it, with its active worktree if it has one."""
    found = issue_service.get(q, number)
    if found.repository is None:
        return found
    with q.db.read() as conn:
        return found.model_copy(update={"worktree": of_issue(conn, number)})


def get_for_issue(q: Queue, number: int) -> WorkspaceInfo | None:
    with q.db.read() as conn:
        return of_issue(conn, number)


@retry_lost_read
def latest_for_issue(q: Queue, number: int) -> WorkspaceInfo | None:
    """The newest worktree of issue ``number`` that was not removed (active, or merged:
    a merge to finish or report)."""
    with q.db.read() as conn:
        found = conn.execute(
            select(worktrees)
            .where(worktrees.c.number == number, worktrees.c.state != "removed")
            .order_by(worktrees.c.created_at.desc())
        ).first()
    return _info(found) if found is not None else None


def by_id(conn: Connection, worktree_id: str, repo: str | None = None) -> Any:
    found = conn.execute(select(worktrees).where(worktrees.c.id == worktree_id)).first()
    if found is None or (repo is not None and found.repository != repo):
        raise NotFound(
            f"worktree {worktree_id!r} not found" + (f" in repository {repo!r}" if repo else ""),
            worktree_id=worktree_id,
            hint="list them with agit_repo_status (workq worktree list)",
        )
    return found


def safe_path(folder: Path, branch: str) -> Path:
    """Where the worktree of ``branch`` goes: one component under ``folder``, built here
    from the branch name, never outside ``folder`` (``..``, absolute names and symlinks
    are refused)."""
    if not folder.is_absolute() or Path(os.path.realpath(folder)) != folder:
        raise InvalidInput(
            f"the worktree folder {folder} is not a real absolute directory (a symlink?)",
            field="dir",
            hint="re-register the repository with a real folder (workq repo add --dir)",
        )
    path = folder / branches.folder_name(branch)
    if path.parent != folder or os.path.islink(path):
        raise InvalidInput(f"refusing worktree path {path}: outside {folder}", field="branch")
    return path


def check_branch(root: Path, branch: str, default_branch: str) -> str:
    """``branch`` if it may be a task's branch: a valid name, and never the default branch
    (a worktree's cleanup deletes its branch)."""
    if not isinstance(branch, str) or not branch or len(branch) > 255:
        raise InvalidInput("branch must be 1-255 characters", field="branch")
    if branch.startswith("-") or not git.is_valid_branch_name(branch, root):
        raise InvalidInput(f"invalid branch name {branch!r:.80}", field="branch")
    if branch == default_branch:
        raise InvalidInput(
            f"{branch!r} is the repository's default branch, not a task branch",
            field="branch",
            hint="leave branch out (one is named from the task) or name a new branch",
        )
    return branch


def spawn(
    q: Queue,
    repo: str,
    number: int,
    *,
    by: Authority,
    branch: str | None = None,
) -> WorkspaceInfo:
    """The worktree of issue ``number`` in ``repo``: made now, or the one it has. While
    the issue is claimed only its holder (``by``) or an override may make it (the door,
    ``reshape``); the worktree is its holder's. Without ``branch``, a new worktree of an
    issue whose earlier worktree was removed starts from that worktree's branch while it
    holds work the default branch lacks (the hand-off), else on a branch named from it."""
    earlier = None if branch is not None else _earlier_branch(q, repo, number)

    def reserve(conn: Connection) -> tuple[Any, Any, bool]:
        r = repository_row(conn, repo)
        issue = load(conn, number, for_update=True)
        let = door.check(q, conn, issue, Action.RESHAPE, by)
        mine = let.mine
        agent = let.holder if mine else (by.acts_as or by.who)
        if issue.repository not in (None, repo):
            raise Conflict(
                f"Issue #{number} belongs to repository {issue.repository!r}, not {repo!r}",
                number=number,
            )
        if issue.status == Status.DONE.value:
            raise Conflict(f"Issue #{number} is done: no worktree for it", number=number)
        existing = active_row(conn, number)
        if existing is not None:
            if mine and existing.agent != agent:  # taken over: the new holder's
                conn.execute(
                    update(worktrees).where(worktrees.c.id == existing.id).values(agent=agent)
                )
            if existing.state == "creating":
                return r, existing, False  # an earlier attempt crashed: finish it
            return r, existing, True
        name = check_branch(
            Path(r.path),
            branch or earlier or branches.issue_branch(issue.issue_type, number, issue.title),
            r.default_branch,
        )
        path = safe_path(Path(r.worktree_dir), name)
        taken = conn.execute(
            select(worktrees.c.id).where(
                worktrees.c.repository == repo,
                worktrees.c.state.in_(ACTIVE),
                (worktrees.c.branch == name) | (worktrees.c.path == str(path)),
            )
        ).first()
        if taken is not None:
            raise Conflict(f"branch {name!r} already has a worktree", branch=name)
        now = q.now()
        if issue.repository is None:
            conn.execute(update(issues).where(issues.c.id == issue.id).values(repository=repo))
        values = {
            "id": new_id(),
            "repository": repo,
            "issue_id": issue.id,
            "number": number,
            "path": str(path),
            "branch": name,
            "base_commit": "",
            "state": "creating",
            "agent": agent,
            "created_at": now,
            "updated_at": now,
        }
        conn.execute(worktrees.insert().values(**values))
        return r, conn.execute(select(worktrees).where(worktrees.c.id == values["id"])).one(), False

    r, w, done = q.db.write(reserve)
    if done:
        return _info(w)
    root, path = Path(r.path), Path(w.path)
    try:
        base, made = _make(root, path, w.branch, r.default_branch)
    except (GitFailed, InvalidInput):
        q.db.write(lambda conn: conn.execute(delete(worktrees).where(worktrees.c.id == w.id)))
        raise

    def activate(conn: Connection) -> None:
        now = q.now()
        conn.execute(
            update(worktrees)
            .where(worktrees.c.id == w.id)
            .values(state="active", base_commit=base, updated_at=now)
        )
        record(
            q,
            conn,
            kind="worktree_created",
            issue_id=w.issue_id,
            number=number,
            actor=w.agent,
            now=now,
            # Whether workq made the branch: cleanup deletes only a branch it made.
            after={"path": w.path, "branch": w.branch, "branch_created": made},
        )

    q.db.write(activate)
    return _info(w)


@retry_lost_read
def _earlier_branch(q: Queue, repo: str, number: int) -> str | None:
    """The branch of issue ``number``'s newest removed worktree in ``repo``, if git still has
    it with commits the default branch lacks and no active worktree is on it."""
    with q.db.read() as conn:
        if active_row(conn, number) is not None:
            return None
        found = conn.execute(
            select(worktrees.c.branch)
            .where(
                worktrees.c.number == number,
                worktrees.c.repository == repo,
                worktrees.c.state == "removed",
            )
            .order_by(worktrees.c.created_at.desc())
            .limit(1)
        ).first()
        if found is None:
            return None
        busy = conn.execute(
            select(worktrees.c.id).where(
                worktrees.c.repository == repo,
                worktrees.c.state.in_(ACTIVE),
                worktrees.c.branch == found.branch,
            )
        ).first()
        try:
            r = repository_row(conn, repo)
        except NotFound:  # reserve says so
            return None
    root = Path(r.path)
    if busy is not None or git.branch_tip(root, r.default_branch) is None:
        return None
    if git.branch_tip(root, found.branch) is None:
        return None
    return str(found.branch) if git.commits_ahead(root, found.branch, r.default_branch) else None


def _make(root: Path, path: Path, branch: str, default_branch: str) -> tuple[str, bool]:
    """Create (or, after a crash, find) the worktree; its base commit, and whether the
    branch was made here (a branch that already existed is someone else's, and a crashed
    attempt's is not known to be workq's: cleanup keeps both)."""
    known = {wt.path.resolve(): wt for wt in git.worktrees(root)}
    made = False
    if path.resolve() in known:
        if known[path.resolve()].branch != branch:
            raise InvalidInput(f"{path} is a worktree of another branch", field="branch")
    elif os.path.lexists(path):
        raise InvalidInput(f"{path} exists and is not this issue's worktree", field="branch")
    elif git.branch_exists(root, branch):
        git.run(["worktree", "add", "--quiet", str(path), branch], cwd=root)
    else:
        git.worktree_add(root, path, branch, "refs/heads/" + default_branch)
        made = True
    return git.merge_base(root, "refs/heads/" + default_branch, "refs/heads/" + branch), made


def branch_made(q: Queue, w: Any) -> bool:
    """Whether workq made worktree ``w``'s branch (its ``worktree_created`` event says so):
    cleanup deletes no other branch. Unknown (a worktree made before workq recorded it,
    or by a crashed attempt) counts as not made: the branch is kept."""
    if w.number is None:
        return False
    with q.db.read() as conn:
        found = conn.execute(
            select(events.c.after)
            .where(events.c.number == w.number, events.c.kind == "worktree_created")
            .order_by(events.c.id.desc())
            .limit(20)
        ).scalars()
        for text in found:
            after = json.loads(text or "{}")
            if after.get("path") == w.path and after.get("branch") == w.branch:
                return bool(after.get("branch_created"))
    return False


@retry_lost_read
def list_worktrees(
    q: Queue, repo: str | None = None, *, everything: bool = False, disk: bool = False
) -> list[WorktreeInfo]:
    with q.db.read() as conn:
        stmt = select(worktrees).order_by(worktrees.c.created_at)
        if repo is not None:
            repository_row(conn, repo)
            stmt = stmt.where(worktrees.c.repository == repo)
        if not everything:
            stmt = stmt.where(worktrees.c.state.in_(ACTIVE))
        rows = conn.execute(stmt).all()
    return [listed(r, disk) for r in rows]


def acted_as(let: door.Admitted, by: Authority, actor: str | None) -> str | None:
    """Who a change the door let through is recorded as: the holder ``by`` acted as, the
    person or caller who overrode, else ``actor``."""
    if let.mine:
        return let.holder
    if let.overridden and by.who:
        return by.who
    return actor


def with_paths(q: Queue, found: list[AgentInfo]) -> list[AgentInfo]:
    """``found`` (the queue's agents) with the paths of each one's active worktrees."""
    ids = [a.agent_id for a in found]
    if not ids:
        return found
    where: dict[str, list[str]] = {}
    with q.db.read() as conn:
        for w in conn.execute(
            select(worktrees.c.agent, worktrees.c.path).where(
                worktrees.c.agent.in_(ids), worktrees.c.state.in_(ACTIVE)
            )
        ):
            where.setdefault(w.agent, []).append(w.path)
    return [a.model_copy(update={"worktrees": where.get(a.agent_id, [])}) for a in found]
