"""Plan mode through the service: state per run id, the plan file, exit and launchSwarm."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import select

from tests.conftest import FakeClock
from tests.services.plans.conftest import FILLED, fill
from workq.db.tables import events, plans
from workq.domain.authority import Authority
from workq.domain.plan import PlanPhase, render_template
from workq.errors import (
    Conflict,
    InvalidInput,
    InvalidTransition,
    NoActivePlan,
    NotFound,
    PlanEmpty,
    PlanModeActive,
    WorkqError,
)
from workq.plan_schemas import PlanStatus
from workq.services.handle import Queue
from workq.services.plans import plan_mode as svc
from workq.services.queue import claims, issues, listing, notes, ready_queue

FORCE = "I understand this may cause conflicts"


@pytest.fixture
def plans_dir(tmp_path: Path) -> Path:
    return tmp_path / "plans"


def _plan_events(queue: Queue) -> list[tuple[str, str | None, dict[str, object]]]:
    with queue.db.read() as conn:
        rows = conn.execute(
            select(events.c.kind, events.c.actor, events.c.after)
            .where(events.c.kind.like("plan_%"))
            .order_by(events.c.id)
        ).all()
    return [(r.kind, r.actor, json.loads(r.after)) for r in rows]


def test_enter_creates_the_template_and_records_the_plan(queue: Queue, plans_dir: Path) -> None:
    entered = svc.enter(queue, "run-a", "vim-mode", "Implement vim keybindings", plans_dir)
    path = plans_dir / "vim-mode.md"
    assert entered.created_file and not entered.resumed
    assert entered.plan.phase is PlanPhase.EXPLORE
    assert entered.plan.status is PlanStatus.ACTIVE
    assert entered.plan.path == str(path.resolve())
    assert path.read_text() == render_template("vim-mode", "Implement vim keybindings")
    assert svc.active_plan(queue, "run-a") == entered.plan
    assert svc.active_plan(queue, "run-b") is None
    assert _plan_events(queue) == [
        (
            "plan_entered",
            "run-a",
            {
                "plan": entered.plan.id,
                "slug": "vim-mode",
                "phase": "explore",
                "path": str(path.resolve()),
            },
        )
    ]


def test_phases_advance_in_order_and_not_past_exit(
    queue: Queue, plans_dir: Path, clock: FakeClock
) -> None:
    svc.enter(queue, "run-a", "p", "goal", plans_dir)
    seen = []
    for _ in range(4):
        clock.advance(60)
        moved = svc.advance(queue, "run-a")
        seen.append((moved.previous.value, moved.plan.phase.value))
        assert moved.plan.updated_at == clock.now
        assert moved.empty_sections == ["Findings", "Approach", "Risks", "Tasks"]
    assert seen == [
        ("explore", "design"),
        ("design", "review"),
        ("review", "final"),
        ("final", "exit"),
    ]
    with pytest.raises(InvalidTransition, match="no phase after Exit") as refused:
        svc.advance(queue, "run-a")
    assert refused.value.facts["reason"] == "no_next_phase"
    plan = svc.active_plan(queue, "run-a")
    assert plan is not None and plan.phase is PlanPhase.EXIT
    kinds = [kind for kind, _, _ in _plan_events(queue)]
    # Reaching Review, the plan waits for a person (the plan_waiting notice).
    assert (
        kinds
        == ["plan_entered", "plan_advanced", "plan_advanced", "plan_waiting"]
        + ["plan_advanced"] * 2
    )


def test_no_plan_means_advance_and_exit_are_refused(queue: Queue) -> None:
    with pytest.raises(NoActivePlan):
        svc.advance(queue, "run-a")
    with pytest.raises(NoActivePlan):
        svc.exit_plan(queue, "run-a")
    with pytest.raises(NoActivePlan):
        svc.abandon(queue, "run-a")
    assert _plan_events(queue) == []


def test_entering_again_resumes_the_same_slug_and_names_the_active_plan_otherwise(
    queue: Queue, plans_dir: Path
) -> None:
    first = svc.enter(queue, "run-a", "alpha", "goal", plans_dir)
    svc.advance(queue, "run-a")
    again = svc.enter(queue, "run-a", "alpha", "another goal", plans_dir)
    assert again.resumed and again.plan.id == first.plan.id
    assert again.plan.phase is PlanPhase.DESIGN
    with pytest.raises(PlanModeActive, match="already in plan mode: plan alpha, phase Design"):
        svc.enter(queue, "run-a", "beta", "goal", plans_dir)
    assert not (plans_dir / "beta.md").exists()
    with pytest.raises(Conflict, match="alpha is being planned by run run-a"):
        svc.enter(queue, "run-b", "alpha", "goal", plans_dir)
    assert len(svc.list_plans(queue)) == 1


def test_two_runs_plan_at_once_without_seeing_each_other(queue: Queue, plans_dir: Path) -> None:
    svc.enter(queue, "run-a", "alpha", "goal a", plans_dir)
    svc.enter(queue, "run-b", "beta", "goal b", plans_dir)
    svc.advance(queue, "run-b")
    a, b = svc.active_plan(queue, "run-a"), svc.active_plan(queue, "run-b")
    assert a is not None and (a.slug, a.phase) == ("alpha", PlanPhase.EXPLORE)
    assert b is not None and (b.slug, b.phase) == ("beta", PlanPhase.DESIGN)
    fill(plans_dir / "beta.md")
    svc.exit_plan(queue, "run-b")
    assert svc.active_plan(queue, "run-b") is None
    assert svc.active_plan(queue, "run-a") == a
    assert [p.slug for p in svc.list_plans(queue, active_only=True)] == ["alpha"]
    assert [p.slug for p in svc.list_plans(queue, run_id="run-b")] == ["beta"]


def test_exit_refuses_a_plan_with_nothing_beyond_its_template(
    queue: Queue, plans_dir: Path
) -> None:
    svc.enter(queue, "run-a", "p", "goal", plans_dir)
    path = plans_dir / "p.md"
    with pytest.raises(PlanEmpty) as refused:
        svc.exit_plan(queue, "run-a")
    assert refused.value.facts["empty_sections"] == ["Findings", "Approach", "Risks", "Tasks"]
    path.unlink()
    with pytest.raises(PlanEmpty, match="is missing"):
        svc.exit_plan(queue, "run-a")
    plan = svc.active_plan(queue, "run-a")
    assert plan is not None and plan.status is PlanStatus.ACTIVE


def test_exit_warns_of_template_sections_left_empty(queue: Queue, plans_dir: Path) -> None:
    svc.enter(queue, "run-a", "p", "goal", plans_dir)
    fill(plans_dir / "p.md", {"Findings": FILLED["Findings"], "Risks": "None."})
    done = svc.exit_plan(queue, "run-a")
    assert done.plan.status is PlanStatus.EXITED
    assert done.empty_sections == ["Approach", "Tasks"]


def test_exit_frees_the_run_and_the_slug(queue: Queue, plans_dir: Path, clock: FakeClock) -> None:
    entered = svc.enter(queue, "run-a", "p", "goal", plans_dir)
    fill(plans_dir / "p.md")
    clock.advance(5)
    done = svc.exit_plan(queue, "run-a", teammate_count=7)  # ignored without launchSwarm
    assert done.plan.status is PlanStatus.EXITED and done.plan.closed_at == clock.now
    assert done.launched == [] and done.teammate_count is None
    assert listing.list_issues(queue).items == []
    assert svc.active_plan(queue, "run-a") is None
    with queue.db.read() as conn:
        row = conn.execute(select(plans)).one()
    assert (row.active_run, row.active_slug, row.status) == (None, None, "exited")
    # The run can plan again, and another run can take the slug: the file is kept as it is.
    before = (plans_dir / "p.md").read_text()
    second = svc.enter(queue, "run-b", "p", "new goal", plans_dir)
    assert not second.created_file and second.plan.id != entered.plan.id
    assert (plans_dir / "p.md").read_text() == before
    kinds = [kind for kind, _, _ in _plan_events(queue)]
    assert kinds == ["plan_entered", "plan_exited", "plan_entered"]


def test_a_hand_edited_file_is_read_as_it_is_on_disk(queue: Queue, plans_dir: Path) -> None:
    plans_dir.mkdir()
    path = plans_dir / "mine.md"
    path.write_text(
        "# My plan\n\n## Findings\nx\n\n## Design notes\ny\n\n## Risks\nnone\n\n"
        "## Tasks\n- [ ] only task\n"
    )
    entered = svc.enter(queue, "run-a", "mine", "goal", plans_dir)
    assert not entered.created_file
    detail = svc.show(queue, run_id="run-a")
    assert detail.file_exists and detail.empty_sections == []
    path.write_text(path.read_text().replace("## Design notes\ny\n", ""))
    assert svc.show(queue, slug="mine").empty_sections == ["Approach"]
    assert svc.exit_plan(queue, "run-a").empty_sections == []  # no Approach heading: no warning


def test_launch_swarm_turns_the_checklist_into_chained_issues(
    queue: Queue, plans_dir: Path
) -> None:
    issues.create(queue, title="unrelated")
    svc.enter(queue, "run-a", "vim-mode", "Implement vim keybindings", plans_dir)
    fill(plans_dir / "vim-mode.md")
    done = svc.exit_plan(queue, "run-a", launch_swarm=True, teammate_count=2)
    got = [(i.task, i.number, i.title, i.agent, i.waits_for) for i in done.launched]
    assert got == [
        (1, 2, "Add the mode table", "teammate-1", []),
        (2, 3, "Document the modes", "teammate-2", []),
        (3, 4, "Wire the dispatcher", "teammate-1", [2]),
        (4, 5, "End-to-end tests", "teammate-2", [2, 4]),
    ]
    assert done.teammate_count == 2
    wired = issues.get(queue, 5)
    assert wired.labels == ["plan:vim-mode"] and wired.open_blockers == 2
    assert wired.blocked_by == [2, 4]
    assert "Task 4 of plan `vim-mode`" in wired.description
    assert "> Implement vim keybindings" in wired.description
    ready = ready_queue.ready(queue, limit=10)
    assert [r.number for r in ready] == [1, 2, 3]
    kinds = [e.kind for e in notes.history(queue, 5)]
    assert kinds == ["created", "dependency_added", "dependency_added"]
    last = _plan_events(queue)[-1]
    assert last[0] == "plan_exited" and last[2]["launched"] == [2, 3, 4, 5]
    detail = svc.show(queue, slug="vim-mode")
    assert [(i.task, i.number, i.waits_for) for i in detail.issues] == [
        (1, 2, []),
        (2, 3, []),
        (3, 4, [2]),
        (4, 5, [2, 4]),
    ]


def test_done_tasks_are_skipped_and_the_default_is_three_teammates(
    queue: Queue, plans_dir: Path
) -> None:
    svc.enter(queue, "run-a", "p", "goal", plans_dir)
    tasks = "\n".join(
        ["- [x] already done", "- [ ] two (after 1)", "- [ ] three", "- [ ] four", "- [ ] five"]
    )
    fill(plans_dir / "p.md", {**FILLED, "Tasks": tasks})
    done = svc.exit_plan(queue, "run-a", launch_swarm=True)
    assert [(i.task, i.agent, i.waits_for) for i in done.launched] == [
        (2, "teammate-1", []),
        (3, "teammate-2", []),
        (4, "teammate-3", []),
        (5, "teammate-1", []),
    ]
    assert done.teammate_count == svc.DEFAULT_TEAMMATES == 3


def test_a_tasks_touches_become_its_issues_touches(queue: Queue, plans_dir: Path) -> None:
    svc.enter(queue, "run-a", "p", "goal", plans_dir)
    tasks = "- [ ] auth (touches src/auth/**, docs/auth.md)\n- [ ] other (after 1)"
    fill(plans_dir / "p.md", {**FILLED, "Tasks": tasks})
    done = svc.exit_plan(queue, "run-a", launch_swarm=True)
    first, second = (issues.get(queue, i.number) for i in done.launched)
    assert first.touches == ["src/auth/**", "docs/auth.md"] and second.touches == []
    created = notes.history(queue, first.number)[0]
    assert created.after is not None and created.after["touches"] == first.touches


def test_launching_needs_an_open_task_and_a_valid_teammate_count(
    queue: Queue, plans_dir: Path
) -> None:
    svc.enter(queue, "run-a", "p", "goal", plans_dir)
    fill(plans_dir / "p.md", {**FILLED, "Tasks": "- [x] all done already"})
    with pytest.raises(PlanEmpty) as refused:
        svc.exit_plan(queue, "run-a", launch_swarm=True)
    assert refused.value.facts["empty_sections"] == ["Tasks"]
    (plans_dir / "p.md").write_text((plans_dir / "p.md").read_text() + "- [ ] one more\n")
    with pytest.raises(InvalidInput, match="teammateCount"):
        svc.exit_plan(queue, "run-a", launch_swarm=True, teammate_count=0)
    assert listing.list_issues(queue).items == []
    assert svc.active_plan(queue, "run-a") is not None


def test_relaunching_a_revised_plan_reuses_the_issues_it_made_before(
    queue: Queue, plans_dir: Path
) -> None:
    svc.enter(queue, "run-a", "p", "goal", plans_dir)
    fill(plans_dir / "p.md", {**FILLED, "Tasks": "- [ ] one\n- [ ] two (after 1)\n"})
    svc.exit_plan(queue, "run-a", launch_swarm=True, teammate_count=1)
    claims.claim(queue, 1, Authority.of({"worker"}))
    claims.complete(queue, 1, Authority.of({"worker"}))
    svc.enter(queue, "run-a", "p", "goal", plans_dir)
    path = plans_dir / "p.md"
    path.write_text(path.read_text() + "- [ ] three (after 1, 2)\n")
    again = svc.exit_plan(queue, "run-a", launch_swarm=True, teammate_count=2)
    got = [(i.task, i.number, i.reused, i.waits_for) for i in again.launched]
    assert got == [(1, 1, True, []), (2, 2, True, [1]), (3, 3, False, [1, 2])]
    assert issues.get(queue, 3).open_blockers == 1  # #1 is done, #2 is not
    assert len(listing.list_issues(queue).items) == 3


def test_abandon_leaves_plan_mode_without_checking_the_plan(queue: Queue, plans_dir: Path) -> None:
    svc.enter(queue, "run-a", "p", "goal", plans_dir)
    dropped = svc.abandon(queue, "run-a", actor="admin")
    assert dropped.status is PlanStatus.ABANDONED
    assert svc.active_plan(queue, "run-a") is None
    assert (plans_dir / "p.md").exists()
    assert _plan_events(queue)[-1][:2] == ("plan_abandoned", "admin")


def test_claims_and_completions_are_refused_while_planning(queue: Queue, plans_dir: Path) -> None:
    for title in ("one", "two", "three"):
        issues.create(queue, title=title)
    claims.claim(queue, 1, Authority.of({"run-a"}))
    svc.enter(queue, "run-a", "p", "goal", plans_dir)
    refusals: list[tuple[str, Callable[[], object]]] = [
        ("claim", lambda: claims.claim(queue, 2, Authority.of({"run-a"}))),
        (
            "claim",
            lambda: claims.claim(queue, 2, Authority.of({"alias", "run-a"}, acts_as="alias")),
        ),
        ("claim", lambda: claims.claim_next(queue, Authority.of({"run-a"}))),
        (
            "claim",
            lambda: claims.claim_next(queue, Authority.of({"alias", "run-a"}, acts_as="alias")),
        ),
        ("take over", lambda: claims.force_claim(queue, 1, Authority.of({"run-a"}), FORCE)),
        (
            "complete",
            lambda: claims.complete(queue, 1, Authority.of({"run-a"})),
        ),
    ]
    before = _snapshot(queue)
    for action, call in refusals:
        with pytest.raises(PlanModeActive, match="plan p, phase Explore") as refused:
            call()
        assert f"to {action} is refused" in refused.value.message
        assert refused.value.facts == {"run_id": "run-a", "slug": "p"}
    assert _snapshot(queue) == before  # refused in the claim's own transaction: nothing changed
    # Other runs go on; an admin may override the gate.
    got = claims.claim_next(queue, Authority.of({"run-b"}))
    assert got is not None and got.number == 2
    assert (
        claims.claim(
            queue, 3, Authority.overriding("ignore plan mode", who="admin", acts_as="run-a")
        ).claimed_by
        == "run-a"
    )
    ignoring = Authority.overriding("ignore plan mode", who="admin", run_ids={"run-a"})
    assert claims.complete(queue, 1, ignoring).number == 1


@pytest.mark.parametrize("count", range(1, 11))
def test_the_plan_gate_holds_for_every_count_of_run_ids(
    queue: Queue, plans_dir: Path, count: int
) -> None:
    """The gate is one statement per count of run ids (up to eight, then asked apart):
    a caller holding ``count`` of them, the last one planning, is refused a claim and a
    completion; the same count, none planning, is not."""
    for title in ("one", "two", "three"):
        issues.create(queue, title=title)
    held = {f"run-{i:02}" for i in range(count - 1)} | {"run-z"}  # run-z sorts last
    claims.claim(queue, 1, Authority.of({"run-z"}))
    svc.enter(queue, "run-z", "p", "goal", plans_dir)
    before = _snapshot(queue)
    with pytest.raises(PlanModeActive):
        claims.claim_next(queue, Authority.of(held, acts_as="run-z"))
    with pytest.raises(PlanModeActive):
        claims.complete(queue, 1, Authority.of(held, acts_as="run-z"))
    assert _snapshot(queue) == before
    free = {f"free-{i:02}" for i in range(count)}
    got = claims.claim_next(queue, Authority.of(free, acts_as=min(free)))
    assert got is not None and got.number == 2
    assert claims.complete(queue, 2, Authority.of(free, acts_as=min(free))).number == 2


def _snapshot(queue: Queue) -> list[tuple[object, ...]]:
    with queue.db.read() as conn:
        rows = conn.execute(select(events.c.kind, events.c.number).order_by(events.c.id))
        return [tuple(r) for r in rows] + [
            (i.number, i.status, i.claimed_by) for i in listing.list_issues(queue).items
        ]


def test_show_needs_a_slug_or_a_run_and_finds_them(queue: Queue, plans_dir: Path) -> None:
    with pytest.raises(InvalidInput):
        svc.show(queue)
    with pytest.raises(NoActivePlan):
        svc.show(queue, run_id="run-a")
    svc.enter(queue, "run-a", "p", "goal", plans_dir)
    assert svc.show(queue, run_id="run-a").plan.slug == "p"
    assert svc.show(queue, slug="p", run_id="run-a").plan.slug == "p"
    with pytest.raises(NotFound):
        svc.show(queue, slug="p", run_id="run-b")
    with pytest.raises(NotFound):
        svc.show(queue, slug="nothing")
    (plans_dir / "p.md").unlink()
    detail = svc.show(queue, slug="p")
    assert not detail.file_exists and detail.empty_sections is None


def _race(count: int, attempt: Callable[[int], object]) -> list[object]:
    """Run ``attempt(i)`` in ``count`` threads released at once; their results or errors."""
    barrier = threading.Barrier(count)
    results: list[object] = [None] * count

    def one(i: int) -> None:
        barrier.wait(timeout=30)
        try:
            results[i] = attempt(i)
        except WorkqError as exc:
            results[i] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
        assert not thread.is_alive()
    return results


def test_racing_entries_of_one_run_leave_one_plan_and_one_file(
    queue: Queue, plans_dir: Path
) -> None:
    results = _race(8, lambda i: svc.enter(queue, "run-a", f"slug-{i}", "goal", plans_dir))
    won = [r for r in results if isinstance(r, svc.Entered)]
    assert len(won) == 1
    assert all(isinstance(r, PlanModeActive) for r in results if r not in won)
    assert [p.name for p in plans_dir.iterdir()] == [f"{won[0].plan.slug}.md"]
    assert len(svc.list_plans(queue)) == 1


def test_racing_runs_on_one_slug_leave_one_owner(queue: Queue, plans_dir: Path) -> None:
    results = _race(8, lambda i: svc.enter(queue, f"run-{i}", "shared", "goal", plans_dir))
    won = [r for r in results if isinstance(r, svc.Entered)]
    assert len(won) == 1 and won[0].created_file
    assert all(isinstance(r, Conflict) for r in results if r not in won)
    assert [p.run_id for p in svc.list_plans(queue, active_only=True)] == [won[0].plan.run_id]
