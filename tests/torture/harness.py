"""The crash harness: a pool of workers on one SQLite file, one of them killed with SIGKILL
at a random moment, replaced, and every invariant checked, again and again.

Victims, chosen at random in proportion to what is left of each budget:

- ``service``: a worker using the services in process;
- ``serve``: the ``workq serve`` process an MCP client is driving (the client then sees its
  server gone and is replaced);
- ``client``: the MCP client process (its server must then exit by itself);
- ``cli``: a running ``workq`` command.

Used by tests/torture/test_crash.py (a bounded run) and scripts/soak.py (a timed one).
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from sqlalchemy import text

from tests.torture import procs
from tests.torture.invariants import Checker, Tally
from tests.torture.workload import (
    EXPECTED_REFUSALS,
    MCP_LEASE,
    SERVICE_LEASE,
    Spec,
    db_args,
    journal_path,
    log_path,
    run,
    stop_path,
)
from workq.config import Settings
from workq.domain.authority import Authority
from workq.services.queue import claims, issues
from workq.services.runtime import open_queue

KINDS = ("service", "serve", "client", "cli")
DOOR_OF = {"service": "service", "serve": "mcp", "client": "mcp", "cli": "cli"}
EXIT_TIMEOUT = 30.0  # how long a process may take to leave once it has to


@dataclass
class Worker:
    slot: str
    spec: Spec
    process: BaseProcess
    started: float


@dataclass
class Report:
    kills: Counter[str] = field(default_factory=Counter)
    spawned: Counter[str] = field(default_factory=Counter)
    rescued: int = 0
    drained: int = 0
    elapsed: float = 0.0
    issues: int = 0
    events: int = 0
    tally: Tally = field(default_factory=Tally)

    @property
    def crashes_survived(self) -> int:
        return sum(self.kills.values())

    def lines(self) -> list[str]:
        t = self.tally
        return [
            f"kill -9 survived: {self.crashes_survived} "
            f"({', '.join(f'{k} {n}' for k, n in sorted(self.kills.items()))}) "
            f"in {self.elapsed:.0f} s; processes started: {sum(self.spawned.values())}",
            f"invariant checks: {t.checks}; violations: {len(t.violations)}; "
            f"worker crashes: {len(t.crashes)}",
            f"integrity checks (PRAGMA integrity_check after every kill): "
            f"{t.integrity_checks}; damaged: {len(t.damaged)}",
            f"writes attempted: {t.intents}; acknowledged: {sum(t.acked.values())} "
            f"({', '.join(f'{k} {n}' for k, n in sorted(t.acked.items()))})",
            f"acknowledged writes lost: {t.lost_writes}; double claims: {t.double_claims}",
            f"claims: {t.claims} (takeovers of expired leases: {t.takeovers}); "
            f"completions: {t.completions}; replies lost to a kill: {t.lost_replies}",
            f"clean refusals: {dict(sorted(t.refusals.items()))}",
            f"stranded claims taken again after their lease: {self.rescued}; "
            f"issues drained at the end: {self.drained}; issues {self.issues}, "
            f"events {self.events}",
        ]

    def figures(self) -> dict[str, Any]:
        t = self.tally
        return {
            "crashes_survived": self.crashes_survived,
            "kills": dict(self.kills),
            "elapsed_s": round(self.elapsed, 1),
            "checks": t.checks,
            "integrity_checks": t.integrity_checks,
            "damaged": len(t.damaged),
            "writes_attempted": t.intents,
            "writes_acknowledged": sum(t.acked.values()),
            "writes_lost": t.lost_writes,
            "double_claims": t.double_claims,
            "takeovers": t.takeovers,
            "rescued": self.rescued,
            "refusals": dict(t.refusals),
            "violations": len(t.violations),
            "issues": self.issues,
            "events": self.events,
        }


class Torture:
    def __init__(
        self,
        workdir: Path,
        *,
        seed: int,
        url: str | None = None,
        pool: dict[str, int] | None = None,
        seed_issues: int = 40,
        pause: float = 0.01,
    ) -> None:
        """On ``url`` (an empty database), by default a SQLite file in ``workdir``."""
        self.workdir = workdir
        self.url = url or f"sqlite:///{workdir / 'queue.db'}"
        self.marker = b"\0".join(arg.encode() for arg in db_args(self.url))
        self.rng = random.Random(seed)
        self.pool = pool or {"service": 3, "mcp": 1, "cli": 1}
        self.pause = pause
        self.pace = 0.0  # extra seconds between kills, on average (the soak's rate)
        self.workers: dict[str, Worker] = {}
        self.generation: Counter[str] = Counter()
        self.kind_of: dict[str, str] = {}
        self.deaths: dict[str, float] = {}
        self.report = Report()
        (workdir / "journals").mkdir(parents=True, exist_ok=True)
        (workdir / "logs").mkdir(parents=True, exist_ok=True)
        stop_path(str(workdir)).unlink(missing_ok=True)
        titles = [f"seed {n}" for n in range(seed_issues)]
        queue = open_queue(Settings(database_url=self.url), migrate=True)
        try:
            for title in titles:
                issues.create(queue, title=title, actor="seed")
        finally:
            queue.db.dispose()
        self.checker = Checker(
            self.url,
            workdir / "journals",
            renews=lambda name: self.kind_of.get(name) == "mcp",
            died_at=self.deaths.get,
            allowed_refusals=EXPECTED_REFUSALS,
            seeded_titles=titles,
        )
        self.context = procs.forkserver()

    # -- the pool -------------------------------------------------------------------

    def spawn(self, slot: str, door: str) -> Worker:
        self.generation[slot] += 1
        name = f"{slot}g{self.generation[slot]}"
        spec = Spec(
            kind=door,
            name=name,
            url=self.url,
            workdir=str(self.workdir),
            seed=self.rng.randrange(2**32),
            pause=self.pause,
        )
        process = self.context.Process(target=run, args=(spec,), name=name, daemon=False)
        process.start()
        worker = Worker(slot, spec, process, time.monotonic())
        self.workers[slot] = worker
        self.kind_of[name] = door
        self.report.spawned[door] += 1
        return worker

    def start(self) -> None:
        for door, count in self.pool.items():
            for i in range(count):
                self.spawn(f"{door}{i}", door)

    def server_of(self, worker: Worker) -> list[int]:
        return procs.pids_with(b"serve\0--run-id\0" + worker.spec.name.encode() + b"\0")

    def commands(self) -> list[int]:
        """The ``workq`` commands the CLI workers are running right now."""
        marker = b"workq.cli.main\0" + self.marker
        return procs.pids_with(marker, excluding=b"\0serve\0")

    def _busy(self, worker: Worker) -> bool:
        """Alive and past its start: it has had a write acknowledged."""
        return worker.process.is_alive() and self.checker.acks_by_worker[worker.spec.name] > 0

    def candidates(self, kind: str) -> list[Any]:
        self.checker.read_journals()
        door = DOOR_OF[kind]
        if kind == "cli":
            return self.commands()
        busy = [w for w in self.workers.values() if w.spec.kind == door and self._busy(w)]
        if kind == "serve":
            return [w for w in busy if self.server_of(w)]
        return busy

    # -- killing --------------------------------------------------------------------

    def kill(self, kind: str, target: Any) -> bool:
        """SIGKILL the target and replace what must be replaced. False if it was gone."""
        if kind == "cli":
            return _sigkill(target) and not procs.wait_gone([target], EXIT_TIMEOUT)
        worker: Worker = target
        name = worker.spec.name
        if kind == "service":
            if not _sigkill(worker.process.pid):
                return False
            worker.process.join(EXIT_TIMEOUT)
            self.deaths[name] = time.time()
        elif kind == "serve":
            servers = self.server_of(worker)
            if not servers or not _sigkill(servers[0]):
                return False
            self.deaths[name] = time.time()
            procs.wait_gone(servers, EXIT_TIMEOUT)
            worker.process.join(EXIT_TIMEOUT)
            if worker.process.is_alive():
                self.checker.fail(f"{name}: the client stalled after its server was killed")
                worker.process.kill()
                worker.process.join(EXIT_TIMEOUT)
        elif kind == "client":
            servers = self.server_of(worker)
            if not _sigkill(worker.process.pid):
                return False
            worker.process.join(EXIT_TIMEOUT)
            left = procs.wait_gone(servers, EXIT_TIMEOUT)
            if left:
                self.checker.fail(f"{name}: workq serve kept running after its client died")
                for pid in left:
                    _sigkill(pid)
            self.deaths[name] = time.time()
        self.spawn(worker.slot, worker.spec.kind)
        return True

    def _reap(self) -> None:
        """Replace workers that left without being killed (a crash, or a lost server)."""
        for worker in list(self.workers.values()):
            if worker.process.is_alive() or worker.process.exitcode is None:
                continue
            name = worker.spec.name
            self.checker.fail(
                f"{name} exited by itself with status {worker.process.exitcode}; "
                f"see {log_path(str(self.workdir), name)}"
            )
            self.deaths[name] = time.time()
            self.spawn(worker.slot, worker.spec.kind)

    def run(
        self,
        budget: dict[str, int],
        *,
        time_limit: float,
        progress: Callable[[Report], None] | None = None,
    ) -> Report:
        """Spend the kill budget (checking after every kill), then stop and drain.
        ``progress`` is called after every check."""
        started = time.monotonic()
        left = {k: n for k, n in budget.items() if n > 0}
        self.start()
        try:
            while left and time.monotonic() - started < time_limit:
                self._reap()
                kind = self.rng.choices(list(left), weights=list(left.values()))[0]
                targets = self.candidates(kind)
                if not targets:
                    time.sleep(0.05)
                    continue
                target = self.rng.choice(targets)
                time.sleep(self.rng.uniform(0.0, 0.3) + self.pace * self.rng.random() * 2)
                if not self.kill(kind, target):
                    continue
                self.report.kills[kind] += 1
                left[kind] -= 1
                if not left[kind]:
                    del left[kind]
                self.checker.check()
                if progress is not None:
                    self.report.elapsed = time.monotonic() - started
                    self.report.tally = self.checker.tally
                    progress(self.report)
        finally:
            self.stop()
        self.checker.check()
        self.rescue()
        self.checker.check()
        self.report.elapsed = time.monotonic() - started
        self.report.tally = self.checker.tally
        with self.checker.queue.db.read() as conn:
            self.report.issues = conn.execute(text("SELECT count(*) FROM issues")).scalar_one()
            self.report.events = conn.execute(text("SELECT count(*) FROM events")).scalar_one()
        return self.report

    def run_for(
        self,
        seconds: float,
        *,
        kills_per_minute: float,
        progress: Callable[[Report], None] | None = None,
    ) -> Report:
        """The soak: for ``seconds``, kill at about ``kills_per_minute`` (paced: a pause
        between kills), checking every invariant after each; then stop and drain."""
        total = max(1, int(seconds / 60 * kills_per_minute))
        share = {"service": 0.6, "serve": 0.15, "client": 0.1, "cli": 0.15}
        budget = {k: max(1, round(total * f)) for k, f in share.items()}
        self.pace = 60.0 / kills_per_minute if kills_per_minute > 0 else 0.0
        return self.run(budget, time_limit=seconds, progress=progress)

    def stop(self) -> None:
        """Ask every worker to stop, wait for them and their servers, record them dead."""
        stop_path(str(self.workdir)).touch()
        for worker in self.workers.values():
            worker.process.join(EXIT_TIMEOUT)
            if worker.process.is_alive():
                self.checker.fail(f"{worker.spec.name} did not stop within {EXIT_TIMEOUT} s")
                worker.process.kill()
                worker.process.join(EXIT_TIMEOUT)
        mine = procs.pids_with(b"workq.cli.main\0" + self.marker + b"\0")  # serve, commands
        left = procs.wait_gone(mine, EXIT_TIMEOUT)
        if left:
            self.checker.fail(f"processes still running after every worker stopped: {left}")
            for pid in left:
                _sigkill(pid)
        now = time.time()
        for name in self.kind_of:
            self.deaths.setdefault(name, now)

    def rescue(self) -> None:
        """Once the leases have run out, every claim left by a dead worker is taken again,
        and the whole queue can be drained: only blocked issues (and what waits on them)
        stay behind."""
        queue = open_queue(Settings(database_url=self.url, lease_seconds=60), migrate=False)
        later = datetime.now(UTC) + timedelta(seconds=max(MCP_LEASE, SERVICE_LEASE) + 5)
        queue.clock = lambda: later
        try:
            while (got := claims.claim_next(queue, Authority.of({"rescuer"}))) is not None:
                if got.previous_holder is not None:
                    self.report.rescued += 1
                claims.complete(queue, got.number, Authority.of({"rescuer"}))
                self.report.drained += 1
            with queue.db.read() as conn:
                stuck = conn.execute(
                    text(
                        "SELECT number FROM issues WHERE status != 'done' AND NOT is_blocked "
                        "AND open_blockers = 0"
                    )
                ).all()
            if stuck:
                self.checker.fail(f"ready issues nobody could claim: {stuck[:10]}")
        finally:
            queue.db.dispose()


def _sigkill(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


def journals_of(workdir: Path) -> list[Path]:
    return sorted((workdir / "journals").glob("*.jsonl"))


__all__ = ["KINDS", "Report", "Torture", "journal_path"]
