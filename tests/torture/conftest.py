"""Settings and the report of the torture suite.

Every count can be raised (or lowered) by an environment variable; the defaults are what
CI runs and what issue 7 asks for. The figures of each test are printed at the end of the
run and, with WORKQ_TORTURE_REPORT=path.json, written there as JSON.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

FIGURES: dict[str, dict[str, Any]] = {}


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def env_float(name: str, default: float) -> float:
    return float(os.environ.get(name, default))


def seed() -> int:
    """WORKQ_TORTURE_SEED, else a fresh one (printed with the figures)."""
    return env_int("WORKQ_TORTURE_SEED", random.randrange(2**32))


def record(section: str, lines: list[str], figures: dict[str, Any]) -> None:
    """Keep a test's figures for the summary (and print them with -s)."""
    FIGURES[section] = {"lines": lines, "figures": figures}
    for line in lines:
        print(f"{section}: {line}")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not FIGURES:
        return
    terminalreporter.write_sep("=", "torture figures")
    for section, data in FIGURES.items():
        for line in data["lines"]:
            terminalreporter.write_line(f"{section}: {line}")
    target = os.environ.get("WORKQ_TORTURE_REPORT")
    if target:
        Path(target).write_text(
            json.dumps({k: v["figures"] for k, v in FIGURES.items()}, indent=2) + "\n"
        )


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def percentiles(samples: list[float]) -> dict[str, float]:
    """p50, p90, p99 and max of latencies in seconds, as milliseconds."""
    if not samples:
        return {}
    ordered = sorted(samples)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 2)

    return {"n": len(ordered), "p50": at(0.50), "p90": at(0.90), "p99": at(0.99), "max": at(1.0)}


def latency_lines(label: str, by_op: dict[str, list[float]]) -> list[str]:
    lines = []
    for op, samples in sorted(by_op.items()):
        p = percentiles(samples)
        lines.append(
            f"{label} {op}: n={p['n']} p50 {p['p50']} ms, p90 {p['p90']} ms, "
            f"p99 {p['p99']} ms, max {p['max']} ms"
        )
    return lines
