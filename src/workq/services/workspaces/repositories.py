"""Registered repositories: one row per local git repository, identified by its git common
directory (so registering it from any of its worktrees names the same repository); and
which repository an issue belongs to."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select, update

from workq.db.engine import retry_lost_read
from workq.db.tables import issues, repositories, worktrees
from workq.domain import names
from workq.domain.authority import Authority
from workq.domain.decisions import Action
from workq.errors import Conflict, GitFailed, InvalidInput
from workq.schemas import (
    LAND_MODES,
    MERGE_MODES,
    ON_REFUSED,
    Issue,
    Repository,
)
from workq.services.handle import Queue, load, record, to_issue
from workq.services.queue import door, placement
from workq.vcs import git

WORKTREE_FOLDER = ".worktrees"
ACTIVE = ("creating", "active", "merging")
validate_name = names.repository_name


def main_worktree(path: Path) -> Path:
    """The root of the main work tree of the repository ``path`` is in (any worktree of it,
    or a folder inside one). Refuses what is not a git repository, or a bare one."""
    if not path.is_dir():
        raise InvalidInput(f"{path} is not a directory", field="path")
    try:
        common = git.common_dir(path)
    except GitFailed as exc:
        raise InvalidInput(f"{path} is not a git repository", field="path") from exc
    if common.name != ".git":
        raise InvalidInput(
            f"{path} is a bare repository or has a separate git directory: register the "
            "repository from its main work tree",
            field="path",
        )
    return common.parent.resolve()


def _exclude_worktree_folder(root: Path, folder: Path) -> None:
    """Keep the worktree folder out of ``git status`` of the main checkout."""
    try:
        relative = folder.relative_to(root)
    except ValueError:
        return
    exclude = root / ".git" / "info" / "exclude"
    line = f"/{relative.as_posix()}/"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    existing = exclude.read_text() if exclude.exists() else ""
    if line not in existing.splitlines():
        with exclude.open("a") as handle:
            handle.write(("" if existing.endswith("\n") or not existing else "\n") + line + "\n")


def add(
    q: Queue,
    name: str,
    path: Path,
    *,
    default_branch: str | None = None,
    worktree_dir: Path | None = None,
    auto_worktree: bool = False,
    merge_mode: str = "merge",
    land: str = "local",
    github_repo: str | None = None,
    on_refused: str = "return",
    update_branch: bool = True,
) -> Repository:
    """Register the repository at ``path`` as ``name``. ``land="pr"``: its issues' work
    lands through pull requests on ``github_repo`` (by default the GitHub repository its
    ``origin`` remote names)."""
    validate_name(name)
    _check_setting("merge_mode", merge_mode, MERGE_MODES)
    _check_setting("land", land, LAND_MODES)
    _check_setting("on_refused", on_refused, ON_REFUSED)
    root = main_worktree(path.expanduser().resolve())
    branch = default_branch or git.current_branch(root)
    if branch is None:
        raise InvalidInput(
            f"{root} has a detached HEAD: check out the default branch, or name it",
            field="default_branch",
        )
    if not git.branch_exists(root, branch):
        raise InvalidInput(f"{root} has no branch {branch!r}", field="default_branch")
    folder = (worktree_dir.expanduser() if worktree_dir else root / WORKTREE_FOLDER).resolve()
    if folder == root or root.is_relative_to(folder):
        raise InvalidInput("the worktree folder must not contain the repository", field="dir")
    remote = git.remote_url(root)
    github_repo = _github_repo(land, github_repo, remote)
    now = q.now()

    def work(conn: Connection) -> None:
        clash = conn.execute(
            select(repositories.c.name).where(
                (repositories.c.name == name) | (repositories.c.path == str(root))
            )
        ).first()
        if clash is not None:
            raise Conflict(
                f"repository {clash.name!r} is already registered (at {root} or by that name)",
                repo=clash.name,
            )
        conn.execute(
            insert(repositories).values(
                name=name,
                path=str(root),
                default_branch=branch,
                remote_url=remote,
                worktree_dir=str(folder),
                auto_worktree=auto_worktree,
                merge_mode=merge_mode,
                land=land,
                github_repo=github_repo,
                on_refused=on_refused,
                update_branch=update_branch,
                created_at=now,
            )
        )
        record(
            q,
            conn,
            kind="repository_added",
            issue_id=None,
            number=None,
            actor=None,
            now=now,
            after={"repo": name, "path": str(root)},
        )

    q.db.write(work)
    folder.mkdir(parents=True, exist_ok=True)
    _exclude_worktree_folder(root, folder)
    return get(q, name)


def _check_setting(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        shown = name.replace("_", " ")
        raise InvalidInput(f"{shown} must be one of {', '.join(allowed)}", field=name)


def _github_repo(land: str, given: str | None, remote: str | None) -> str | None:
    """The GitHub repository pull requests land on: ``given`` (checked), else the one the
    ``origin`` remote names; required when ``land`` is "pr"."""
    if given is not None:
        given = given.strip()
        if not names.is_github_repo(given):
            raise InvalidInput(
                f"a GitHub repository is OWNER/NAME, not {given!r:.80}", field="github"
            )
        return given
    found = names.github_repo_of_remote(remote or "", host="github.com")
    if found is not None:
        return found
    if land == "pr":
        raise InvalidInput(
            "landing through pull requests needs the GitHub repository they go to",
            field="github",
            hint="name it with --github OWNER/NAME",
        )
    return None


def configure(
    q: Queue,
    name: str,
    *,
    merge_mode: str | None = None,
    land: str | None = None,
    github_repo: str | None = None,
    on_refused: str | None = None,
    update_branch: bool | None = None,
    actor: str | None = None,
) -> Repository:
    """Change how repository ``name`` lands its issues' work; what is not given stays.
    Landings already queued go on as they were asked."""
    validate_name(name)
    changes: dict[str, Any] = {}
    for field, value, allowed in (
        ("merge_mode", merge_mode, MERGE_MODES),
        ("land", land, LAND_MODES),
        ("on_refused", on_refused, ON_REFUSED),
    ):
        if value is not None:
            _check_setting(field, value, allowed)
            changes[field] = value
    if update_branch is not None:
        changes["update_branch"] = update_branch

    def work(conn: Connection) -> None:
        current = row(conn, name)
        wanted = changes.get("land", current.land)
        if github_repo is not None:
            changes["github_repo"] = _github_repo(wanted, github_repo, None)
        elif current.github_repo is None:  # refused for "pr" when nothing names one
            derived = _github_repo(wanted, None, current.remote_url)
            if derived is not None:
                changes["github_repo"] = derived
        if not changes:
            return
        conn.execute(update(repositories).where(repositories.c.name == name).values(**changes))
        record(
            q,
            conn,
            kind="repository_configured",
            issue_id=None,
            number=None,
            actor=actor,
            now=q.now(),
            before={k: current._mapping[k] for k in changes},
            after=changes,
        )

    q.db.write(work)
    return get(q, name)


def row(conn: Connection, name: str) -> Any:
    return placement.registered(conn, name)


def _counts(conn: Connection) -> tuple[dict[str, int], dict[str, int]]:
    wt: dict[str, int] = dict(
        conn.execute(  # type: ignore[arg-type,unused-ignore]
            select(worktrees.c.repository, func.count())
            .where(worktrees.c.state.in_(ACTIVE))
            .group_by(worktrees.c.repository)
        ).all()
    )
    tasks: dict[str, int] = dict(
        conn.execute(  # type: ignore[arg-type,unused-ignore]
            select(issues.c.repository, func.count())
            .where(issues.c.repository.is_not(None))
            .group_by(issues.c.repository)
        ).all()
    )
    return wt, tasks


def _model(r: Any, wt: dict[str, int], tasks: dict[str, int]) -> Repository:
    return Repository(
        name=r.name,
        path=r.path,
        default_branch=r.default_branch,
        remote_url=r.remote_url,
        worktree_dir=r.worktree_dir,
        auto_worktree=bool(r.auto_worktree),
        merge_mode=r.merge_mode,
        land=r.land,
        github_repo=r.github_repo,
        on_refused=r.on_refused,
        update_branch=bool(r.update_branch),
        worktree_count=wt.get(r.name, 0),
        task_count=tasks.get(r.name, 0),
    )


@retry_lost_read
def get(q: Queue, name: str) -> Repository:
    validate_name(name)
    with q.db.read() as conn:
        return _model(row(conn, name), *_counts(conn))


@retry_lost_read
def list_all(q: Queue) -> list[Repository]:
    with q.db.read() as conn:
        rows = conn.execute(select(repositories).order_by(repositories.c.name)).all()
        counts = _counts(conn)
        return [_model(r, *counts) for r in rows]


def assign(
    q: Queue, number: int, name: str | None, *, by: Authority, actor: str | None = None
) -> None:
    """Put issue ``number`` in repository ``name`` (None: in none). While another caller
    holds its claim, only that holder or an override may (the door, ``reshape``: a
    claim's worktree is made in its repository)."""
    if name is not None:
        validate_name(name)

    def work(conn: Connection) -> None:
        door.check(q, conn, load(conn, number, for_update=True), Action.RESHAPE, by)
        placement.place(q, conn, number, name, actor=actor)

    q.db.write(work)


def remove(q: Queue, name: str) -> None:
    """Forget a repository (its issues stay, in no repository). Refused while it has
    active worktrees."""
    validate_name(name)

    def work(conn: Connection) -> None:
        row(conn, name)
        busy = conn.execute(
            select(func.count()).where(
                worktrees.c.repository == name, worktrees.c.state.in_(ACTIVE)
            )
        ).scalar_one()
        if busy:
            raise Conflict(
                f"repository {name!r} has {busy} active worktree(s)",
                hint="merge or remove them first (workq worktree list)",
            )
        conn.execute(update(issues).where(issues.c.repository == name).values(repository=None))
        conn.execute(delete(repositories).where(repositories.c.name == name))

    q.db.write(work)


@retry_lost_read
def tasks(q: Queue, name: str, *, limit: int = 1000) -> list[Issue]:
    """The issues of repository ``name``, by number."""
    validate_name(name)
    with q.db.read() as conn:
        row(conn, name)
        rows = conn.execute(
            select(issues).where(issues.c.repository == name).order_by(issues.c.number).limit(limit)
        ).all()
    return [to_issue(r) for r in rows]
