"""Gates are what a repository's owner chose: none without a gate table (merges say so), a
preset when the server names one, ``workq gates init`` to write a starter table; and a
missing program, no tests collected and failing tests are named apart in every answer."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from sqlalchemy import select

from tests.services.coding.gaterepo import PY, commit
from tests.services.workspaces.gitrepo import make_repo
from tests.workq_cli import workq
from workq.config import Settings
from workq.db.tables import gate_runs
from workq.domain import gates as rules
from workq.domain.authority import Authority
from workq.errors import InvalidInput, TestsFailing
from workq.schemas import Status
from workq.services.coding import gates
from workq.services.handle import Queue
from workq.services.queue import claims, issues
from workq.services.runtime import open_queue
from workq.services.workspaces import claiming, merges, repositories
from workq.vcs import git

UNTYPED = "def add(a, b):\n    return a + b\n"
AGENT = Authority.of({"agent-a"})


def _spawned(q: Queue, repo: Path) -> tuple[int, Path, str]:
    repositories.add(q, "app", repo)
    number = issues.create(q, title="Add numbers", repository="app").number
    taken = claiming.claim(q, number, Authority.of({"agent-a"}), worktree=True)
    assert taken.worktree is not None
    return number, Path(taken.worktree.path), taken.worktree.worktree_id


def test_without_a_gate_table_a_merge_checks_nothing_and_says_so(queue: Queue, tmp_path: Path):
    queue.tests_gate = gates.EVIDENCE
    repo = make_repo(tmp_path / "app", {"README.md": "hi\n"})
    number, path, wid = _spawned(queue, repo)
    tip = commit(path, {"src/add.py": UNTYPED})
    report = gates.run(queue, number, path, by=Authority.of({"agent-a"}))
    assert (report.gates, report.config, report.verdict()) == ([], "none", "no gates")
    assert "workq gates init" in (report.note() or "")
    done = merges.merge(queue, "app", wid, by=Authority.of({"agent-a"}))
    assert done.merged and git.head(repo) == tip
    assert done.note == (
        "no quality gates are configured, so none ran; "
        "workq gates init [--preset strict|pytest] writes a starter table"
    )
    assert issues.get(queue, number).status == Status.DONE


def test_the_server_may_name_a_preset_for_repositories_without_a_table(
    queue: Queue, tmp_path: Path
):
    repo = make_repo(tmp_path / "app", {"README.md": "hi\n"})
    assert gates.in_effect(queue, repo).gates == ()
    queue.default_gates = "pytest"
    found = gates.in_effect(queue, repo)
    assert found.source == "preset pytest"
    assert [(g.name, g.tests) for g in found.gates] == [("lint", False), ("tests", True)]
    lint = found.gates[0]
    assert lint.command[:2] == ("ruff", "check") and lint.takes_files
    commit(repo, {"workq.toml": '[gates.only]\ncommand = ["true"]\n'})
    queue.default_gates = "strict"
    assert gates.in_effect(queue, repo).source == "workq.toml [gates] on main"


CAUSES_TOML = f"""\
[gates.lint]
command = ["no-such-linter-for-workq", "{{files}}"]

[gates.tests]
command = [{PY}, "-c", "raise SystemExit(5)"]

