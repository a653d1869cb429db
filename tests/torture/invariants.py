"""What must hold after every crash, checked against the database and the workers' journals.

- SQLite's ``integrity_check`` and ``foreign_key_check`` are clean.
- ``workq doctor`` finds nothing but expired leases: blocked counts equal the graph, no
  half-made claim, no orphan rows, the number counter ahead of every number.
- The audit history, replayed in commit order, never hands an issue to a second holder:
  a plain claim only of a free issue; a takeover only from the holder of record, and only
  once that holder's lease had run out (for an agent that renews its leases, only once it
  was dead); completion only by the holder; each issue completed at most once. Every
  issue's current holder is the one the replay says.
- Every write a worker saw acknowledged is in the database (its event row is written in
  the same transaction), and every issue in the database was asked for by some worker.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, text

from workq.config import Settings
from workq.errors import CorruptDatabase
from workq.services.handle import Queue
from workq.services.maintenance import maintenance
from workq.services.runtime import open_queue

# Findings of doctor that a crash may legitimately leave: a dead agent's claim, whose
# lease has run out, waiting for the next claimer to take it over.
TOLERATED_FINDINGS = frozenset({"stale_claim"})
CLAIM_KINDS = frozenset({"claimed", "claim_takeover"})
SETTLE = 60.0  # seconds: longer than any write transaction (3 busy timeouts and backoff)
ENDS_A_CLAIM = frozenset({"completed", "released", "blocked", "deleted", "repaired"})

Key = tuple[str, int, Any]


@dataclass
class Holding:
    holder: str
    lease_until: datetime | None


@dataclass
class Tally:
    """What the checks saw, for the report."""

    checks: int = 0
    # PRAGMA integrity_check runs (SQLite: one with every check), and what the failed ones
    # found.
    integrity_checks: int = 0
    damaged: list[str] = field(default_factory=list)
    acked: Counter[str] = field(default_factory=Counter)
    intents: int = 0
    reads: int = 0
    lost_replies: int = 0
    refusals: Counter[str] = field(default_factory=Counter)
    takeovers: int = 0
    claims: int = 0
    completions: int = 0
    lost_writes: int = 0
    double_claims: int = 0
    violations: list[str] = field(default_factory=list)
    crashes: list[str] = field(default_factory=list)


def _json(value: str | None) -> dict[str, Any]:
    return json.loads(value) if value else {}


def _moment(value: Any) -> datetime | None:
    if value is None:
        return None
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)  # stored as UTC


class Checker:
    """Incremental: each check reads only the journal lines and events that are new."""

    def __init__(
        self,
        url: str,
        journals: Path,
        *,
        renews: Callable[[str], bool],
        died_at: Callable[[str], float | None],
        allowed_refusals: Iterable[str],
        seeded_titles: Iterable[str] = (),
    ) -> None:
        self.queue: Queue = open_queue(Settings(database_url=url), migrate=False)
        self.journals = journals
        self.renews = renews
        self.died_at = died_at
        self.allowed = frozenset(allowed_refusals)
        self.tally = Tally()
        self._failed: set[str] = set()
        self._offsets: dict[Path, int] = {}
        self._acks: Counter[Key] = Counter()
        self._acked_titles: dict[int, str] = {}
        # Acknowledgements not yet compared: (when, key, title).
        self._pending: list[tuple[float, Key, str | None]] = []
        self.acks_by_worker: Counter[str] = Counter()
        self._intended_titles: set[str] = set(seeded_titles)
        # Events are read from an id on. SQLite commits one writer at a time, so ids come in
        # commit order and each check reads past the last id seen. On PostgreSQL a smaller
        # id can commit after a bigger one: read again from the last id seen SETTLE seconds
        # ago (no transaction lasts that long) and skip the ids already replayed. An
        # issue's own events still come in order: each takes the row lock first.
        self._last_event = 0
        self._seen: set[int] = set()
        self._marks: list[tuple[float, int]] = []  # (when, last id seen then)
        self._present: Counter[Key] = Counter()
        self._titles: dict[int, str] = {}
        self._holding: dict[int, Holding] = {}
        self._completed: Counter[int] = Counter()

    def close(self) -> None:
        self.queue.db.dispose()

    def fail(self, message: str) -> None:
        if message not in self._failed:  # a check repeats what it found before
            self._failed.add(message)
            self.tally.violations.append(message)

    # -- journals -------------------------------------------------------------------

    def read_journals(self) -> None:
        """Take in the journal lines written since the last call."""
        for path in sorted(self.journals.glob("*.jsonl")):
            worker = path.stem
            with path.open("rb") as handle:
                handle.seek(self._offsets.get(path, 0))
                data = handle.read()
            complete = data[: data.rfind(b"\n") + 1]
            self._offsets[path] = self._offsets.get(path, 0) + len(complete)
            for raw in complete.splitlines():
                self._journal_line(worker, json.loads(raw))

    def _journal_line(self, worker: str, line: dict[str, Any]) -> None:
        event, op = line["event"], line["op"]
        if event == "intent":
            self.tally.intents += op != "ready"
            if op in ("create", "retitle"):
                self._intended_titles.add(line["title"])
        elif event == "refused":
            self.tally.refusals[line["code"]] += 1
            if line["code"] not in self.allowed:
                self.fail(f"{worker}: {op} refused with {line['code']}")
        elif event == "lost":
            self.tally.lost_replies += 1
        elif event == "crash":
            self.tally.crashes.append(f"{worker}: {line['error']}\n{line['trace']}")
        elif event == "ack" and op == "ready":
            self.tally.reads += 1
        elif event == "ack":
            self.tally.acked[op] += 1
            self.acks_by_worker[worker] += 1
            key = _ack_key(worker, op, line)
            if key is not None:
                self._pending.append((line["t"], key, line.get("title")))

    # -- the database ---------------------------------------------------------------

    def check(self) -> Tally:
        """Run every check once; violations accumulate in the tally."""
        # A write acknowledged before this instant committed before the snapshot below
        # begins, so it must be in it. The journals are read after the snapshot, so that
        # every write in it has its intent read too.
        snapshot_at = time.time()
        with self.queue.db.read() as conn:
            if self.queue.db.is_sqlite:  # PostgreSQL checks its pages and keys itself
                self._check_sqlite(conn)
            events = conn.execute(
                text(
                    "SELECT id, number, kind, actor, before, after, created_at FROM events "
                    "WHERE id > :last ORDER BY id"
                ),
                {"last": self._floor(snapshot_at)},
            ).all()
            rows = conn.execute(text("SELECT number, claimed_by, status FROM issues")).all()
        self.read_journals()
        for event in events:
            if event.id not in self._seen:
                self._seen.add(event.id)
                self._replay(event)
        if events:
            self._last_event = max(self._last_event, events[-1].id)
        self._marks.append((snapshot_at, self._last_event))
        self._check_holders(rows)
        report = maintenance.doctor(self.queue)
        for finding in report.findings:
            if finding.check not in TOLERATED_FINDINGS:
                self.fail(f"doctor: {finding.check} #{finding.number}: {finding.detail}")
        self._compare_acks(snapshot_at)
        self.tally.checks += 1
        return self.tally

    def _check_sqlite(self, conn: Connection) -> None:
        """The file's pages and its foreign keys."""
        try:
            integrity = maintenance.integrity_check(self.queue)
        except CorruptDatabase as exc:  # too damaged for the check to finish
            integrity = [f"{exc.message} ({exc.facts.get('cause')})"]
        self.tally.integrity_checks += 1
        if integrity != ["ok"]:
            self.tally.damaged.append(f"check {self.tally.checks + 1}: {integrity[:5]}")
            self.fail(f"integrity_check: {integrity[:5]}")
        broken = conn.execute(text("PRAGMA foreign_key_check")).all()
        if broken:
            self.fail(f"foreign_key_check: {broken[:5]}")

    def _check_holders(self, rows: Sequence[Any]) -> None:
        """Each issue's holder is the one its history names."""
        for number, claimed_by, status in rows:
            holding = self._holding.get(number)
            expected = holding.holder if holding else None
            if claimed_by != expected:
                self.fail(f"#{number} is held by {claimed_by}, the history says {expected}")
            if (status == "in_progress") != (claimed_by is not None):
                self.fail(f"#{number} is {status} with holder {claimed_by}")

    def _floor(self, now: float) -> int:
        if self.queue.db.is_sqlite:
            return self._last_event
        settled = [last for when, last in self._marks if when <= now - SETTLE]
        return settled[-1] if settled else 0

    def _replay(self, event: Any) -> None:
        number, kind, actor = event.number, event.kind, event.actor
        before, after = _json(event.before), _json(event.after)
        at = _moment(event.created_at)
        key: Key | None = None
        if kind == "created":
            key = ("created", number, None)
            self._creation(number, after)
        elif kind in CLAIM_KINDS:
            key = ("claim", number, actor)
            self.tally.claims += 1
            self._claim(number, kind, actor, before, after, at)
        elif kind == "completed":
            key = ("completed", number, actor)
            self._completion(number, actor)
        elif kind in ("released", "blocked", "commented"):
            key = (kind, number, actor)
        elif kind == "updated" and "title" in after:
            key = ("updated", number, after["title"])
            if after["title"] not in self._intended_titles:
                self.fail(f"#{number} was renamed to a title no worker asked for")
        elif kind == "deleted":
            key = ("deleted", number, None)
        elif kind == "dependency_added":
            key = ("dependency_added", number, after.get("blocker"))
        if key is not None:
            self._present[key] += 1
        if kind in ENDS_A_CLAIM:
            self._holding.pop(number, None)

    def _creation(self, number: int, after: dict[str, Any]) -> None:
        self._titles[number] = after.get("title", "")
        if after.get("title") not in self._intended_titles:
            self.fail(f"#{number} was created with a title no worker asked for")

    def _completion(self, number: int, actor: str) -> None:
        self.tally.completions += 1
        self._completed[number] += 1
        holding = self._holding.get(number)
        if holding is None or holding.holder != actor:
            self.fail(f"#{number} completed by {actor}, the holder was {holding}")
        if self._completed[number] > 1:
            self.fail(f"#{number} completed {self._completed[number]} times")

    def _claim(
        self,
        number: int,
        kind: str,
        actor: str,
        before: dict[str, Any],
        after: dict[str, Any],
        at: datetime | None,
    ) -> None:
        holding = self._holding.get(number)
        if kind == "claimed" and holding is not None:
            self.tally.double_claims += 1
            self.fail(f"#{number} claimed by {actor} while {holding.holder} held it")
        if kind == "claim_takeover":
            self.tally.takeovers += 1
            previous = before.get("claimed_by")
            if holding is None or holding.holder != previous:
                self.tally.double_claims += 1
                self.fail(f"#{number} taken over from {previous}, the holder was {holding}")
            elif not self._lapsed(holding, at):
                self.tally.double_claims += 1
                self.fail(f"#{number} taken from {previous} by {actor} before its lease ran out")
        self._holding[number] = Holding(actor, _moment(after.get("lease_expires_at")))

    def _lapsed(self, holding: Holding, at: datetime | None) -> bool:
        """Whether a holder's claim could be taken at ``at``: its lease had run out (by the
        claim's own expiry if the holder never renews), or the holder was dead."""
        if at is None:
            return False
        died = self.died_at(holding.holder)
        if died is not None and died <= at.timestamp():
            return True
        if self.renews(holding.holder):
            return False
        return holding.lease_until is not None and holding.lease_until <= at

    def _compare_acks(self, snapshot_at: float) -> None:
        later = []
        for when, key, title in self._pending:
            if when >= snapshot_at:
                later.append((when, key, title))
                continue
            self._acks[key] += 1
            if key[0] == "created" and title is not None:
                self._acked_titles[key[1]] = title
        self._pending = later
        lost = 0
        for key, count in self._acks.items():
            missing = count - self._present.get(key, 0)
            if missing > 0:
                lost += missing
                self.fail(f"acknowledged but missing: {key} x{missing}")
        for number, title in self._acked_titles.items():
            if self._titles.get(number) != title:
                lost += 1
                self.fail(
                    f"#{number} was acknowledged as {title!r}, it is {self._titles.get(number)!r}"
                )
        self.tally.lost_writes = lost


def _ack_key(worker: str, op: str, line: dict[str, Any]) -> Key | None:
    result = line.get("result")
    if op == "create":
        return ("created", int(str(result)), None)
    if op == "claim":
        return None if result is None else ("claim", int(result), worker)
    if op == "complete":
        return ("completed", line["number"], worker) if result else None
    if op in ("release", "block"):
        return ({"release": "released", "block": "blocked"}[op], line["number"], worker)
    if op == "comment":
        return ("commented", line["number"], worker)
    if op == "retitle":
        return ("updated", line["number"], line["title"])
    if op == "delete":
        return ("deleted", line["number"], None)
    if op == "depend":
        return ("dependency_added", line["blocked"], line["blocker"])
    return None  # reads, and unblock (which writes nothing when there is nothing to do)
