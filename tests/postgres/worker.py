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


def mixed(queue: Queue, run_id: str, seed: int) -> None:
    rng = random.Random(seed)
    for step in range(MIXED_STEPS):
        highest = max(listing.list_issues(queue, limit=1).items[0].number, 1)
        some = rng.randint(1, highest + 2)  # sometimes a number that does not exist
        other = rng.randint(1, highest)
        action = rng.choice(MIXED_ACTIONS)
        try:
            if action == "create":
                issues.create(queue, title=f"{run_id} step {step}", actor=run_id)
            elif action == "claim":
                got = claims.claim_next(queue, Authority.of({run_id}))
                if got is not None and rng.random() < 0.7:
                    claims.complete(queue, got.number, Authority.of({run_id}))
            elif action == "complete":
                claims.complete(
                    queue, some, Authority.overriding("admin", who="admin"), actor=run_id
                )
            elif action == "depend":
                dependencies.depend(queue, blocker=some, blocked=other, actor=run_id)
            elif action == "undepend":
                dependencies.undepend(queue, blocker=some, blocked=other, actor=run_id)
            elif action == "block":
                blocking.block(
                    queue,
                    some,
                    "needs a decision",
                    by=Authority.overriding("admin", who="admin"),
                    actor=run_id,
                )
            elif action == "unblock":
                blocking.unblock(queue, some, actor=run_id)
            elif action == "comment":
                notes.comment(queue, some, f"note from {run_id}", author=run_id)
            elif action == "release":
                claims.release(
                    queue, some, Authority.overriding("admin", who="admin"), actor=run_id
                )
            elif action == "reopen":
                issues.reopen(queue, some, actor=run_id)
            elif action == "delete" and rng.random() < 0.2:
                issues.delete_issue(queue, some, actor=run_id, by=ADMIN)
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
