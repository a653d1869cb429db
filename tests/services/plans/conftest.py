"""Helpers for plan mode and workflow tests: servers working in ``tmp_path`` (so plan files
land in ``tmp_path/plans``), either real ``workq serve`` subprocesses (``serve``) or the same
server in this process (``serve_here``), and plan files filled in the way an agent edits
them."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, chdir
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.server.conftest import CALL_TIMEOUT
from workq.config import Settings
from workq.server.app import build_server

WORKQ = str(Path(sys.executable).with_name("workq"))

FILLED = {
    "Findings": "The parser lives in src/keys.py; nothing handles modes yet.",
    "Approach": "Add a mode table and a dispatcher; keep the old bindings as insert mode.",
    "Risks": "Conflicts with existing shortcuts: the dispatcher falls back to them.",
    "Tasks": (
        "- [ ] Add the mode table\n"
        "- [ ] Document the modes\n"
        "- [ ] Wire the dispatcher (after 1)\n"
        "- [ ] End-to-end tests (after 1, 3)\n"
    ),
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def serve_params(
    workdir: Path,
    run_id: str,
    *args: str,
    db: str = "queue.db",
    plans_dir: str | None = None,
) -> StdioServerParameters:
    """``workq --db DB serve --run-id RUN_ID ARGS`` run in ``workdir``."""
    env = {"WORKQ_ACTOR": "tests", "PATH": os.environ.get("PATH", "")}
    if plans_dir is not None:
        env["WORKQ_PLANS_DIR"] = plans_dir
    return StdioServerParameters(
        command=WORKQ,
        args=["--db", db, "serve", "--run-id", run_id, *args],
        env=env,
        cwd=workdir,
    )


@asynccontextmanager
async def serve(
    workdir: Path,
    run_id: str,
    *args: str,
    db: str = "queue.db",
    plans_dir: str | None = None,
) -> AsyncIterator[Client]:
    """A client of a real ``workq serve`` subprocess; its stderr goes to a log in workdir."""
    params = serve_params(workdir, run_id, *args, db=db, plans_dir=plans_dir)
    with (workdir / f"serve-{run_id}.log").open("a") as log:
        transport = stdio_client(params, errlog=log)
        async with Client(transport, read_timeout_seconds=CALL_TIMEOUT) as client:
            yield client


@asynccontextmanager
async def serve_here(
    workdir: Path,
    run_id: str,
    *,
    db: str = "queue.db",
    **settings: Any,
) -> AsyncIterator[Client]:
    """The server ``serve(workdir, run_id, ...)`` starts, built and run in this process
    while it works in ``workdir``: ``settings`` are what the flags would set (``toolsets``,
    ``tests_gate``, ...); the rest comes from the environment, as for ``workq serve``."""
    with chdir(workdir):
        server = build_server(Settings(db_path=workdir / db, run_id=run_id, **settings))
        async with Client(server) as client:
            yield client


def fill(path: Path, sections: dict[str, str] | None = None) -> None:
    """Write under each named section's template comment, as an agent would."""
    text = path.read_text()
    for name, body in (FILLED if sections is None else sections).items():
        start = text.index(f"## {name}")
        end = text.index("-->", start) + len("-->")
        text = f"{text[:end]}\n\n{body.rstrip()}\n{text[end:]}"
    path.write_text(text)


def tree(root: Path) -> dict[str, bytes | str]:
    """Every file and symlink under ``root`` with its content or target."""
    found: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        if path.is_symlink():
            found[key] = f"-> {os.readlink(path)}"
        elif path.is_file():
            found[key] = path.read_bytes()
    return found
