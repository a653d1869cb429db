"""Soak: the crash torture, continuously, for as long as you like.

    .venv/bin/python scripts/soak.py --duration 3600 [--kills-per-minute 60] [--keep DIR]
        [--database-url postgresql+psycopg://...]   # an empty database; default a SQLite file

A pool of workers (services in process, MCP clients driving real ``workq serve``
processes, CLI commands) runs a mixed workload on one SQLite file. At random moments one
of them, or a server, or a command, is killed with SIGKILL and replaced; after every
kill the checks of tests/torture run: integrity (on SQLite, ``PRAGMA integrity_check`` on a
connection of its own), doctor, no issue with two holders, every acknowledged write
present. At the end every claim a dead worker left is taken again, the queue is drained,
and once every process has stopped the SQLite file is checked once more. A line of figures
is printed after every kill; the summary at the end, with the count of integrity checks
and what any of them found. Exit status 1 if any check failed, a damaged file included.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the harness lives in tests/torture

from sqlalchemy.engine import make_url  # noqa: E402
from tests.storage import integrity_problems  # noqa: E402
from tests.torture.harness import Report, Torture  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, required=True, help="seconds to run")
    parser.add_argument("--kills-per-minute", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument(
        "--database-url", help="an empty PostgreSQL database (default: a SQLite file)"
    )
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    work = args.keep or Path(tempfile.mkdtemp(prefix="workq-soak-"))
    work.mkdir(parents=True, exist_ok=True)
    print(
        f"soak: {args.duration:.0f} s, about {args.kills_per_minute:g} kills a minute, "
        f"seed {seed}, in {work}",
        flush=True,
    )

    def progress(report: Report) -> None:
        t = report.tally
        print(
            f"{report.elapsed:7.0f} s  kills {report.crashes_survived:5d}  "
            f"checks {t.checks:5d}  integrity {t.integrity_checks:5d}  "
            f"acked {sum(t.acked.values()):7d}  "
            f"lost {t.lost_writes}  double claims {t.double_claims}  "
            f"violations {len(t.violations)}",
            flush=True,
        )

    torture = Torture(work, seed=seed, url=args.database_url)
    stopped: Exception | None = None
    try:
        report = torture.run_for(
            args.duration, kills_per_minute=args.kills_per_minute, progress=progress
        )
    except Exception as exc:  # a check that could not run (a file too damaged to read)
        traceback.print_exc()
        stopped, report = exc, torture.report
        report.tally = torture.checker.tally
    finally:
        torture.checker.close()
    damaged = final_check(torture.url)  # every process has stopped
    for line in report.lines():
        print(line)
    if damaged is not None:
        print(f"integrity check of the file after the run: {'; '.join(damaged[:5]) or 'ok'}")
    if stopped is not None:
        print(f"FAILED: the run stopped: {stopped}")
    for problem in (damaged or [])[:20]:
        print(f"FAILED: damaged after the run: {problem}")
    for problem in report.tally.violations[:50] + report.tally.crashes[:5]:
        print(f"FAILED: {problem}")
    if args.json:
        figures = {"seed": seed, **report.figures(), "damaged_at_end": damaged}
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    failed = bool(report.tally.violations or report.tally.crashes or damaged or stopped)
    if not args.keep and not failed:
        shutil.rmtree(work, ignore_errors=True)
    elif failed:
        print(f"kept for inspection: {work}")
    return 1 if failed else 0


def final_check(url: str) -> list[str] | None:
    """What ``PRAGMA integrity_check`` finds wrong with the SQLite file at ``url``, on a new
    connection of workq's SQLite library (empty: whole); None on PostgreSQL."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database:
        return None
    return integrity_problems(Path(parsed.database))


if __name__ == "__main__":
    sys.exit(main())