[gates.checks]
command = [{PY}, "-c", "print('x.py:3:1: E1 bad'); raise SystemExit(1)"]
"""


def test_a_missing_program_no_tests_and_a_failure_are_named_apart(queue: Queue, tmp_path: Path):
    queue.tests_gate = gates.EVIDENCE
    repo = make_repo(tmp_path / "app", {"workq.toml": CAUSES_TOML, "x.py": "x = 1\n"})
    number, path, wid = _spawned(queue, repo)
    tip = commit(path, {"x.py": "x = 2\n"})
    report = gates.run(queue, number, path, by=Authority.of({"agent-a"}))
    by_name = {g.name: g for g in report.gates}
    assert {n: g.cause for n, g in by_name.items()} == {
        "lint": "missing_program",
        "tests": "no_tests",
        "checks": "failed",
    }
    assert by_name["tests"].score == "0/10"  # no tests is not a perfect score
    assert "no tests collected" in (by_name["tests"].error or "")
    assert "no-such-linter-for-workq" in (by_name["lint"].error or "")
    with pytest.raises(TestsFailing) as refused:
        merges.merge(queue, "app", wid, by=Authority.of({"agent-a"}))
    message = refused.value.message
    assert "lint (program 'no-such-linter-for-workq' not found)" in message
    assert "tests (no tests collected)" in message
    assert "checks (1 issue, first " in message
    causes = {f["gate"]: f["cause"] for f in refused.value.facts["failing"]}
    assert causes == {"lint": "missing_program", "tests": "no_tests", "checks": "failed"}
    assert git.head(repo) != tip  # nothing landed


def test_gates_init_writes_a_starter_table_and_refuses_a_second(tmp_path: Path):
    repo = make_repo(tmp_path / "app", {"workq.toml": "# settings\n"})
    listed = workq("gates", "list", cwd=repo)
    assert listed.returncode == 0 and "No gates in" in listed.stdout
    assert "workq gates init" in listed.stdout

    made = workq("gates", "init", "--preset", "strict", cwd=repo)
    assert made.returncode == 0, made.stderr
    assert "Wrote 5 gates to" in made.stdout and "commit it" in made.stdout
    text = (repo / "workq.toml").read_text()
    assert text.startswith("# settings\n")
    assert list(tomllib.loads(text)["gates"]) == [
        "whitespace",
        "imports",
        "line-length",
        "mypy",
        "tests",
    ]
    assert gates.proposed(repo).gates == rules.PRESETS["strict"]

    again = workq("gates", "init", cwd=repo)
    assert again.returncode != 0 and "already has gates (workq.toml [gates])" in again.stderr
    assert (repo / "workq.toml").read_text() == text  # refused: nothing changed
    bad = workq("gates", "init", "--preset", "lax", cwd=make_repo(tmp_path / "b"))
    assert bad.returncode != 0 and "no gate preset 'lax'" in bad.stderr
    assert not (tmp_path / "b" / "workq.toml").exists()


def test_init_refuses_preset_none(tmp_path: Path):
    with pytest.raises(InvalidInput, match="no gates to write"):
        gates.init(make_repo(tmp_path / "app"), "none")


HANGING_TESTS = {
    "tests/test_quick.py": "def test_quick():\n    assert True\n",
    "tests/test_slow.py": "import time\n\n\ndef test_hangs():\n    time.sleep(120)\n",
}


def test_a_timed_out_tests_gate_names_the_test_it_was_running(tmp_path: Path):
    # Room for pytest to start on a loaded machine (4 s was not, in CI) before the test
    # that hangs; one engine: gates do not touch the database's engine.
    toml = f'[gates.tests]\ncommand = [{PY}, "-m", "pytest", "-q", "-p", "no:cacheprovider"]\n'
    repo = make_repo(tmp_path / "app", {"workq.toml": toml + "timeout = 20\n", **HANGING_TESTS})
    queue = open_queue(Settings(db_path=tmp_path / "q.db"))
    try:
        number = issues.create(queue, title="Hang").number
        claims.claim(queue, number, AGENT)
        report = gates.run(queue, number, repo, by=AGENT)
    finally:
        queue.db.dispose()
    (tests,) = report.gates
    assert tests.cause == "timed_out" and tests.timed_out
    said = tests.error or ""
    assert "timed out after 20 s while running tests/test_slow.py::test_hangs" in said
    assert report.test_results is not None
    assert any("tests/test_slow.py::test_hangs" in e for e in report.test_results.errors)


# Treats an argument starting with -- as an option that redirects its report, as ruff's
# --output-file does; lints every other argument as a file.
OPTION_TAKER = """\
import sys
for arg in sys.argv[1:]:
    if arg.startswith("--output-file="):
        open(arg.split("=", 1)[1], "w").write("report")
    elif "BAD" in open(arg, encoding="utf-8").read():
        print(f"{arg}:1:1: X001 BAD found")
        sys.exit(1)
"""


def test_a_committed_file_named_like_an_option_is_linted_not_obeyed(queue: Queue, tmp_path: Path):
    toml = f'[gates.lint]\ncommand = [{PY}, "lint.py", "{{files}}"]\n'
    evil = "--output-file=report.txt"
    repo = make_repo(tmp_path / "app", {"workq.toml": toml, "lint.py": OPTION_TAKER})
    (repo / evil).write_text("BAD\n")
    git.run(["add", "--", evil], cwd=repo)
    git.run(["commit", "-q", "-m", "a file named like an option"], cwd=repo)
    number = issues.create(queue, title="Lint").number
    claims.claim(queue, number, AGENT)
    (lint,) = gates.run(queue, number, repo, by=AGENT).gates
    assert not (repo / "report.txt").exists()  # the name was not taken as an option
    assert not lint.passed and lint.issues[0].file == f"./{evil}"


SECRET = "ghp_0123456789abcdefSECRET"


def test_gates_get_no_secrets_and_what_they_print_is_redacted(
    queue: Queue, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("GITHUB_TOKEN", SECRET)
    monkeypatch.setenv("DEPLOY_API_KEY", SECRET + "2")
    monkeypatch.setenv("DEPLOY_REGION", "eu-west")
    show = "import os, sys; print(os.environ.get('{0}')); sys.exit(1)"
    leak = "import sys; print(open('leaked.txt').read()); sys.exit(1)"
    toml = (
        f'[gates.plain]\ncommand = [{PY}, "-c", "{show.format("GITHUB_TOKEN")}"]\n\n'
        f'[gates.named]\ncommand = [{PY}, "-c", "{show.format("DEPLOY_REGION")}"]\n'
        'env = ["DEPLOY_REGION"]\n\n'
        f'[gates.leak]\ncommand = [{PY}, "-c", "{leak}"]\n'
    )
    # A secret a gate finds some other way (a file) is still cut out of what it prints.
    repo = make_repo(tmp_path / "app", {"workq.toml": toml, "leaked.txt": SECRET + "2"})
    number = issues.create(queue, title="Leak").number
    claims.claim(queue, number, AGENT)
    report = gates.run(queue, number, repo, by=AGENT)
    plain, named, leaked = report.gates
    assert plain.output.strip() == "None"  # not allow-listed: the gate never saw it
    assert named.output.strip() == "eu-west"  # named in the table: passed on
    assert leaked.output.strip() == "[DEPLOY_API_KEY redacted]"
    stored = _summaries(queue)
    assert "DEPLOY_API_KEY redacted" in stored and SECRET not in stored
    assert [g.env for g in gates.settings(queue, repo).gates] == [[], ["DEPLOY_REGION"], []]


def _summaries(q: Queue) -> str:
    with q.db.read() as conn:
        return " ".join(str(s) for s in conn.execute(select(gate_runs.c.summary)).scalars())
