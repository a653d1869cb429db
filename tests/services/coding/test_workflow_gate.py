"""The tests gate of seed 000's workflow: advance_workflow(testsPassed=true) into commit is
taken on evidence (or on gates run then), refused with nothing changed otherwise, and taken
on the agent's word in trust mode. Real repositories, real gate processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.services.coding.gaterepo import commit, gated_repo
from workq.domain.authority import Authority
from workq.domain.workflow import WorkflowPhase as P
from workq.errors import QualityGateFailed, TestsFailing
from workq.services.coding import gates
from workq.services.handle import Queue
from workq.services.plans import workflow
from workq.services.queue import claims, issues, notes
from workq.services.workspaces import repositories, worktrees
from workq.vcs import git

RUN_A = Authority.of({"run-a"})


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return gated_repo(tmp_path / "app", app="x = 1  # BAD\n")


def _testing(q: Queue) -> int:
    """A claimed issue at the testing phase."""
    number = issues.create(q, title="Gated change").number
    claims.claim(q, number, RUN_A)
    workflow.advance(q, number, RUN_A, P.TESTING, skip_justification="to the test")
    return number


def _phase(q: Queue, number: int) -> P:
    return workflow.status(q, number)[0].current_phase


def _advance(q: Queue, number: int, here: Path | None) -> None:
    workflow.advance(q, number, RUN_A, P.COMMIT, tests_passed=True, here=here)


def test_tests_passed_is_refused_until_the_gates_pass(queue: Queue, repo: Path):
    queue.tests_gate = gates.EVIDENCE
    number = _testing(queue)
    with pytest.raises(QualityGateFailed, match="lint"):
        _advance(queue, number, repo)
    assert _phase(queue, number) is P.TESTING

    fixed = commit(repo, {"src/app.py": "x = 1\n"})
    _advance(queue, number, repo)
    assert _phase(queue, number) is P.COMMIT
    (moved,) = [
        e
        for e in notes.history(queue, number)
        if e.kind == "workflow_advanced" and (e.after or {}).get("phase") == "commit"
    ]
    assert (moved.after or {})["gates"] == {"commit": fixed, "dirty": False, "evidence": "ran"}


def test_stored_evidence_for_the_head_is_enough(queue: Queue, repo: Path):
    queue.tests_gate = gates.EVIDENCE
    number = _testing(queue)
    head = commit(repo, {"src/app.py": "x = 1\n"})
    gates.run(queue, number, repo, by=RUN_A)
    _advance(queue, number, repo)
    assert _phase(queue, number) is P.COMMIT
    assert len(gates.evidence(queue, number)) == 2  # read, not run again
    assert {r.commit for r in gates.evidence(queue, number)} == {head}


def test_uncommitted_changes_are_checked_as_they_are(queue: Queue, repo: Path):
    queue.tests_gate = gates.EVIDENCE
    number = _testing(queue)
    (repo / "src" / "app.py").write_text("x = 1  # FAIL\n")
    with pytest.raises(TestsFailing):
        _advance(queue, number, repo)
    assert _phase(queue, number) is P.TESTING
    (repo / "src" / "app.py").write_text("x = 1\n")
    _advance(queue, number, repo)
    assert _phase(queue, number) is P.COMMIT
    assert all(r.dirty for r in gates.evidence(queue, number))


def test_no_checkout_means_no_evidence(queue: Queue):
    queue.tests_gate = gates.EVIDENCE
    number = _testing(queue)
    with pytest.raises(QualityGateFailed, match="no checkout") as refused:
        _advance(queue, number, None)
    assert refused.value.facts["reason"] == "no_checkout"
    assert "--tests-gate trust" in (refused.value.hint or "")
    assert _phase(queue, number) is P.TESTING


def test_trust_mode_takes_the_agents_word(queue: Queue, repo: Path):
    queue.tests_gate = gates.TRUST
    number = _testing(queue)
    _advance(queue, number, repo)
    assert _phase(queue, number) is P.COMMIT
    assert gates.evidence(queue, number) == []


def test_a_justification_is_still_taken_without_gates(queue: Queue, repo: Path):
    queue.tests_gate = gates.EVIDENCE
    number = _testing(queue)
    workflow.advance(queue, number, RUN_A, P.COMMIT, skip_justification="docs only", here=repo)
    assert _phase(queue, number) is P.COMMIT
    assert gates.evidence(queue, number) == []


def test_the_issues_worktree_is_where_the_gates_run(queue: Queue, repo: Path, tmp_path: Path):
    queue.tests_gate = gates.EVIDENCE
    repositories.add(queue, "app", repo)
    number = _testing(queue)
    repositories.assign(queue, number, "app", by=RUN_A)
    spawned = worktrees.spawn(queue, "app", number, by=RUN_A)
    path = Path(spawned.path)
    fixed = commit(path, {"src/app.py": "x = 1\n"})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _advance(queue, number, elsewhere)  # not a repository: the worktree is used
    assert _phase(queue, number) is P.COMMIT
    assert {r.commit for r in gates.evidence(queue, number)} == {fixed}
    assert git.head(repo) != fixed
