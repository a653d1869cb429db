"""Peak memory of the admin path: `workq import`, `workq export` and `workq db copy`.

Builds an export of N issues (default 100,000; each with a label, its created event and a
comment), then runs each command as its own process and reports its peak resident memory
(from wait4's rusage) and its time. The baseline from the same run is `workq --version`:
the interpreter and workq's imports, before any row is touched.

    .venv/bin/python scripts/bench_transfer.py [--issues 100000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

WORKQ = Path(sys.executable).with_name("workq")


def build_export(path: Path, issues: int) -> None:
    """An export as `workq export` writes it: the header, then every table, parents first."""
    from tests.services.maintenance.export_rows import export_lines

    text = "A description of the work to do, long enough to look like a real one. " * 3
    with path.open("w", encoding="utf-8") as out:
        for line in export_lines(issues, description=text, actor="bench", label="bench"):
            out.write(line + "\n")


def measure(args: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """Run workq with ``args``; its wall time and CPU time (s, the CPU time steadier on a
    shared machine) and its peak resident memory (MB)."""
    started = time.perf_counter()
    child = subprocess.Popen(
        [str(WORKQ), *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert child.stderr is not None
    errors = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    elapsed = time.perf_counter() - started
    if child.returncode != 0:
        raise SystemExit(f"workq {' '.join(args)} failed:\n{errors.decode(errors='replace')}")
    cpu = usage.ru_utime + usage.ru_stime
    return elapsed, cpu, usage.ru_maxrss / 1024  # ru_maxrss is in KiB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--issues", type=int, default=100_000)
    parser.add_argument("--keep", type=Path, help="build in this directory and keep it")
    options = parser.parse_args()
    work = options.keep or Path(tempfile.mkdtemp(prefix="workq-bench-transfer-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKQ_")}
    try:
        source = work / "export.jsonl"
        build_export(source, options.issues)
        size = source.stat().st_size / 2**20
        print(f"{options.issues} issues, export of {size:.0f} MB, in {work}")
        rows = [
            ("baseline: workq --version", measure(["--version"], env)),
            ("import", measure(["--db", str(work / "a.db"), "import", str(source)], env)),
            (
                "export",
                measure(["--db", str(work / "a.db"), "export", str(work / "again.jsonl")], env),
            ),
            (
                "db copy",
                measure(
                    ["db", "copy", "--from", str(work / "a.db"), "--to", str(work / "b.db")], env
                ),
            ),
        ]
        for name, (seconds, cpu, peak) in rows:
            print(f"{name:28} {seconds:7.1f} s  cpu {cpu:6.1f} s  peak {peak:6.0f} MB")
        same = source.read_bytes() == (work / "again.jsonl").read_bytes()
        print(f"export after import equals the input: {'yes' if same else 'NO'}")
        if not same:
            raise SystemExit(1)
    finally:
        if options.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
