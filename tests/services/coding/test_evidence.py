"""Quality gates through the services, on real git repositories with real gate processes:
runs stored as evidence, and the evidence rule of require_passed (the commit, a clean
tree, the whole checkout)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.services.coding.gaterepo import PY, commit, gated_repo
from workq.domain.authority import Authority
from workq.errors import InvalidInput, QualityGateFailed, TestsFailing, UncommittedChanges
from workq.services.coding import gates
from workq.services.handle import Queue
from workq.services.queue import claims, issues, notes
from workq.vcs import git

AGENT = Authority.of({"agent-a"})


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return gated_repo(tmp_path / "app", app="x = 1  # BAD\n")


def _issue(q: Queue) -> int:
    """An issue ``agent-a`` holds: running its gates is the holder's act."""
    number = issues.create(q, title="gated work").number
    claims.claim(q, number, AGENT)
    return number


def test_gates_fail_then_pass_and_history_says_on_which_commit(queue: Queue, repo: Path):
    number = _issue(queue)
    first = gates.run(queue, number, repo, by=AGENT, actor="agent-a")
    assert not first.overall_pass and not first.dirty
    assert first.config == "workq.toml [gates] on main" and first.commit == git.head(repo)
    lint, tests = first.gates
    assert (lint.gate_number, lint.name, lint.passed, lint.score) == (1, "lint", False, "9/10")
    assert [(i.file, i.line) for i in lint.issues] == [("src/app.py", 1)]
    assert "X001 BAD found" in lint.issues[0].message
    assert tests.passed and tests.tests
    assert first.test_results is not None and first.test_results.passed == 3

    fixed = commit(repo, {"src/app.py": "x = 1\n"}, "fix")
    second = gates.run(queue, number, repo, by=AGENT, actor="agent-a")
    assert second.overall_pass and second.commit == fixed
    assert [g.score for g in second.gates] == ["10/10", "10/10"]

    runs = gates.evidence(queue, number)
    assert [(r.commit, r.gate, r.passed) for r in runs] == [
        (fixed, "tests", True),
        (fixed, "lint", True),
        (first.commit, "tests", True),
        (first.commit, "lint", False),
    ]
    events = [e for e in notes.history(queue, number) if e.kind == "gates_run"]
    assert [(e.after or {}).get("commit") for e in events] == [first.commit, fixed]
    assert [(e.after or {}).get("gates") for e in events] == [
        {"lint": "failed", "tests": "passed"},
        {"lint": "passed", "tests": "passed"},
    ]
    assert {e.actor for e in events} == {"agent-a"}


def test_require_passed_runs_once_then_reads_the_evidence(queue: Queue, repo: Path):
    number = _issue(queue)
    head = commit(repo, {"src/app.py": "x = 2\n"})
    ran = gates.require_passed(queue, number, repo, head, by=AGENT)
    assert ran.overall_pass and not ran.from_evidence
    again = gates.require_passed(queue, number, repo, head, by=AGENT, run=False)
    assert again.overall_pass and again.from_evidence
    assert [g.name for g in again.gates] == ["lint", "tests"]
    assert len(gates.evidence(queue, number)) == 2  # nothing ran the second time


def test_gates_passed_on_an_older_commit_do_not_count(queue: Queue, repo: Path):
    number = _issue(queue)
    old = commit(repo, {"src/app.py": "x = 2\n"})
    assert gates.require_passed(queue, number, repo, old, by=AGENT).overall_pass
    new = commit(repo, {"src/app.py": "x = 3  # BAD\n"})
    with pytest.raises(QualityGateFailed, match="no evidence") as missing:
        gates.require_passed(queue, number, repo, new, by=AGENT, run=False)
    assert missing.value.facts["missing"] == ["lint", "tests"]
    with pytest.raises(QualityGateFailed, match="lint") as failed:
        gates.require_passed(queue, number, repo, new, by=AGENT)
    assert failed.value.facts["failing"] == [
        {"gate": "lint", "cause": "failed", "first_issue": "src/app.py:1: col 1: X001 BAD found"}
    ]
    assert failed.value.facts["commit"] == new
    # The text names what the structured part names: the gate, the file, line and message.
    assert "lint (1 issue, first src/app.py:1: col 1: X001 BAD found)" in failed.value.message
    # The older commit's evidence still stands for the older commit.
    assert gates.require_passed(queue, number, repo, old, by=AGENT, run=False).from_evidence


def test_runs_on_a_dirty_tree_are_not_evidence(queue: Queue, repo: Path):
    number = _issue(queue)
    head = commit(repo, {"src/app.py": "x = 2  # BAD\n"})
    (repo / "src" / "app.py").write_text("x = 2\n")  # fixed, but not committed
    report = gates.run(queue, number, repo, by=AGENT)
    assert report.overall_pass and report.dirty and report.commit == head
    with pytest.raises(QualityGateFailed, match="no evidence"):
        gates.require_passed(queue, number, repo, head, by=AGENT, run=False)
    with pytest.raises(UncommittedChanges, match="uncommitted") as dirty:
        gates.require_passed(queue, number, repo, head, by=AGENT)
    assert dirty.value.facts["paths"] == ["src/app.py"]


