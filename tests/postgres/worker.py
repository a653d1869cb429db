"""An agent process for the PostgreSQL races. It opens the queue, prints "ready", waits for
a line on stdin (so that every process starts at once), then works and prints what it did.

    python -m tests.postgres.worker URL RUN_ID claim        # claim_next until none is left
    python -m tests.postgres.worker URL RUN_ID mixed SEED   # a random mix of every mutation
    python -m tests.postgres.worker URL RUN_ID graph SEED   # edges and completions on 1-8

Refusals that the rules allow (a lost race, a cycle, not the holder) are normal; any storage
error is printed as "error CODE" and ends the process with status 1.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from dataclasses import dataclass

from tests.conftest import ADMIN
from workq.config import Settings
from workq.domain.authority import Authority
from workq.errors import Conflict, InvalidInput, NotFound, StorageError
from workq.services.handle import Queue
from workq.services.queue import blocking, claims, dependencies, issues, listing, notes
from workq.services.runtime import open_queue

MIXED_STEPS = 100
MIXED_ACTIONS = (
    *("create", "claim", "claim", "complete", "depend", "depend", "undepend", "block"),
    *("unblock", "comment", "release", "reopen", "delete"),
)
GRAPH_STEPS = 200
HOT = 8


def claim_all(queue: Queue, run_id: str) -> None:
    while (got := claims.claim_next(queue, Authority.of({run_id}))) is not None:
        print(f"claimed {got.number} from {got.previous_holder or '-'}", flush=True)


@dataclass(frozen=True)
class Move:
    """One step of ``mixed``."""

    queue: Queue
    run_id: str
    step: int
    some: int
    other: int
    rng: random.Random


def _admin() -> Authority:
    return Authority.overriding("admin", who="admin")


def _create(m: Move) -> None:
    issues.create(m.queue, title=f"{m.run_id} step {m.step}", actor=m.run_id)


def _claim(m: Move) -> None:
    got = claims.claim_next(m.queue, Authority.of({m.run_id}))
    if got is not None and m.rng.random() < 0.7:
        claims.complete(m.queue, got.number, Authority.of({m.run_id}))


def _complete(m: Move) -> None:
    claims.complete(m.queue, m.some, _admin(), actor=m.run_id)


def _depend(m: Move) -> None:
    dependencies.depend(m.queue, blocker=m.some, blocked=m.other, actor=m.run_id)


def _undepend(m: Move) -> None:
    dependencies.undepend(m.queue, blocker=m.some, blocked=m.other, actor=m.run_id)


def _block(m: Move) -> None:
    blocking.block(m.queue, m.some, "needs a decision", by=_admin(), actor=m.run_id)


def _unblock(m: Move) -> None:
    blocking.unblock(m.queue, m.some, actor=m.run_id)


def _comment(m: Move) -> None:
    notes.comment(m.queue, m.some, f"note from {m.run_id}", author=m.run_id)


def _release(m: Move) -> None:
    claims.release(m.queue, m.some, _admin(), actor=m.run_id)


def _reopen(m: Move) -> None:
    issues.reopen(m.queue, m.some, actor=m.run_id)


def _delete(m: Move) -> None:
    if m.rng.random() < 0.2:
        issues.delete_issue(m.queue, m.some, actor=m.run_id, by=ADMIN)


MOVES: dict[str, Callable[[Move], None]] = {
    "create": _create,
    "claim": _claim,
    "complete": _complete,
    "depend": _depend,
    "undepend": _undepend,
    "block": _block,
    "unblock": _unblock,
    "comment": _comment,
    "release": _release,
    "reopen": _reopen,
    "delete": _delete,
}


def mixed(queue: Queue, run_id: str, seed: int) -> None:
    rng = random.Random(seed)
    for step in range(MIXED_STEPS):
        highest = max(listing.list_issues(queue, limit=1).items[0].number, 1)
        some = rng.randint(1, highest + 2)  # sometimes a number that does not exist
        other = rng.randint(1, highest)
        action = rng.choice(MIXED_ACTIONS)
        try:
            MOVES[action](Move(queue, run_id, step, some, other, rng))
        except (Conflict, NotFound, InvalidInput):
            continue
    print("done", flush=True)


def graph(queue: Queue, run_id: str, seed: int) -> None:
    """Dependencies added and removed while their blockers are completed and reopened, all
    on a few issues: the races that can miscount ``open_blockers``."""
    rng = random.Random(seed)
    for _ in range(GRAPH_STEPS):
        some, other = rng.randint(1, HOT), rng.randint(1, HOT)
        action = rng.choice(["depend", "undepend", "complete", "reopen"])
        try:
            if action == "depend":
                dependencies.depend(queue, blocker=some, blocked=other, actor=run_id)
            elif action == "undepend":
                dependencies.undepend(queue, blocker=some, blocked=other, actor=run_id)
            elif action == "complete":
                claims.complete(
                    queue, some, Authority.overriding("admin", who="admin"), actor=run_id
                )
            else:
                issues.reopen(queue, some, actor=run_id)
        except (Conflict, NotFound, InvalidInput):
            continue
    print("done", flush=True)


def main(argv: list[str]) -> int:
    url, run_id, mode = argv[0], argv[1], argv[2]
    queue = open_queue(Settings(database_url=url, lease_seconds=600), migrate=False)
    print("ready", flush=True)
    sys.stdin.readline()
    try:
        if mode == "claim":
            claim_all(queue, run_id)
        elif mode == "graph":
            graph(queue, run_id, int(argv[3]))
        else:
            mixed(queue, run_id, int(argv[3]))
    except StorageError as error:
        print(f"error {error.code}: {error.message}", flush=True)
        return 1
    finally:
        queue.db.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
