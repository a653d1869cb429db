"""Benchmark contract E's ``search_documentation`` over 1,000 generated Markdown docs.

Usage: .venv/bin/python scripts/bench_docs_search.py [--docs 1000] [--rounds 40] [--cold 5]

Generates a git repository of --docs documents (five sections each, about 3 KB, words drawn
from a fixed vocabulary with a fixed seed, committed), then times ``docs_index.search``
(what the tool runs) for a set of one- to three-word queries:

- cold: the cache file deleted before each search, so the search indexes every document;
- warm: the index up to date (each search still lists the docs and compares their
  ``(mtime_ns, size)`` with the index);
- one file changed: one document rewritten before each search (re-read and re-indexed).

Baselines from the same run, over the same tree and queries:

- ``git grep -l -i`` for the query's words (files holding any of them, unranked);
- a plain Python scan: read every ``*.md`` and test each word with ``in`` (unranked).

Reported: p50 and p99 of each, and each p50 as a ratio of the ``git grep`` p50.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from workq.services.coding import docs_index
from workq.vcs import git

_WORDS = (
    "worker queue claim lease heartbeat issue branch commit merge review test fixture "
    "database index migration schema query cursor page limit error code hint retry "
    "timeout lock transaction snapshot event outbox mirror label priority backlog plan "
    "phase design explore final gate evidence ruff mypy pytest coverage docs reference "
    "architecture layer service domain schema transport server client stdio http token "
    "deploy release version changelog readme install bootstrap script benchmark ratio"
)
_FILLER = "the a of to and in is it for on with as by at from this that be are"
VOCABULARY = _WORDS.split()
FILLER = _FILLER.split()
QUERIES = [
    "worker",
    "lease heartbeat",
    "merge review gate",
    "migration schema",
    "pytest fixture coverage",
    "stdio transport",
    "release changelog",
    "timeout retry lock",
]


def generate(root: Path, count: int) -> None:
    rng = random.Random(1000)
    for i in range(count):
        words = rng.sample(VOCABULARY, 6)
        parts = [f"# {words[0].title()} {words[1]} guide {i}\n"]
        for s in range(5):
            parts.append(f"\n## {words[s % 6].title()} section {s}\n\n")
            for _ in range(6):
                sentence = [rng.choice(VOCABULARY if rng.random() < 0.4 else FILLER)]
                sentence += [rng.choice(VOCABULARY + FILLER) for _ in range(10)]
                parts.append(" ".join(sentence).capitalize() + ".\n")
        path = root / "docs" / f"area{i % 10}" / f"doc{i:04}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(parts))
    git.run(["init", "-q", "-b", "main"], cwd=root)
    git.run(["add", "-A"], cwd=root)
    git.run(
        ["-c", "user.email=b@example.invalid", "-c", "user.name=B", "commit", "-q", "-m", "docs"],
        cwd=root,
    )


def timed(action: Callable[[str], object], rounds: int, before: Callable[[], None]) -> list[float]:
    times: list[float] = []
    for i in range(rounds):
        before()
        query = QUERIES[i % len(QUERIES)]
        start = time.perf_counter()
        action(query)
        times.append(time.perf_counter() - start)
    return times


def figures(times: list[float]) -> tuple[float, float]:
    ordered = sorted(times)
    return statistics.median(ordered), ordered[max(int(len(ordered) * 0.99) - 1, 0)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--cold", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        root.mkdir()
        generate(root, args.docs)
        cache = Path(tmp) / "cache"
        tree = docs_index.locate(root, cache)
        size = sum(p.stat().st_size for p in root.rglob("*.md"))
        print(f"{args.docs} docs, {size / 1e6:.1f} MB, cache {tree.cache.relative_to(root)}")

        def search(query: str) -> object:
            return docs_index.search(root, query, "all", cache)

        def git_grep(query: str) -> object:
            words = [w for word in query.split() for w in ("-e", word)]
            return git.run(["grep", "-l", "-i", *words, "--", "*.md"], cwd=root, check=False)

        def scan(query: str) -> object:
            words = query.lower().split()
            return [
                p
                for p in root.rglob("*.md")
                if any(w in p.read_text(encoding="utf-8").lower() for w in words)
            ]

        def nothing() -> None:
            return None

        def drop_cache() -> None:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{tree.cache}{suffix}").unlink(missing_ok=True)

        changed = root / "docs" / "area0" / "doc0000.md"
        counter = iter(range(10**9))

        def change_one() -> None:
            changed.write_text(changed.read_text() + f"\nEdit {next(counter)} about workers.\n")

        results = {
            "git grep -l -i (baseline)": timed(git_grep, args.rounds, nothing),
            "python scan (read + in)": timed(scan, args.rounds, nothing),
            "search_documentation, cold": timed(search, args.cold, drop_cache),
        }
        results["search_documentation, warm"] = timed(search, args.rounds, nothing)
        results["search_documentation, 1 file changed"] = timed(search, args.rounds, change_one)
        hits = docs_index.search(root, "lease heartbeat", "all", cache).results
        assert hits and hits[0].relevance_score == 1.0
    base = figures(results["git grep -l -i (baseline)"])[0]
    print(f"{'case':<40} {'p50 ms':>8} {'p99 ms':>8} {'x baseline':>10}")
    for name, values in results.items():
        p50, p99 = figures(values)
        print(f"{name:<40} {p50 * 1e3:8.1f} {p99 * 1e3:8.1f} {p50 / base:10.2f}")


if __name__ == "__main__":
    main()
