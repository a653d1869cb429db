"""Real git repositories for the workspace tests."""

from __future__ import annotations

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
