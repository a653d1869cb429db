"""One case's world: a queue (a new database), the servers and people acting on it, the git
repositories of the faces that touch git, and the issue the case is about (#1), claimed by
its holder through the face's own family of tools, then brought to the case's state.

The callers:

- the holder: server ``run-h`` (agit: acting for its registered agents ``agent-h``, which
  holds #1, and ``agent-s``, which holds #2), the person ``--as run-h``;
- another live caller: server ``run-o`` on the same database (agit: another agit server,
  naming its agent ``agent-o``), the person ``--as run-o``;
- the taker: server ``run-t`` (agit: for ``agent-t``), who claims #1 once it lapsed;
- a person who overrides: ``--as alice --force``, the board's ``alice``.

Every server serves every toolset and profile, with a lease of 600 s (its renewer runs
every 200 s: never inside a case) and the tests gate trusted."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.types import CallToolResult
from sqlalchemy import select, update

from tests.authority import snapshot
from tests.github_fake.server import FakeGitHub
from tests.server.conftest import EVERYTHING
from tests.services.workspaces.gitrepo import commit, make_repo
from tests.workq_cli import workq
from workq.config import Settings
from workq.db.tables import issues as issues_t
from workq.db.tables import worktrees as worktrees_t
from workq.domain.authority import Authority
from workq.domain.decisions import Action, Facts
from workq.server.app import build_server
from workq.server.results import ERROR_META
from workq.services.handle import Queue, load
from workq.services.queue import door
from workq.services.runtime import open_queue

LEASE = 600
H, OTHER_RUN, T = "run-h", "run-o", "run-t"
AGENT = {"h": "agent-h", "o": "agent-o", "t": "agent-t", "s": "agent-s"}
RUN = {"h": H, "o": OTHER_RUN, "t": T}
PERSON = "alice"  # who overrides, on the CLI (--as) and the board (x-workq-actor)
NUMBER, OTHER = 1, 2
REPO, REPO2 = "app", "app2"
_CODE = re.compile(r"\b([A-Z][A-Z_]{2,})\b: ")


class SetupFailed(AssertionError):
    """The world could not be built: a face the setup goes through refused."""


def text_of(result: CallToolResult) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def code_of(result: CallToolResult) -> str:
    """The code of a refused tool call: workq's error object, else the text's ``CODE:``."""
    meta = result.meta or {}
    error = meta.get(ERROR_META)
    if isinstance(error, dict) and error.get("code"):
        details = error.get("details")
        if isinstance(details, dict) and details.get("workq_code"):  # a contract's own code
            return str(details["workq_code"])
        return str(error["code"])
    said = text_of(result)
    try:
        body = json.loads(said)
        if isinstance(body, dict) and body.get("code"):
            return str(body["code"])
    except ValueError:
        pass
    found = _CODE.search(said)
    return found.group(1) if found else f"UNWORDED({said[:80]})"


def cli_code(done: subprocess.CompletedProcess[str]) -> str:
    found = re.search(r"error: ([A-Z][A-Z_]+)", done.stderr)
    if found:
        return found.group(1)
    return f"EXIT{done.returncode}({(done.stderr or done.stdout).strip()[:120]})"


@dataclass
class World:
    """Built by ``open`` and closed by ``close``; one per case."""

    tmp: Path
    settings: Settings
    family: str
    stack: AsyncExitStack = field(default_factory=AsyncExitStack)
    servers: dict[str, Client] = field(default_factory=dict)
    repos: dict[str, Path] = field(default_factory=dict)
    worktree_id: str | None = None
    worktree_path: Path | None = None
    agents: dict[str, str] = field(default_factory=lambda: dict(AGENT))  # agit: registered
    _queue: Queue | None = None  # the test's own reader and writer, opened on first use
    github: FakeGitHub | None = None  # the github family's fake GitHub

    @property
    def plans(self) -> Path:
        return self.tmp / "plans"

    @property
    def agit(self) -> bool:
        return self.family == "agit"

    # -- servers ----------------------------------------------------------------------

    def server_settings(self, run_id: str) -> Settings:
        own = {
            "run_id": run_id,
            "toolsets": EVERYTHING,
            "plans_dir": self.plans,
            "lease_seconds": LEASE,
            "tests_gate": "trust",
        }
        if self.github is not None:
            own["github_repo"] = self.github.repo
        return self.settings.model_copy(update=own)

    async def server(self, who: str) -> Client:
        """Server ``run-<who>``, started (and its run id bound) on first use."""
        if who not in self.servers:
            client = Client(build_server(self.server_settings(RUN[who])))
            await self.stack.enter_async_context(client)
            opened = await client.call_tool("queue_stats", {})  # opens the queue, binds
            if opened.is_error:
                raise SetupFailed(f"server {RUN[who]} did not open: {text_of(opened)}")
            self.servers[who] = client
        return self.servers[who]

    async def call(self, who: str, tool: str, **arguments: Any) -> dict[str, Any]:
        """A setup call through a server: it must succeed."""
        client = await self.server(who)
        result = await client.call_tool(tool, arguments)
        if result.is_error:
            raise SetupFailed(f"setup: {tool}({arguments}) by {RUN[who]}: {text_of(result)}")
        return dict(result.structured_content or {})

    async def close(self) -> None:
        try:
            await self.stack.aclose()
        finally:
            if self._queue is not None:
                self._queue.db.dispose()
                self._queue = None

    def queue(self) -> Queue:
        if self._queue is None:
            self._queue = open_queue(self.settings)
        return self._queue

    # -- the CLI ----------------------------------------------------------------------

    def where(self) -> list[str]:
        if self.settings.database_url:
            return ["--database-url", self.settings.database_url]
        return ["--db", str(self.settings.db_path)]

    def cli(
        self, *args: str, actor: str, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        env = {
            "WORKQ_LEASE_SECONDS": str(LEASE),
            "WORKQ_TESTS_GATE": "trust",
            "WORKQ_PLANS_DIR": str(self.plans),
            "WORKQ_GITHUB_PACE": "0",
        }
        return workq(
            *self.where(), "--as", actor, *args, cwd=cwd or self.tmp, env=env, scrub=("WORKQ_",)
        )

    def cli_ok(self, *args: str, actor: str = H) -> str:
        try:
            done = self.cli(*args, actor=actor)
        except Exception as exc:  # a command that crashed in this process
            raise SetupFailed(f"setup: workq {' '.join(args)} crashed: {exc!r}") from exc
        if done.returncode != 0:
            raise SetupFailed(f"setup: workq {' '.join(args)}: {done.stderr or done.stdout}")
        return done.stdout

    # -- git --------------------------------------------------------------------------

    def repository(self, name: str = REPO, *, remote: bool = False) -> Path:
        """A real repository, registered under ``name`` (made once); with ``remote``, with
        a bare ``origin`` that the fake GitHub reads."""
        if name not in self.repos:
            path = make_repo(self.tmp / name)
            self.repos[name] = path
            if remote:
                self.remote()
            self.cli_ok("repo", "add", name, str(path), *self.repo_options)
        return self.repos[name]

    repo_options: Sequence[str] = ()

    def find_worktree(self, number: int = NUMBER) -> None:
        """The id and path of #N's active worktree, if it has one."""
        with self.queue().db.read() as conn:
            row = conn.execute(
                select(worktrees_t.c.id, worktrees_t.c.path)
                .where(worktrees_t.c.number == number, worktrees_t.c.state == "active")
                .order_by(worktrees_t.c.created_at.desc())
            ).first()
        if row is not None:
            self.worktree_id, self.worktree_path = row.id, Path(row.path)

    def worktree_of(self, number: int) -> list[tuple[str, str]]:
        """#N's active worktrees (id, path): what a sweep may remove."""
        with self.queue().db.read() as conn:
            rows = conn.execute(
                select(worktrees_t.c.id, worktrees_t.c.path)
                .where(worktrees_t.c.number == number, worktrees_t.c.state == "active")
                .order_by(worktrees_t.c.id)
            ).all()
        return [(r.id, r.path) for r in rows]

    def checkout(self) -> Path:
        """Where #1 is worked on: its worktree, else the repository."""
        return self.worktree_path or self.repos[REPO]

    def commit_work(self) -> None:
        commit(self.checkout(), {"src/feature.py": "done = True\n"}, "the work")

    def edit_work(self) -> None:
        (self.checkout() / "src" / "feature.py").write_text("half = True\n")

    # -- the database -----------------------------------------------------------------

    def lapse(self, number: int = NUMBER) -> None:
        """#N's lease ended a second ago (its holder stopped renewing it)."""
        q = self.queue()
        past = q.now() - timedelta(seconds=1)
        q.db.write(
            lambda conn: conn.execute(
                update(issues_t).where(issues_t.c.number == number).values(lease_expires_at=past)
            )
        )

    def row(self, number: int = NUMBER) -> dict[str, Any]:
        with self.queue().db.read() as conn:
            found = conn.execute(select(issues_t).where(issues_t.c.number == number)).first()
        return dict(found._mapping) if found is not None else {}

    def facts(self, action: Action, by: Authority, number: int = NUMBER) -> tuple[Facts, datetime]:
        """The facts the table reads for ``action`` on #N, as the door loads them."""
        with self.queue().db.read() as conn:
            row = load(conn, number)
            return door.facts(conn, row, action, by), datetime.now(UTC)

    def snapshot(self) -> snapshot.Snapshot:
        outside = None
        if self.github is not None:
            writes = [f"{w.method} {w.path}" for w in self.github.writes()]
            outside = [*writes, *(repr(sorted(p.items())) for p in self.github.pulls())]
        return snapshot.take(self.settings, self.repos, self.plans, outside)

    def remote(self) -> Path:
        """A bare repository, ``origin`` of the registered one, that the fake GitHub reads."""
        bare = self.tmp / "remote.git"
        snapshot.git(self.tmp, "init", "-q", "--bare", "-b", "main", str(bare))
        snapshot.git(self.repos[REPO], "remote", "add", "origin", str(bare))
        snapshot.git(self.repos[REPO], "push", "-q", "origin", "main")
        self.repos["remote"] = bare
        return bare
