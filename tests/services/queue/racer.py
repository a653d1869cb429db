"""A claimer process for the race and crash tests: claim_next until the queue is empty.

Usage: python -m tests.services.queue.racer DB_URL RUN_ID [--complete] [--lease SECONDS]
Prints one line per claim ("claimed N"), then "done", and exits 0; any error exits 1.
"""

from __future__ import annotations

import sys

from workq.config import Settings
from workq.domain.authority import Authority
from workq.services.queue import claims
from workq.services.runtime import open_queue


def main(argv: list[str]) -> int:
    url, run_id = argv[0], argv[1]
    complete = "--complete" in argv
    lease = int(argv[argv.index("--lease") + 1]) if "--lease" in argv else 600
    queue = open_queue(Settings(database_url=url, lease_seconds=lease), migrate=False)
    while True:
        got = claims.claim_next(queue, Authority.of({run_id}))
        if got is None:
            break
        print(f"claimed {got.number}", flush=True)
        if complete:
            claims.complete(queue, got.number, Authority.of({run_id}))
            print(f"completed {got.number}", flush=True)
    print("done", flush=True)
    queue.db.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
