"""The workers that the crash tests run and kill.

Each worker is one OS process doing a random mixed workload on one SQLite file, through
one of three doors:

- ``service``: the services, in process (forked from the fork server, so it starts fast);
- ``mcp``: a client driving a real ``workq serve`` over stdio with the SDK's client (the
  server is a real exec'd process; the harness kills either of the two);
- ``cli``: a driver running one ``workq`` command per step (the harness kills the command).

Every worker keeps a journal, one JSON line per event, written with a single ``write(2)``
on an ``O_APPEND`` descriptor, so a ``kill -9`` cannot cut a line: ``intent`` before a
write is attempted, ``ack`` once the worker saw it succeed (with what it returned),
``refused`` with the error code of a clean refusal, ``lost`` when the door closed under it
(the other process was killed), ``crash`` for anything unexpected. The invariants compare
the acknowledged writes with the database.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workq.domain.authority import Authority

# The codes a worker may be refused with during the torture: lost races and leases taken
# over (a killed agent's work), issues deleted under it, a claim that came to wait on an
# issue another worker made it depend on, and a busy database.
EXPECTED_REFUSALS = frozenset(
    {
        "NOT_HOLDER",
        "OPEN_BLOCKERS",
        "NOT_FOUND",
        "NOT_CLAIMABLE",
        "ALREADY_CLAIMED",
        "DATABASE_BUSY",
        "INVALID_TRANSITION",
    }
)
SERVICE_LEASE = 5  # seconds; service and CLI workers never renew their claims
MCP_LEASE = 15  # a running server renews its own claims every lease/3 seconds
BUSY_TIMEOUT_MS = 5000


@dataclass(frozen=True)
class Spec:
    kind: str  # service | mcp | cli
    name: str  # the incarnation: its run id and actor, never reused
    url: str  # the database: sqlite:///path, or postgresql+psycopg://...
    workdir: str
    seed: int
    pause: float = 0.0  # seconds between steps, to leave the CPU to others


def db_args(url: str) -> list[str]:
    """How a user names the database on the command line: --db for a SQLite file."""
    if url.startswith("sqlite:///"):
        return ["--db", url.removeprefix("sqlite:///")]
    return ["--database-url", url]


class Refused(Exception):
    def __init__(self, code: str, message: str = "") -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


class Lost(Exception):
    """The other end went away: the server or the command was killed."""


class Journal:
    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, event: str, op: str, **data: Any) -> None:
        line = json.dumps({"t": time.time(), "event": event, "op": op, **data}, default=str)
        os.write(self.fd, (line + "\n").encode())


def journal_path(workdir: str, name: str) -> Path:
    return Path(workdir) / "journals" / f"{name}.jsonl"


def stop_path(workdir: str) -> Path:
    return Path(workdir) / "STOP"


def log_path(workdir: str, name: str) -> Path:
    return Path(workdir) / "logs" / f"{name}.log"


# -- the doors ------------------------------------------------------------------------


class Door:
    """One way into the queue. Each method returns what the write gave back, or raises
    Refused (a clean workq error) or Lost (the other process is gone)."""

    fatal_loss = False  # whether a Lost ends the worker (its server is gone)

    def create(self, title: str) -> int:
        raise NotImplementedError

    def depend(self, blocker: int, blocked: int) -> None:
        raise NotImplementedError

    def claim_next(self) -> int | None:
        raise NotImplementedError

    def complete(self, number: int) -> bool:
        """True if this call completed it, False if it was already done."""
        raise NotImplementedError

    def release(self, number: int) -> None:
        raise NotImplementedError

    def block(self, number: int, reason: str) -> None:
        raise NotImplementedError

    def unblock(self, number: int) -> None:
        raise NotImplementedError

    def comment(self, number: int, body: str) -> None:
        raise NotImplementedError

    def retitle(self, number: int, title: str) -> None:
        raise NotImplementedError

    def delete(self, number: int) -> None:
        raise NotImplementedError

    def ready(self) -> list[int]:
        raise NotImplementedError


class ServiceDoor(Door):
    def __init__(self, spec: Spec) -> None:
        from workq.config import Settings
        from workq.services.runtime import open_queue

        self.name = spec.name
        self.queue = open_queue(
            Settings(
                database_url=spec.url,
                lease_seconds=SERVICE_LEASE,
                busy_timeout_ms=BUSY_TIMEOUT_MS,
            )
        )

    @contextmanager
    def _clean(self) -> Iterator[None]:
        from workq.errors import WorkqError

        try:
            yield
        except WorkqError as exc:
            raise Refused(exc.code, exc.message) from exc

    def create(self, title: str) -> int:
        from workq.services.queue import issues

        with self._clean():
            return issues.create(self.queue, title=title, actor=self.name).number

    def depend(self, blocker: int, blocked: int) -> None:
        from workq.services.queue import dependencies

        with self._clean():
            dependencies.depend(self.queue, blocker=blocker, blocked=blocked, actor=self.name)

    def claim_next(self) -> int | None:
        from workq.services.queue import claims

        with self._clean():
            got = claims.claim_next(self.queue, Authority.of({self.name}))
        return None if got is None else got.number

    def complete(self, number: int) -> bool:
        from workq.services.queue import claims

        with self._clean():
            return not claims.complete(self.queue, number, Authority.of({self.name})).already_done

    def release(self, number: int) -> None:
        from workq.services.queue import claims

        with self._clean():
            claims.release(self.queue, number, Authority.of({self.name}))

    def block(self, number: int, reason: str) -> None:
        from workq.services.queue import blocking

        with self._clean():
            blocking.block(
                self.queue, number, reason, by=Authority.of({self.name}), actor=self.name
            )

    def unblock(self, number: int) -> None:
        from workq.services.queue import blocking

        with self._clean():
            blocking.unblock(self.queue, number, actor=self.name)

    def comment(self, number: int, body: str) -> None:
        from workq.services.queue import notes

        with self._clean():
            notes.comment(self.queue, number, body, author=self.name)

    def retitle(self, number: int, title: str) -> None:
        from workq.services.queue import issues

        with self._clean():
            issues.update_issue(
                self.queue, number, title=title, actor=self.name, by=Authority.of({self.name})
            )

    def delete(self, number: int) -> None:
        from workq.services.queue import issues

        with self._clean():
            issues.delete_issue(self.queue, number, actor=self.name, by=Authority.of({self.name}))

    def ready(self) -> list[int]:
        from workq.services.queue import ready_queue

        with self._clean():
            return [i.number for i in ready_queue.ready(self.queue, limit=20)]


class McpDoor(Door):
    """A real ``workq serve`` over stdio, driven with the SDK's client from sync code."""

    fatal_loss = True

    def __init__(self, spec: Spec, portal: Any, client: Any) -> None:
        self.portal = portal
        self.client = client

    @staticmethod
    def server_command(spec: Spec) -> tuple[list[str], dict[str, str]]:
        args = ["-m", "workq.cli.main", *db_args(spec.url), "serve", "--run-id", spec.name]
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", spec.workdir),
            "WORKQ_LEASE_SECONDS": str(MCP_LEASE),
            "WORKQ_BUSY_TIMEOUT_MS": str(BUSY_TIMEOUT_MS),
            "WORKQ_TOOLSETS": "core,recovery,deps,notes",
            "WORKQ_PLANS_DIR": str(Path(spec.workdir) / "plans"),
        }
        return [sys.executable, *args], env

    def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        from mcp import MCPError

        try:
            result = self.portal.call(self.client.call_tool, tool, arguments)
        except (MCPError, OSError, EOFError) as exc:
            raise Lost(f"{tool}: {exc}") from exc
        if result.is_error:
            error = (result.meta or {}).get("workq/error", {})
            text = result.content[0].text if result.content else ""
            raise Refused(error.get("code", "UNKNOWN"), text)
        return dict(result.structured_content or {})

    def create(self, title: str) -> int:
        return int(self.call("issue_create", title=title)["number"])

    def depend(self, blocker: int, blocked: int) -> None:
        self.call("issue_depend", blocker=blocker, blocked=blocked)

    def claim_next(self) -> int | None:
        got = self.call("issue_claim_next")
        return int(got["number"]) if got["claimed"] else None

    def complete(self, number: int) -> bool:
        return not self.call("issue_complete", number=number).get("already_done", False)

    def release(self, number: int) -> None:
        self.call("issue_release", number=number)

    def block(self, number: int, reason: str) -> None:
        self.call("issue_block", number=number, reason=reason)

    def unblock(self, number: int) -> None:
        self.call("issue_unblock", number=number)

    def comment(self, number: int, body: str) -> None:
        self.call("issue_comment", number=number, body=body)

    def retitle(self, number: int, title: str) -> None:
        self.call("issue_update", number=number, title=title)

    def delete(self, number: int) -> None:
        self.call("issue_delete", number=number)

    def ready(self) -> list[int]:
        issue = self.call("issue_ready").get("issue")
        return [] if issue is None else [int(issue["number"])]


