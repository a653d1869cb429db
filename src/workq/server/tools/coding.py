"""The ``coding`` toolset: where an agent stands, the repository's docs, and the quality
gates run by the server on the issue's checkout (stored on the issue as evidence). The
workflow server's profile (profiles/workflow_context.py, workflow_gates.py) answers
through the same functions under its own names."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from workq.errors import InvalidInput
from workq.schemas import DocResults, GateReport, WorkContext
from workq.server import tasks as tasking
from workq.server.params import Flag, Number, RunId
from workq.server.registry import Registry, writes
from workq.server.results import SPELLING, clip, ok, worded
from workq.server.state import ServerState
from workq.server.task_answers import refusable

if TYPE_CHECKING:
    from workq.schemas import GateResult

Scope = Literal[
    "all", "architecture", "coding_standards", "development", "reference", "implementation"
]
Query = Annotated[str, Field(min_length=1, max_length=500)]
FILES_MAX = 500
File = Annotated[str, Field(min_length=1, max_length=1024)]
Files = Annotated[
    list[File],
    Field(max_length=FILES_MAX, description="Paths in the checkout; [] = all of it"),
]
GateRef = Annotated[int | str, Field(description="A gate's number or name")]

# Both reads declared idempotent outright (MCP reads idempotentHint only on tools that
# write, but a client deciding on retries may look at it alone).
READ_ONLY_IDEMPOTENT = ToolAnnotations(
    read_only_hint=True, idempotent_hint=True, open_world_hint=False
)


def context_answer(state: ServerState, include_closed_recent: bool) -> CallToolResult:
    from workq.services.coding import work_context

    found = work_context.gather(
        state.queue(),
        by=state.authority(),
        branch=work_context.checkout_branch(Path.cwd()),
        include_closed_recent=include_closed_recent,
    )
    return ok(work_context.text(found), found)


def docs_answer(state: ServerState, query: str, scope: Scope) -> CallToolResult:
    from workq.services.coding import docs_index

    found = docs_index.search(Path.cwd(), query, scope, state.settings.cache_folder)
    return ok(docs_index.text(found, query), found)


def gates_answer(
    state: ServerState,
    number: int | None,
    files: list[str],
    *,
    include_tests: bool = True,
    gates: list[int | str] | None = None,
    changed: bool = False,
    run_id: str | None = None,
) -> CallToolResult:
    """``changed``: on the files the issue's checkout changes against its default branch
    (instead of ``files``), an empty change running no gate."""
    from workq.services.coding import changes
    from workq.services.coding import gates as service
    from workq.services.tasks import gates as gate_task

    q = state.queue()
    prefix = "Could not run the quality gates"
    if number is not None:
        prefix += f" of issue #{number}"
    verdict = taken = None
    with worded(prefix):
        if changed and files:
            raise InvalidInput("give files or changed=true, not both", field="files")
        by = state.authority(run_id)
        chosen = number or service.held_issue(q, by)
        checkout = service.locate(q, chosen, Path.cwd())
        if changed:
            found = changes.changed_files(q, checkout)
            files = found.files
            taken = f"changed against {found.against}: {clip(', '.join(files), 200)}"
            if not files:  # no gate runs (files=[] would mean the whole checkout)
                gates = []
                verdict = f"no file changed against {found.against}, so no gate ran"
        chance = tasking.offered()
        if chance is not None:  # longer than a moment: a task runs them
            task = gate_task.start_if_long(
                q,
                owner=state.run_id,
                number=chosen,
                checkout=checkout,
                by=by,
                files=files,
                include_tests=include_tests,
                gates=gates,
                actor=run_id or state.run_id,
                said={"prefix": prefix, "verdict": verdict, "files": taken},
                spell=SPELLING.get(),
            )
            if task is not None:
                tasking.hand_over(chance, task.view())
                return ok(f"Running the quality gates of issue #{chosen}", {})
        report = service.run(
            q,
            chosen,
            checkout,
            by=by,
            files=files,
            include_tests=include_tests,
            gates=gates,
            actor=run_id or state.run_id,
        )
    return ok(_text(report, verdict=verdict, files=taken), report)


def gates_rendered(value: dict[str, Any]) -> CallToolResult:
    """A gates task's answer (services/tasks/gates.py) as gates_answer gives it."""
    report = GateReport.model_validate(value["report"])
    text = _text(report, verdict=value.get("verdict"), files=value.get("files"))
    return ok(text, report)


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


def _text(report: GateReport, *, verdict: str | None = None, files: str | None = None) -> str:
    """``verdict`` in place of the report's; ``files``: the files the gates took, said when
    the caller did not name them."""
    state = "uncommitted changes on " if report.dirty else ""
    said = verdict or report.verdict()
    lines = [f"Issue #{report.number}, {state}{report.commit[:12]}: {said} ({report.config})"]
    if files is not None and verdict is None:
        lines.append(files)
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

    @reg.tool(READ_ONLY_IDEMPOTENT)
    def work_context(include_closed_recent: Flag = False) -> Annotated[CallToolResult, WorkContext]:
        """Where you stand: the active issue (from the branch name, else your claim) with
        its acceptance criteria, your claims, next ready issues, blockers, your plan."""
        return context_answer(state, include_closed_recent)

    @reg.tool(READ_ONLY_IDEMPOTENT)
    def docs_search(query: Query, scope: Scope = "all") -> Annotated[CallToolResult, DocResults]:
        """Ranked search (bm25) over the repository's docs (.md, .rst, .txt): the 10 best files,
        each with title, snippet, line and relevance_score (1 = best)."""
        return docs_answer(state, query, scope)

    @reg.tool(writes(idempotent=True))
    def issue_gates(
        number: Number | None = None,
        files: Files | None = None,
        gate: Annotated[GateRef | None, Field(description="Only this gate")] = None,
        changed: Annotated[
            bool,
            Field(
                strict=True,
                description="Only the files changed against the default branch, "
                "without the tests gates unless named",
            ),
        ] = False,
        run_id: RunId = None,
    ) -> Annotated[CallToolResult, GateReport]:
        """Run the repository's quality gates on the issue's checkout (default: the one
        issue you hold). Stored as evidence: a run of a clean tree's whole checkout is
        what merges need."""
        return gates_answer(
            state,
            number,
            files or [],
            include_tests=not changed or gate is not None,
            gates=None if gate is None else [gate],
            changed=changed,
            run_id=run_id,
        )

    tasking.offer(
        tasking.ToolTask(
            tool="issue_gates",
            kind="gates",
            render=refusable(gates_rendered),
            refused="Could not run the quality gates",
        )
    )