def test_gates_on_named_files_are_not_evidence_for_the_commit(queue: Queue, repo: Path):
    number = _issue(queue)
    head = commit(repo, {"src/app.py": "x = 2\n"})
    named = gates.run(queue, number, repo, by=AGENT, files=["src/app.py"])
    assert named.overall_pass and not named.dirty
    assert named.evidence == "none"
    assert named.note() == (
        f"Not evidence for {head[:12]} (run on named files or gates): a merge or testsPassed "
        "needs every gate passed on the commit from a clean tree; no stored runs of every "
        "gate on it yet"
    )
    with pytest.raises(QualityGateFailed, match="no evidence"):
        gates.require_passed(queue, number, repo, head, by=AGENT, run=False)
    whole = gates.run(queue, number, repo, by=AGENT)  # every gate, clean tree: the evidence itself
    assert whole.evidence == "this run" and whole.note() is None
    again = gates.run(queue, number, repo, by=AGENT, files=["src/app.py"])
    assert again.evidence == "stored, passed"
    assert (again.note() or "").endswith("; its stored runs passed")
    (repo / "src" / "app.py").write_text("x = 3  # BAD\n")
    dirty = gates.run(queue, number, repo, by=AGENT)
    assert dirty.evidence == "stored, passed" and not dirty.overall_pass
    assert "(run on uncommitted changes)" in (dirty.note() or "")


def test_failing_tests_raise_tests_failing_with_the_counts(queue: Queue, repo: Path):
    number = _issue(queue)
    head = commit(repo, {"src/app.py": "x = 2  # FAIL\n"})
    with pytest.raises(TestsFailing, match="the tests fail") as failing:
        gates.require_passed(queue, number, repo, head, by=AGENT)
    assert failing.value.code == "ERR_TESTS_FAILING"
    results = failing.value.facts["test_results"]
    assert (results["passed"], results["failed"]) == (2, 1)
    assert results["errors"] == ["FAILED tests/test_app.py::test_app - assert 1 == 2"]


def test_the_checkout_must_be_at_the_commit(queue: Queue, repo: Path):
    number = _issue(queue)
    old = git.head(repo)
    commit(repo, {"src/app.py": "x = 2\n"})
    with pytest.raises(QualityGateFailed, match="cannot run there"):
        gates.require_passed(queue, number, repo, old, by=AGENT)


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("/etc/passwd", "absolute"),
        ("../outside.py", "leaves the checkout"),
        ("src/../../outside.py", "leaves the checkout"),
        ("src/missing.py", "not in the checkout"),
        ("src", "not in the checkout"),
        ("", "non-empty"),
    ],
)
def test_files_must_be_files_inside_the_checkout(queue: Queue, repo: Path, given: str, says: str):
    number = _issue(queue)
    with pytest.raises(InvalidInput, match=says):
        gates.run(queue, number, repo, by=AGENT, files=[given])
    assert gates.evidence(queue, number) == []


def test_a_symlink_out_of_the_checkout_is_refused(queue: Queue, repo: Path, tmp_path: Path):
    (tmp_path / "secret.py").write_text("x = 1\n")
    (repo / "src" / "link.py").symlink_to(tmp_path / "secret.py")
    with pytest.raises(InvalidInput, match="leads out of the checkout"):
        gates.run(queue, _issue(queue), repo, by=AGENT, files=["src/link.py"])


def test_gates_are_chosen_by_number_or_name(queue: Queue, repo: Path):
    number = _issue(queue)
    assert [g.name for g in gates.run(queue, number, repo, by=AGENT, gates=[2]).gates] == ["tests"]
    assert [g.name for g in gates.run(queue, number, repo, by=AGENT, gates=["lint"]).gates] == [
        "lint"
    ]
    no_tests = gates.run(queue, number, repo, by=AGENT, include_tests=False)
    assert [g.name for g in no_tests.gates] == ["lint"] and no_tests.test_results is None
    with pytest.raises(InvalidInput, match="no gate 7 \\(gates: 1=lint, 2=tests\\)"):
        gates.run(queue, number, repo, by=AGENT, gates=[7])


def test_a_gate_whose_files_match_nothing_is_skipped(queue: Queue, repo: Path):
    number = _issue(queue)
    report = gates.run(queue, number, repo, by=AGENT, files=["README.md"])
    lint = report.gates[0]
    assert lint.skipped and lint.passed and lint.score == "skipped"


def test_a_missing_program_fails_its_gate_clearly(queue: Queue, tmp_path: Path):
    toml = '[gates.style]\ncommand = "workq-no-such-linter {files}"\n'
    repo = gated_repo(tmp_path / "app", toml=toml)
    report = gates.run(queue, _issue(queue), repo, by=AGENT)
    (style,) = report.gates
    assert not style.passed and not report.overall_pass
    assert style.error == (
        "program 'workq-no-such-linter' not found: install it, or change gate 'style''s "
        "command (workq.toml [gates] on main)"
    )


