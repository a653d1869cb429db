"""``issue_gates`` as a task, when its gates run longer than a moment
(coding/gate_estimates.py: expected to take more than ``MOMENT_SECONDS`` together, from
their last recorded durations, else their configured timeouts).

The call checks what it can at once (who may run them, the issue's checkout, the gates
asked for) and answers with a task; the gates run in this process's bounded pool
(runner.py), on the caller's authority, exactly as the synchronous call runs them
(``gate_runs.run``), and the task completes with that call's answer: the report, or the
refusal worded as the call words it. A server stopped while they run leaves a task that
the next process reports ``failed``, a -32603 saying the run was interrupted (runner.py);
the runs of the gates that finished are stored as evidence.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workq.domain.authority import Authority
from workq.errors import Spelling, StorageError, WorkqError, stored, tool_call
from workq.services.coding import gate_estimates, gate_runs
from workq.services.handle import Queue
from workq.services.tasks import kinds, runner
from workq.services.tasks.store import TaskRecord

KIND = "gates"
WAITING = "Waiting for a free runner"
RUNNING = "Running the quality gates"


def authority(by: Authority) -> dict[str, Any]:
    """``by`` as a task keeps it, to act on it later (``revived``)."""
    return {
        "run_ids": sorted(by.run_ids),
        "acts_as": by.acts_as,
        "fence": by.fence,
        "override": by.override,
        "who": by.who,
    }


def revived(kept: dict[str, Any]) -> Authority:
    return Authority(
        run_ids=frozenset(kept.get("run_ids") or ()),
        acts_as=kept.get("acts_as"),
        fence=kept.get("fence"),
        override=kept.get("override"),
        who=kept.get("who"),
    )


def kept(exc: WorkqError, spell: Spelling) -> dict[str, Any]:
    """``exc`` as a task keeps it (``stored``), its hint as ``spell``'s face words it."""
    return {**stored(exc), "hint": exc.hint_for(spell)}


def start_if_long(
    q: Queue,
    *,
    owner: str,
    number: int,
    checkout: Path,
    by: Authority,
    files: list[str],
    include_tests: bool,
    gates: list[int | str] | None,
    actor: str | None,
    said: dict[str, Any],
    spell: Spelling = tool_call,
) -> TaskRecord | None:
    """A task of ``owner`` running issue ``number``'s gates in ``checkout`` (as
    ``gate_runs.run`` with these arguments) when they run longer than a moment; None when
    they do not (the caller runs them in its call). ``said``: what the caller's answer
    says besides the report (kept with the answer); ``spell``: how the caller's face
    names the steps a refusal's hint points to.

    Raises:
        InvalidInput: a gate asked for that the table has not, a malformed table.
    """
    specs = gate_estimates.to_run(
        q, checkout, files=files, include_tests=include_tests, gates=gates
    )
    if not gate_estimates.longer_than_a_moment(q, number, specs):
        return None
    return runner.start(
        q,
        owner=owner,
        kind=KIND,
        arguments={
            "number": number,
            "checkout": str(checkout),
            "by": authority(by),
            "files": files,
            "include_tests": include_tests,
            "gates": gates,
            "actor": actor,
            "said": said,
        },
        longest=gate_estimates.longest_seconds(specs),
        waiting=WAITING,
        running=RUNNING,
        work=lambda task: run(q, task, spell),
    )


def run(q: Queue, task: TaskRecord, spell: Spelling = tool_call) -> runner.Answer:
    """The gates of ``task``, run now; its answer."""
    args = task.args()
    said = args.get("said") or {}
    try:
        report = gate_runs.run(
            q,
            int(args["number"]),
            Path(args["checkout"]),
            by=revived(args["by"]),
            files=args.get("files") or [],
            include_tests=bool(args.get("include_tests", True)),
            gates=args.get("gates"),
            actor=args.get("actor"),
        )
    except StorageError:
        raise
    except WorkqError as exc:
        refused = {"refused": kept(exc, spell), "prefix": said.get("prefix")}
        return {"value": refused}, f"Refused: {exc.code}"
    value = {"report": report.model_dump(mode="json"), **said}
    verdict = "passed" if report.overall_pass else "failed"
    return {"value": value}, f"Gates {verdict} on {report.commit[:12]}"


def advance(q: Queue, task: TaskRecord) -> None:
    runner.watch(q, task)


KIND_OF = kinds.Kind(
    KIND, advance=advance, on_change=False, every_seconds=runner.HEARTBEAT_SECONDS / 2
)
