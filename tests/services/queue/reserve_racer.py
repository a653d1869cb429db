"""A claimer process for the reservation race: rounds of claim_next until nothing is left
for it, each claim checked against every live reservation, then release all.

Usage: python -m tests.services.queue.reserve_racer DB_URL RUN_ID ROUNDS
Prints "claimed N" per claim, "overlap ..." if a reservation it holds overlaps another
holder's exclusive one, then "done"; any error exits 1.
"""

from __future__ import annotations

import sys

from workq.config import Settings
from workq.domain.authority import Authority
from workq.domain.globs import overlap
from workq.services.queue import claims, reservations
from workq.services.runtime import open_queue


def main(argv: list[str]) -> int:
    url, run_id, rounds = argv[0], argv[1], int(argv[2])
    queue = open_queue(Settings(database_url=url, lease_seconds=600), migrate=False)
    for _ in range(rounds):
        held: list[int] = []
        while (got := claims.claim_next(queue, Authority.of({run_id}))) is not None:
            held.append(got.number)
            print(f"claimed {got.number}", flush=True)
            live = reservations.list_live(queue)
            for mine in (h for h in live if h.holder == run_id):
                for other in live:
                    if other.holder != run_id and overlap(mine.glob, other.glob):
                        print(f"overlap {mine} {other}", flush=True)
        for number in reversed(held):
            claims.release(queue, number, Authority.of({run_id}))
    print("done", flush=True)
    queue.db.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
