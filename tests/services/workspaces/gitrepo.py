"""Real git repositories for the workspace tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from workq.vcs import git


def make_repo(path: Path, files: dict[str, str] | None = None) -> Path:
    path.mkdir(parents=True)
    git.run(["init", "-q", "-b", "main"], cwd=path)
    git.run(["config", "user.email", "t@example.invalid"], cwd=path)
    git.run(["config", "user.name", "T"], cwd=path)
    for name, body in (files or {"README.md": "hello\n", "src/app.py": "x = 1\n"}).items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(body)
    git.run(["add", "-A"], cwd=path)
    git.run(["commit", "-q", "-m", "first"], cwd=path)
    return path


def commit(where: Path, files: dict[str, str], message: str = "change") -> str:
    for name, body in files.items():
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        (where / name).write_text(body)
    git.run(["add", "-A"], cwd=where)
    git.run(["commit", "-q", "-m", message], cwd=where)
    return git.head(where)


def log(repo: Path, ref: str = "main") -> list[str]:
    return git.run(["log", "--format=%s", ref], cwd=repo).lines


def repository_state(repo: Path) -> list[tuple[str, bytes]]:
    """The repository's refs, the worktrees git knows (each one's HEAD) and every file of
    every checkout under it, read from disk: no git process (tests compare it before and
    after each call). Left out: the index, which read-only git commands may refresh, and
    the caches the quality gates' tools leave in a checkout (.pytest_cache, __pycache__:
    git ignores them too)."""
    git_dir = repo / ".git"
    kept = [git_dir / "HEAD", git_dir / "packed-refs"]
    kept += [p for p in (git_dir / "refs").rglob("*") if p.is_file()]
    kept += list((git_dir / "worktrees").glob("*/HEAD"))
    kept += [p for p in _checkout_files(repo) if p.is_file()]
    return sorted((str(p.relative_to(repo)), p.read_bytes()) for p in kept if p.is_file())


def _unseen(name: str) -> bool:
    return name in (".git", "__pycache__") or (name.startswith(".") and name.endswith("_cache"))


def _checkout_files(repo: Path) -> Iterator[Path]:
    """Every file under ``repo`` outside .git and the caches, which are never walked into
    (.git holds most of the files)."""
    for folder, dirs, files in os.walk(repo):
        dirs[:] = [d for d in dirs if not _unseen(d)]
        yield from (Path(folder, f) for f in files if not _unseen(f))