class CliDoor(Door):
    """One ``workq`` process per step. The harness kills these processes."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.base = [sys.executable, "-m", "workq.cli.main", *db_args(spec.url), "--as", spec.name]
        self.env = {
            **os.environ,
            "WORKQ_LEASE_SECONDS": str(SERVICE_LEASE),
            "WORKQ_BUSY_TIMEOUT_MS": str(BUSY_TIMEOUT_MS),
            "WORKQ_RUN_ID": spec.name,
        }

    def run(self, *args: str) -> Any:
        done = subprocess.run(
            [*self.base, *args],
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.spec.workdir,
            timeout=120,
        )
        if done.returncode < 0:
            raise Lost(f"workq {args[0]} died of signal {-done.returncode}")
        if done.returncode == 1 and done.stderr.startswith("error: "):
            code = done.stderr[len("error: ") :].split(":", 1)[0]
            raise Refused(code, done.stderr.strip())
        if args[0] == "claim-next" and done.returncode == 2:
            return None
        if done.returncode != 0:
            raise RuntimeError(f"workq {' '.join(args)} exited {done.returncode}: {done.stderr}")
        return json.loads(done.stdout) if "--json" in args else done.stdout

    def create(self, title: str) -> int:
        return int(self.run("create", title, "--json")["number"])

    def depend(self, blocker: int, blocked: int) -> None:
        self.run("depend", str(blocked), "--on", str(blocker))

    def claim_next(self) -> int | None:
        got = self.run("claim-next", "--json")  # the claim, as issue_claim_next answers it
        return None if got is None else int(got["number"])

    def complete(self, number: int) -> bool:
        return not self.run("complete", str(number), "--json")["already_done"]

    def release(self, number: int) -> None:
        self.run("release", str(number))

    def block(self, number: int, reason: str) -> None:
        self.run("block", str(number), reason)

    def unblock(self, number: int) -> None:
        self.run("unblock", str(number))

    def comment(self, number: int, body: str) -> None:
        self.run("comment", str(number), body)

    def retitle(self, number: int, title: str) -> None:
        self.run("update", str(number), "--title", title)

    def delete(self, number: int) -> None:
        self.run("delete", str(number), "--yes")

    def ready(self) -> list[int]:
        return [int(i["number"]) for i in self.run("ready", "--json")]


# -- the workload ---------------------------------------------------------------------


def workload(spec: Spec, door: Door, journal: Journal) -> None:
    """Random steps until the STOP file appears. A held claim is always finished next."""
    worker = Worker(spec, door, journal)
    step = 0
    stop = stop_path(spec.workdir)
    while not stop.exists():
        step += 1
        worker.step(f"{spec.name}-{step}")
        if spec.pause:
            time.sleep(spec.pause * worker.rng.random())


class Worker:
    """A worker's random steps, and what it remembers between them."""

    def __init__(self, spec: Spec, door: Door, journal: Journal) -> None:
        self.door = door
        self.journal = journal
        self.rng = random.Random(spec.seed)
        self.mine: list[int] = []  # issues this worker created
        self.seen: list[int] = []  # issues it has come across
        self.blocked: list[int] = []  # issues it blocked
        self.held: int | None = None

    def attempt(self, op: str, action: Callable[..., Any], *args: Any, **data: Any) -> Any:
        self.journal.write("intent", op, **data)
        try:
            result = action(*args)
        except Refused as exc:
            self.journal.write("refused", op, code=exc.code, **data)
            return exc
        except Lost as exc:
            self.journal.write("lost", op, detail=str(exc), **data)
            if self.door.fatal_loss:
                raise
            return exc
        self.journal.write("ack", op, result=result, **data)
        return result

    def step(self, token: str) -> None:
        rng, door = self.rng, self.door
        roll = rng.random()
        if self.held is not None:
            self.finish(token, roll)
        elif roll < 0.30:
            self.create(token)
        elif roll < 0.65:
            self.claim()
        elif roll < 0.72 and self.seen:
            number = rng.choice(self.seen[-50:])
            body = f"note {token}"
            self.attempt("comment", door.comment, number, body, number=number, body=body)
        elif roll < 0.78 and self.mine:
            number = rng.choice(self.mine[-50:])
            title = f"renamed {token}"
            self.attempt("retitle", door.retitle, number, title, number=number, title=title)
        elif roll < 0.84 and self.blocked:
            number = self.blocked.pop(rng.randrange(len(self.blocked)))
            self.attempt("unblock", door.unblock, number, number=number)
        elif roll < 0.86 and self.mine:
            number = self.mine.pop(rng.randrange(len(self.mine)))
            self.attempt("delete", door.delete, number, number=number)
        else:
            got = self.attempt("ready", door.ready)
            if isinstance(got, list):
                self.seen.extend(got)

    def finish(self, token: str, roll: float) -> None:
        """Complete, release or block the claim held."""
        assert self.held is not None
        number, self.held = self.held, None
        if roll < 0.75:
            self.attempt("complete", self.door.complete, number, number=number)
        elif roll < 0.85:
            self.attempt("release", self.door.release, number, number=number)
        else:
            reason = f"blocked by {token}"
            got = self.attempt("block", self.door.block, number, reason, number=number)
            if not isinstance(got, Refused):
                self.blocked.append(number)

    def create(self, token: str) -> None:
        title = f"task {token}"
        number = self.attempt("create", self.door.create, title, title=title)
        if isinstance(number, int):
            if self.seen and self.rng.random() < 0.4:
                blocker = self.rng.choice(self.seen[-30:])
                self.attempt(
                    "depend", self.door.depend, blocker, number, blocker=blocker, blocked=number
                )
            self.mine.append(number)
            self.seen.append(number)

    def claim(self) -> None:
        got = self.attempt("claim", self.door.claim_next)
        if isinstance(got, int):
            self.held = got
            self.seen.append(got)


