"""The workflow server's run_quality_gates (contract E, profile ``workflow-server``), run
by the server on the issue's checkout and stored on the issue as evidence (services/gates.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from mcp.types import CallToolResult
from pydantic import Field

from workq.schemas import GateReport
from workq.server.params import Number, RunId
from workq.server.registry import Registry, writes
from workq.server.results import clip, ok, worded

if TYPE_CHECKING:
    from workq.schemas import GateResult

FILES_MAX = 500
File = Annotated[str, Field(min_length=1, max_length=1024)]
GateRef = Annotated[int | str, Field(description="A gate's number or name")]


def _line(gate: GateResult) -> str:
    if gate.skipped:
        return f"{gate.gate_number} {gate.name}: skipped (no matching files)"
    head = f"{gate.gate_number} {gate.name}: {'pass' if gate.passed else 'FAIL'} {gate.score}"
    if gate.error:
        return f"{head}: {clip(gate.error, 200)}"
    if gate.issues:
        first = gate.issues[0]
        more = f" (+{gate.issues_total - 1} more)" if gate.issues_total > 1 else ""
        return f"{head}: {first.file}:{first.line}: {clip(first.message)}{more}"
    return head


def _text(report: GateReport) -> str:
    state = "uncommitted changes on " if report.dirty else ""
    lines = [
        f"Issue #{report.number}, {state}{report.commit[:12]}: {report.verdict()} ({report.config})"
    ]
    lines += [_line(g) for g in report.gates]
    if report.test_results is not None:
        t = report.test_results
        lines.append(f"tests: {t.passed} passed, {t.failed} failed")
        lines += [f"  {clip(e, 160)}" for e in t.errors[:5]]
    note = report.note()
    if note:
        lines.append(note)
    return "\n".join(lines)


def register(reg: Registry) -> None:
    state = reg.state

    @reg.tool(writes(idempotent=True))
    def run_quality_gates(
        files: Annotated[
            list[File],
            Field(
                max_length=FILES_MAX,
                description="Paths relative to the checkout; [] = the whole checkout",
            ),
        ],
        include_tests: bool = True,
        gates: Annotated[list[GateRef] | None, Field(max_length=20)] = None,
        issue_number: Annotated[
            Number | None, Field(description="Default: the one issue this session holds")
        ] = None,
        run_id: RunId = None,
    ) -> Annotated[CallToolResult, GateReport]:
        """Run the repository's quality gates (workq.toml / pyproject [tool.workq.gates];
        else whitespace, imports, line length, mypy strict, pytest) on the issue's checkout.
        Stored as evidence: with files=[] on a clean tree, it is what testsPassed and
        merges need."""
        from workq.services import gates as service

        q = state.queue()
        prefix = "Could not run the quality gates"
        if issue_number is not None:
            prefix += f" of issue #{issue_number}"
        with worded(prefix):
            number = issue_number or service.held_issue(q, state.acting_as(run_id))
            checkout = service.locate(q, number, Path.cwd())
            report = service.run(
                q,
                number,
                checkout,
                files=files,
                include_tests=include_tests,
                gates=gates,
                actor=run_id or state.run_id,
            )
        return ok(_text(report), report)
