"""For the work context and docs search tests: a docs tree in a real git repository, the
``workq`` CLI (run in this process), and servers whose caches stay in the test's folder."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests import workq_cli
from tests.services.workspaces.gitrepo import make_repo
from workq.vcs import git

WORKERS = """\
# Workers

Workers run jobs from the queue.

## Lifecycle

A worker starts, takes a job, runs it and reports the result.
Workers that crash are restarted by the supervisor.

## Scaling

Add more worker processes to scale out.
"""
DTO = """\
# DTO validation rules

Every data transfer object (DTO) is validated at the boundary.

## Field rules

Strings are trimmed; empty strings are rejected.
DTO validation errors name the field.
"""
TESTING = """\
# Testing

Run the tests with pytest.

## Fixtures

Use real SQLite files in tmp_path, never mocks. Pytest fixtures build them.

```bash
# Run one file
pytest tests/test_x.py
```
"""
ERRORS = """\
Every error has a code.

# Error codes

INVALID_INPUT: the input is not valid; fix the argument.
"""
README = "# Demo project\n\nA demo. The docs explain workers and DTO validation.\n"
DOCS = {
    "README.md": README,
    "docs/architecture/workers.md": WORKERS,
    "docs/coding_standards/dto.md": DTO,
    "docs/development/testing.md": TESTING,
    "docs/reference/errors.md": ERRORS,
    "src/app.py": "supervisor = None\n",
    ".gitignore": "ignored.md\nnode_modules/\n",
}


@pytest.fixture
def docs_repo(tmp_path: Path) -> Path:
    """A repository with docs, an untracked doc, and docs git ignores or must skip."""
    repo = make_repo(tmp_path / "demo", DOCS)
    (repo / "docs/development/untracked.md").write_text("# Draft\n\nA draft about deployment.\n")
    (repo / "ignored.md").write_text("# Ignored\n\nThe supervisor is mentioned here too.\n")
    (repo / "node_modules/pkg").mkdir(parents=True)
    (repo / "node_modules/pkg/readme.md").write_text("# Pkg\n\nsupervisor supervisor\n")
    # A worktree inside the repository: its docs are another checkout's.
    git.run(["worktree", "add", "-q", "-b", "other", str(repo / ".worktrees/other")], cwd=repo)
    return repo


def environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    """What a workq process gets: caches under the test's folder, never in $HOME."""
    return {"WORKQ_CACHE_DIR": str(tmp_path / "cache"), **extra}


def workq(
    db: Path, *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``workq --db DB ARGS`` in ``cwd``, in this process."""
    return workq_cli.workq("--db", db, *args, cwd=cwd, env=env)


def workq_json(db: Path, *args: str, cwd: Path, env: dict[str, str] | None = None) -> Any:
    done = workq(db, *args, "--json", cwd=cwd, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def status(repo: Path) -> list[str]:
    """Everything git sees in the work tree, ignored files included."""
    return git.run(["status", "--porcelain", "--ignored", "--untracked-files=all"], cwd=repo).lines