def run(spec: Spec) -> None:
    """The body of a worker process (the target of the fork server)."""
    journal_path(spec.workdir, spec.name).parent.mkdir(parents=True, exist_ok=True)
    log_path(spec.workdir, spec.name).parent.mkdir(parents=True, exist_ok=True)
    log = os.open(log_path(spec.workdir, spec.name), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.dup2(log, 1)
    os.dup2(log, 2)
    journal = Journal(journal_path(spec.workdir, spec.name))
    journal.write("start", "-", pid=os.getpid(), kind=spec.kind)
    try:
        if spec.kind == "service":
            workload(spec, ServiceDoor(spec), journal)
        elif spec.kind == "cli":
            workload(spec, CliDoor(spec), journal)
        elif spec.kind == "mcp":
            _run_mcp(spec, journal)
        else:
            raise ValueError(spec.kind)
    except BaseException as exc:
        journal.write("crash", "-", error=repr(exc), trace=traceback.format_exc())
        sys.stdout.flush()
        os._exit(3)
    journal.write("stop", "-")
    sys.stdout.flush()
    os._exit(0)


def _run_mcp(spec: Spec, journal: Journal) -> None:
    from anyio.from_thread import start_blocking_portal
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    command, env = McpDoor.server_command(spec)
    params = StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=spec.workdir)
    errlog = log_path(spec.workdir, f"{spec.name}.server").open("a")
    client = Client(stdio_client(params, errlog=errlog), read_timeout_seconds=60)
    with (
        start_blocking_portal("asyncio") as portal,
        portal.wrap_async_context_manager(client) as connected,
    ):
        journal.write("connected", "-")
        try:
            workload(spec, McpDoor(spec, portal, connected), journal)
        except Lost:
            # The server was killed: leave without the SDK's orderly shutdown of a dead pipe.
            sys.stdout.flush()
            os._exit(0)
