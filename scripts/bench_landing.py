"""Benchmark landing through a pull request against a local merge of the same work.

Usage: .venv/bin/python scripts/bench_landing.py [--issues 10] [--rounds 3]

Each round makes two identical repositories (a bare ``origin`` and its clone) and, in each,
``--issues`` issues claimed in worktrees of their own with one commit each (different
files, so nothing conflicts). One repository lands locally: ``merge_issue`` moves its
default branch. The other lands through pull requests on the in-process fake GitHub, which
protects ``main`` (a direct push is refused) and requires a check ``ci`` that has already
passed on each branch tip ("checks that pass at once"). Its landings are moved by the sync
worker's landing step (``Lander.run_pass``), called in a loop right after each merge, as a
worker polling with no delay would.

Printed per issue, medians over every issue of every round:
- local: the ``merge_issue`` call (check, merge, complete, clean up);
- pull request, asked: the ``merge_issue`` call that queues it (what the agent waits for);
- pull request, land -> merged: from that call to GitHub's merge recorded;
- pull request, land -> landed: to the issue completed and its worktree and branch removed;
and each as a ratio to the local merge of the same round. The fake answers over HTTP on
127.0.0.1 in this process, so GitHub's own latency (tens to hundreds of ms a request) is
not in these figures: they are workq's cost. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.github.landing_helpers import bare_and_clone
from tests.github.tools_helpers import git
from tests.github_fake.server import FakeGitHub

from workq.config import Settings
from workq.domain.authority import Authority
from workq.github.landing import LandOptions
from workq.github.sync import Session, connect
from workq.github.worker import Options
from workq.services.handle import Queue
from workq.services.queue import claims, issues, notes
from workq.services.runtime import open_queue
from workq.services.workspaces import landings, merges, repositories, worktrees

REPO = "acme/widgets"
AGENT = "bench"


def prepare(q: Queue, repo: str, count: int) -> list[tuple[int, str]]:
    """``count`` issues of ``repo``, each claimed in its worktree with one commit; with the
    commit each one's tip."""
    made = []
    for n in range(count):
        number = issues.create(q, title=f"change {n}", repository=repo).number
        claims.claim(q, number, Authority.of({AGENT}))
        where = Path(worktrees.spawn(q, repo, number, by=Authority.of({AGENT})).path)
        (where / f"change_{number}.py").write_text(f"N = {number}\n")
        git(where, "add", ".")
        git(where, "commit", "-q", "-m", f"change {number}")
        made.append((number, git(where, "rev-parse", "HEAD")))
    return made


def one_round(workdir: Path, count: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"local": [], "asked": [], "merged": [], "landed": []}
    by = Authority.of([AGENT])
    settings = Settings(db_path=workdir / "queue.db", lease_seconds=3600, tests_gate="trust")
    q = open_queue(settings, migrate=True)
    (workdir / "local").mkdir()
    (workdir / "pr").mkdir()
    _, local = bare_and_clone(workdir / "local")
    bare, remote = bare_and_clone(workdir / "pr")
    with FakeGitHub() as fake:
        fake.set_git_dir(str(bare))
        fake.protect_branch("main", required_checks=["ci"])
        repositories.add(q, "local", local)
        repositories.add(q, "pr", remote, land="pr", github_repo=REPO)
        env = {"GITHUB_TOKEN": fake.token, "GITHUB_API_URL": fake.url}
        options = Options(write_interval=0.0)
        session: Session = connect(q, REPO, env=env, options=options, timeout=10.0)
        session.lander.options = LandOptions(check_interval=0.0)
        try:
            for number, _ in prepare(q, "local", count):
                started = time.perf_counter()
                merges.merge_issue(q, number, by=by)
                times["local"].append(time.perf_counter() - started)
            for number, tip in prepare(q, "pr", count):
                fake.add_check_run(tip, "ci")  # passed at once
                asked_at = q.now()
                started = time.perf_counter()
                merges.merge_issue(q, number, by=by)
                times["asked"].append(time.perf_counter() - started)
                while True:
                    session.lander.run_pass()
                    found = landings.require(q, number)
                    if found.state == "landed":
                        break
                    if found.state == "refused":
                        raise SystemExit(f"#{number} refused: {found.detail}")
                times["landed"].append(time.perf_counter() - started)
                merged_at = _entered(q, number, "merged")
                times["merged"].append((merged_at - asked_at).total_seconds())
        finally:
            session.close()
            q.db.dispose()
    return times


def _entered(q: Queue, number: int, state: str) -> datetime:
    """When the landing of issue ``number`` entered ``state`` (its history's event)."""
    for event in notes.history(q, number):
        if event.kind == "landing" and event.after and event.after.get("state") == state:
            return event.created_at
    raise SystemExit(f"#{number} never entered {state}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--issues", type=int, default=10, help="issues per round and way")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    every: dict[str, list[float]] = {}
    ratios: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="workq-bench-landing-") as tmp:
        for r in range(args.rounds):
            workdir = Path(tmp) / f"round-{r}"
            workdir.mkdir()
            times = one_round(workdir, args.issues)
            local = statistics.median(times["local"])
            for key, values in times.items():
                every.setdefault(key, []).extend(values)
                ratios.setdefault(key, []).append(statistics.median(values) / local)
    rows = [
        ("local merge (merge_issue)", "local"),
        ("pull request: asked (merge_issue)", "asked"),
        ("pull request: land -> merged", "merged"),
        ("pull request: land -> landed", "landed"),
    ]
    print(f"{args.issues} issues x {args.rounds} rounds; medians per issue")
    print(f"{'':36} {'ms':>9} {'x local':>8}")
    for label, key in rows:
        ms = statistics.median(every[key]) * 1000
        print(f"{label:36} {ms:9.1f} {statistics.median(ratios[key]):8.2f}")


if __name__ == "__main__":
    main()