def test_a_hanging_gate_times_out(queue: Queue, tmp_path: Path):
    toml = f'[gates.slow]\ncommand = [{PY}, "-c", "import time; time.sleep(600)"]\ntimeout = 1\n'
    repo = gated_repo(tmp_path / "app", toml=toml)
    number = _issue(queue)
    with pytest.raises(QualityGateFailed, match=r"slow \(timed out\)"):
        gates.require_passed(queue, number, repo, git.head(repo), by=AGENT)
    (run,) = gates.evidence(queue, number)
    assert run.timed_out and not run.passed


def test_a_gate_printing_megabytes_leaves_a_small_answer(queue: Queue, tmp_path: Path):
    code = (
        "import sys\\nfor i in range(100000): print('src/app.py:1:1: noise ' + 'x' * 80)"
        "\\nsys.exit(1)"
    )
    toml = f'[gates.noisy]\ncommand = [{PY}, "-c", "{code}"]\n'
    repo = gated_repo(tmp_path / "app", toml=toml)
    report = gates.run(queue, _issue(queue), repo, by=AGENT)
    (noisy,) = report.gates
    assert not noisy.passed and noisy.output_cut_bytes > 5_000_000
    assert len(noisy.issues) == 20 and noisy.issues_total < 1000
    assert len(report.model_dump_json()) < 20_000


def test_where_the_gates_come_from(queue: Queue, tmp_path: Path):
    repo = gated_repo(tmp_path / "app")
    assert gates.in_effect(queue, repo).source == "workq.toml [gates] on main"
    commit(
        repo, {"pyproject.toml": '[tool.workq.gates.only]\ncommand = ["true"]\nkind = "tests"\n'}
    )
    assert gates.in_effect(queue, repo).source == "workq.toml [gates] on main"  # it wins
    git.run(["rm", "-q", "workq.toml"], cwd=repo)
    git.run(["commit", "-q", "-m", "no workq.toml"], cwd=repo)
    found = gates.in_effect(queue, repo)
    assert found.source == "pyproject.toml [tool.workq.gates] on main"
    assert [(g.name, g.tests) for g in found.gates] == [("only", True)]
    commit(repo, {"pyproject.toml": "[project]\nname = 'x'\n"})
    assert gates.settings(queue, repo).source == "none"
    assert gates.settings(queue, repo).gates == []
    queue.default_gates = "strict"
    default = gates.settings(queue, repo)
    assert default.source == "preset strict"
    assert [g.name for g in default.gates] == [
        "whitespace",
        "imports",
        "line-length",
        "mypy",
        "tests",
    ]
    commit(repo, {"pyproject.toml": "[tool.workq.gates.x]\ncommand = 3\n"})
    with pytest.raises(InvalidInput, match="command is a string or a list"):
        gates.in_effect(queue, repo)
    commit(repo, {"pyproject.toml": "[tool\n"})
    with pytest.raises(InvalidInput, match=r"pyproject\.toml on main is not valid TOML"):
        gates.in_effect(queue, repo)


def test_the_gates_in_effect_are_the_default_branchs_not_the_checkouts(
    queue: Queue, tmp_path: Path
):
    repo = gated_repo(tmp_path / "app")
    other = '[gates.other]\ncommand = ["true"]\n'
    (repo / "workq.toml").write_text(other)  # not committed
    assert [g.name for g in gates.in_effect(queue, repo).gates] == ["lint", "tests"]
    assert [g.name for g in gates.proposed(repo).gates] == ["other"]
    git.run(["switch", "-q", "-c", "feature"], cwd=repo)
    commit(repo, {"workq.toml": other})  # committed on a branch: in effect once merged
    assert [g.name for g in gates.in_effect(queue, repo).gates] == ["lint", "tests"]
    pending = gates.pending(queue, repo)
    assert pending is not None and [g.name for g in pending.gates] == ["other"]
    git.run(["switch", "-q", "main"], cwd=repo)
    git.run(["merge", "-q", "--no-ff", "-m", "take the new gates", "feature"], cwd=repo)
    assert [g.name for g in gates.in_effect(queue, repo).gates] == ["other"]
    assert gates.pending(queue, repo) is None


def test_an_unregistered_clone_reads_the_branch_its_origin_names(queue: Queue, tmp_path: Path):
    origin = gated_repo(tmp_path / "origin")
    git.run(["branch", "-q", "-m", "main", "trunk"], cwd=origin)
    clone = tmp_path / "clone"
    git.run(["clone", "-q", str(origin), str(clone)], cwd=tmp_path)
    git.run(["switch", "-q", "-c", "work"], cwd=clone)
    (clone / "workq.toml").write_text('[gates.mine]\ncommand = ["true"]\n')
    git.run(["add", "workq.toml"], cwd=clone)
    git.run(["-c", "user.name=T", "-c", "user.email=t@x", "commit", "-q", "-m", "x"], cwd=clone)
    found = gates.in_effect(queue, clone)
    assert found.source == "workq.toml [gates] on trunk"
    assert [g.name for g in found.gates] == ["lint", "tests"]
