"""What decides a merge belongs to the owner (design.md section 10): the gates in effect are
the table committed on the repository's default branch, never the branch under test's own,
and a gate's environment never carries a token, a database URL or a WORKQ_* setting,
whatever its table lists. Real repositories, worktrees and gate processes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.services.coding.gaterepo import PY, commit
from tests.services.workspaces.gitrepo import make_repo
from tests.workq_cli import workq
from workq.domain import gates as rules
from workq.domain.authority import Authority
from workq.errors import NotHolder, QualityGateFailed
from workq.schemas import Status
from workq.services.coding import commands, gates
from workq.services.handle import Queue
from workq.services.queue import claims, issues
from workq.services.workspaces import claiming, merges, repositories
from workq.vcs import git

AGENT = Authority.of({"agent-a"})
# Fails on a line holding BAD in the files it is given.
LINT = """\
import sys
bad = [n for n in sys.argv[1:] if "BAD" in open(n, encoding="utf-8").read()]
for n in bad:
    print(f"{n}:1:1: X001 BAD found")
sys.exit(1 if bad else 0)
"""
OWNERS = f"""\
[project]
name = "app"

[tool.workq.gates.lint]
command = [{PY}, "checks/lint.py", "{{files}}"]
files = ["src/**"]
"""
# What a hostile branch rewrites the gates it must pass to.
HOSTILE = {
    "a command that always passes": (
        '[project]\nname = "app"\n\n[tool.workq.gates.lint]\ncommand = ["true"]\n'
    ),
    "an empty table": '[project]\nname = "app"\n\n[tool.workq.gates]\n',
}


def _repo(tmp_path: Path) -> Path:
    return make_repo(
        tmp_path / "app",
        {"pyproject.toml": OWNERS, "checks/lint.py": LINT, "src/app.py": "x = 1\n"},
    )


def _spawned(q: Queue, title: str, by: Authority = AGENT) -> tuple[int, Path, str]:
    number = issues.create(q, title=title, repository="app").number
    taken = claiming.claim(q, number, by, worktree=True)
    assert taken.worktree is not None
    return number, Path(taken.worktree.path), taken.worktree.worktree_id


@pytest.mark.parametrize("rewrite", sorted(HOSTILE))
def test_a_branch_cannot_rewrite_the_gates_it_must_pass(
    queue: Queue, tmp_path: Path, rewrite: str
) -> None:
    queue.tests_gate = gates.EVIDENCE
    repo = _repo(tmp_path)
    repositories.add(queue, "app", repo)
    number, path, wid = _spawned(queue, "Hostile")
    main = git.head(repo)
    tip = commit(path, {"pyproject.toml": HOSTILE[rewrite], "src/app.py": "x = 2  # BAD\n"})

    with pytest.raises(QualityGateFailed, match="lint") as refused:
        merges.merge(queue, "app", wid, by=AGENT)
    assert refused.value.facts["commit"] == tip
    assert git.head(repo) == main and path.is_dir()
    assert issues.get(queue, number).status == Status.IN_PROGRESS
    # Run on the branch's own checkout, the gates are still the owner's.
    ran = gates.run(queue, number, path, by=AGENT)
    assert ran.config == "pyproject.toml [tool.workq.gates] on main"
    assert [(g.name, g.passed) for g in ran.gates] == [("lint", False)]
    shown = gates.settings(queue, path)
    assert shown.source == "pyproject.toml [tool.workq.gates] on main"
    assert [g.command[-2:] for g in shown.gates] == [["checks/lint.py", "{files}"]]
    pending = gates.pending(queue, path)
    assert pending is not None and pending.source.startswith("pyproject.toml")

    # Its change to the gates takes effect once merged: here by the owner, after the
    # branch stopped failing the gates in effect.
    commit(path, {"src/app.py": "x = 2\n"})
    owner = Authority.overriding("the owner takes the new gates", who="owner")
    assert merges.merge(queue, "app", wid, by=owner).merged
    assert git.run(["show", "main:pyproject.toml"], cwd=repo).stdout == HOSTILE[rewrite]
    later, later_path, later_wid = _spawned(queue, "After")
    commit(later_path, {"src/app.py": "x = 3  # BAD\n"})
    assert merges.merge(queue, "app", later_wid, by=AGENT).merged
    assert issues.get(queue, later).status == Status.DONE


def test_gates_list_shows_the_owners_table_and_a_branchs_change_as_pending(
    tmp_path: Path,
) -> None:
    repo = _repo(tmp_path)
    git.run(["switch", "-q", "-c", "feature"], cwd=repo)
    commit(repo, {"pyproject.toml": HOSTILE["a command that always passes"]})
    listed = workq("gates", "list", cwd=repo)
    assert listed.returncode == 0, listed.stderr
    assert "(pyproject.toml [tool.workq.gates] on main)" in listed.stdout
    assert "checks/lint.py" in listed.stdout
    assert "differs: it takes effect once merged into the default branch" in listed.stdout
    shown = json.loads(workq("gates", "list", "--json", cwd=repo).stdout)
    assert shown["source"] == "pyproject.toml [tool.workq.gates] on main"


def test_running_gates_is_the_holders_and_a_refusal_stores_nothing(
    queue: Queue, tmp_path: Path
) -> None:
    repo = _repo(tmp_path)
    repositories.add(queue, "app", repo)
    number, path, _wid = _spawned(queue, "Held")
    with pytest.raises(NotHolder):
        gates.run(queue, number, path, by=Authority.of({"agent-b"}))
    with pytest.raises(NotHolder):
        gates.held_issue(queue, Authority.of({"agent-b"}))
    assert gates.held_issue(queue, AGENT) == number
    assert gates.evidence(queue, number) == []
    claims.release(queue, number, AGENT, discard=True)
    with pytest.raises(NotHolder):
        gates.run(queue, number, path, by=AGENT)
    assert gates.evidence(queue, number) == []


# --- a gate's environment ------------------------------------------------------------------

REFUSED = [
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "WORKQ_DATABASE_URL",
    "WORKQ_TESTS_GATE",
    "DATABASE_URL",
    "REDIS_URL",
    "SENTRY_DSN",
    "NPM_AUTH_TOKEN",
    "DEPLOY_SECRET",
    "DB_PASSWORD",
    "PGPASSWORD",
    "AWS_SECRET_ACCESS_KEY",
    "DEPLOY_API_KEY",
    "google_application_credentials",
]
ALLOWED = ["DJANGO_SETTINGS_MODULE", "TOKENIZERS_PARALLELISM", "PYTEST_ADDOPTS", "KEYBOARD"]


@pytest.mark.parametrize("name", REFUSED)
def test_a_gate_table_asking_for_a_secret_is_refused_naming_it(name: str) -> None:
    table = {
        "lint": {"command": "ruff check {files}"},
        "settings": {"command": "x", "env": ALLOWED},  # others pass
        "leak": {"command": "x", "env": ["DJANGO_SETTINGS_MODULE", name]},
    }
    with pytest.raises(rules.GateEnvRefused) as refused:
        rules.parse_table(table, "pyproject.toml [tool.workq.gates] on main")
    error = refused.value
    assert error.code == "GATE_ENV_REFUSED"
    assert error.facts["key"] == name and error.facts["gate"] == "leak"
    assert f"env lists {name}" in error.message
    assert f"take {name} out of the env list of gate 'leak'" in (error.hint or "")
    del table["leak"]
    assert [s.env for s in rules.parse_table(table, "t")] == [(), tuple(ALLOWED)]


def test_the_owners_table_asking_for_a_token_refuses_every_run(
    queue: Queue, tmp_path: Path
) -> None:
    toml = f'[gates.leak]\ncommand = [{PY}, "-c", "pass"]\nenv = ["GITHUB_TOKEN"]\n'
    repo = make_repo(tmp_path / "app", {"workq.toml": toml})
    number = issues.create(queue, title="Leak").number
    claims.claim(queue, number, AGENT)
    with pytest.raises(rules.GateEnvRefused, match="env lists GITHUB_TOKEN"):
        gates.run(queue, number, repo, by=AGENT)
    assert gates.evidence(queue, number) == []


SHOW_ENV = "import json, os; print(json.dumps(sorted(os.environ)))"
SECRETS = {name: f"value-of-{name.lower()}-0123456789" for name in REFUSED}


def _seen(output: str) -> set[str]:
    return set(json.loads(output.strip().splitlines()[-1]))


def test_a_tests_gate_that_prints_its_environment_sees_no_secret_nor_workq_setting(
    queue: Queue, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "app.settings")
    code = f"{SHOW_ENV}; raise SystemExit(1)"  # fails: its output is kept
    toml = (
        f'[gates.env]\ncommand = [{PY}, "-c", "{code}"]\nkind = "tests"\n'
        'env = ["DJANGO_SETTINGS_MODULE"]\n'
    )
    repo = make_repo(tmp_path / "app", {"workq.toml": toml})
    number = issues.create(queue, title="Environment").number
    claims.claim(queue, number, AGENT)
    (gate,) = gates.run(queue, number, repo, by=AGENT).gates
    seen = _seen(gate.output)
    assert "DJANGO_SETTINGS_MODULE" in seen and "PATH" in seen
    assert not seen & set(SECRETS), seen & set(SECRETS)
    assert not [name for name in seen if name.upper().startswith("WORKQ_")], seen


def test_the_runner_never_passes_a_secret_whoever_asks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    env = commands.environment(passed=list(SECRETS), extra={"WORKQ_PROBE": "x"})
    assert not set(env) & {*SECRETS, "WORKQ_PROBE"}
    given = {**env, "GITHUB_TOKEN": "t0123456789", "WORKQ_DB": "/secret.db"}
    out = commands.run([sys.executable, "-c", SHOW_ENV], cwd=tmp_path, timeout=60, env=given)
    assert out.ok and not _seen(out.output) & {"GITHUB_TOKEN", "WORKQ_DB"}


def test_a_repository_landing_through_pull_requests_reads_the_gates_github_holds(
    queue: Queue, tmp_path: Path
) -> None:
    """Its default branch moves on GitHub (merged pull requests), not in the checkout: the
    gates are read from it as last fetched (origin/main), not from a stale local main."""
    bare = tmp_path / "origin.git"
    git.run(["init", "-q", "--bare", "-b", "main", str(bare)], cwd=tmp_path)
    work = _repo(tmp_path)
    git.run(["remote", "add", "origin", str(bare)], cwd=work)
    git.run(["push", "-q", "origin", "main"], cwd=work)
    repositories.add(queue, "app", work, land="pr", github_repo="acme/app")
    # A pull request that changes the gates merges on GitHub; the worker fetches it.
    git.run(["switch", "-q", "-c", "gates"], cwd=work)
    merged = commit(work, {"pyproject.toml": HOSTILE["an empty table"]})
    git.run(["switch", "-q", "main"], cwd=work)
    git.run(["push", "-q", "origin", f"{merged}:refs/heads/main"], cwd=work)
    git.run(["fetch", "-q", "origin", "main"], cwd=work)
    assert git.head(work, "main") != merged  # the local main is behind
    _number, path, _wid = _spawned(queue, "After the merge")
    found = gates.in_effect(queue, path)
    assert (found.source, found.gates) == ("pyproject.toml [tool.workq.gates] on origin/main", ())
