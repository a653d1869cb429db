"""How long the gates a call would run are expected to take, asked before they start: what
decides whether ``issue_gates``, or a merge whose gates must run, is answered in its call
or becomes a task (services/tasks/gates.py) for a client that takes tasks.

A gate's expected time is how long its newest stored run took (any issue's run of a gate
of that name in the same repository), else its configured timeout: a gate never run may
take that long. A run is **longer than a moment** when the gates it runs are expected to
take more than ``MOMENT_SECONDS`` together. Only reads: the gates, the evidence, git.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from sqlalchemy import select

from workq.db.engine import retry_lost_read
from workq.db.tables import gate_runs, issues
from workq.domain import gates as rules
from workq.domain.gates import GateSpec
from workq.services.coding.gate_runs import latest
from workq.services.coding.gate_table import TRUST, in_effect
from workq.services.handle import Queue, load
from workq.vcs import git

# More than this, together, and a call that runs gates answers with a task (when its client
# takes tasks): a few seconds, as long as a model waits for a quick tool call.
MOMENT_SECONDS = 5.0


def to_run(
    q: Queue,
    checkout: Path,
    *,
    files: Sequence[str] = (),
    include_tests: bool = True,
    gates: Sequence[int | str] | None = None,
) -> list[GateSpec]:
    """The gates ``gate_runs.run`` would run in ``checkout`` with these arguments (those
    that take none of ``files``, when given, are skipped: they cost nothing)."""
    config = in_effect(q, git.toplevel(checkout))
    chosen = rules.choose(config.gates, gates)
    if not include_tests:
        chosen = [s for s in chosen if not s.tests]
    if files:
        chosen = [s for s in chosen if rules.select(s, files)]
    return chosen


@retry_lost_read
def to_run_for_merge(q: Queue, number: int, checkout: Path, tip: str) -> list[GateSpec]:
    """The gates a merge of issue ``number``'s ``tip`` would run (``require_passed``): those
    in effect without a passing run on ``tip``; none when merges trust the agent's word or
    a stored failure on ``tip`` refuses the merge at once."""
    if q.tests_gate == TRUST:
        return []
    config = in_effect(q, git.toplevel(checkout))
    with q.db.read() as conn:
        found = latest(conn, load(conn, number).id, tip)
    if any(not row.passed for row in found.values()):
        return []
    return [s for s in config.gates if s.name not in found]


@retry_lost_read
def expected_seconds(q: Queue, number: int, specs: Sequence[GateSpec]) -> float:
    """How long ``specs`` are expected to run one after the other, for issue ``number``."""
    if not specs:
        return 0.0
    with q.db.read() as conn:
        repository = load(conn, number).repository
        same = (
            issues.c.repository.is_(None)
            if repository is None
            else issues.c.repository == repository
        )
        total = 0.0
        for spec in specs:
            row = conn.execute(
                select(gate_runs.c.started_at, gate_runs.c.finished_at)
                .join(issues, issues.c.id == gate_runs.c.issue_id)
                .where(gate_runs.c.gate == spec.name, same)
                .order_by(gate_runs.c.id.desc())
                .limit(1)
            ).first()
            took = (row.finished_at - row.started_at).total_seconds() if row else spec.timeout
            total += max(0.0, min(took, spec.timeout))
    return total


def longer_than_a_moment(q: Queue, number: int, specs: Sequence[GateSpec]) -> bool:
    return expected_seconds(q, number, specs) > MOMENT_SECONDS


def longest_seconds(specs: Sequence[GateSpec]) -> float:
    """How long ``specs`` may run at most (each stopped at its timeout)."""
    return sum(s.timeout for s in specs)
