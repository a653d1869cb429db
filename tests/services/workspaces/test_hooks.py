"""`workq hooks install` in a real git repository: the pre-commit hook refuses a real
commit changing a path another holder reserved exclusively, naming holder and issue."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.server.test_claim_faces import cli_json
from tests.vcs.test_git import make_repo
from tests.workq_cli import workq
from workq.domain.authority import Authority
from workq.errors import GitFailed, PathsReserved
from workq.services.handle import Queue
from workq.services.queue import claims, issues
from workq.services.workspaces import gitflow, hooks
from workq.vcs import git


def _commit(repo: Path, path: str, *, run_id: str | None = None) -> None:
    target = repo / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(f"{path}\n")
    git.run(["add", path], cwd=repo)
    env = {"WORKQ_RUN_ID": run_id} if run_id else None
    git.run(["commit", "-q", "-m", f"change {path}"], cwd=repo, env=env, hooks=True)


@pytest.mark.slow
def test_the_hook_refuses_paths_reserved_by_another_holder(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    cli_json(tmp_path, "create", "auth", "--touch", "src/auth/**")
    cli_json(tmp_path, "claim", "1", "--run-id", "run-a")
    installed = workq("--db", "queue.db", "hooks", "install", "--repo", str(repo))
    assert installed.returncode == 0, installed.stderr
    assert (repo / ".git" / "hooks" / "pre-commit").exists()

    with pytest.raises(GitFailed) as refused:
        _commit(repo, "src/auth/login.py", run_id="run-b")
    message = str(refused.value)
    assert "src/auth/login.py is reserved exclusively by run-a for issue #1" in message
    assert git.run(["log", "--format=%s"], cwd=repo).lines == ["first"]
    git.run(["reset", "-q"], cwd=repo)  # unstage what was refused

    _commit(repo, "docs/readme.md", run_id="run-b")  # not reserved
    _commit(repo, "src/auth/a.py", run_id="run-a")  # the holder itself
    git.run(["checkout", "-q", "-b", "feat/1-auth"], cwd=repo)
    _commit(repo, "src/auth/b.py")  # the issue's own branch
    git.run(["checkout", "-q", "-b", "fix/2-other"], cwd=repo)
    with pytest.raises(GitFailed):
        _commit(repo, "src/auth/c.py")
    git.run(["reset", "-q"], cwd=repo)

    released = workq("--db", "queue.db", "release", "1", "--run-id", "run-a")
    assert released.returncode == 0, released.stderr
    _commit(repo, "src/auth/c.py", run_id="run-b")  # the reservation went with the claim


def test_install_keeps_a_foreign_hook(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\nexit 0\n")
    kept = workq("--db", "queue.db", "hooks", "install", "--repo", str(repo))
    assert kept.returncode != 0 and "is not workq's" in kept.stderr
    assert hook.read_text() == "#!/bin/sh\nexit 0\n"
    assert (
        workq("--db", "queue.db", "hooks", "install", "--repo", str(repo), "--force").returncode
        == 0
    )
    assert "workq pre-commit hook" in hook.read_text()


def test_workq_commits_answer_paths_reserved_and_skip_the_hook(queue: Queue, tmp_path: Path):
    repo = make_repo(tmp_path / "repo")
    hook = hooks.install(repo, db_path=tmp_path / "unused.db")
    marker = tmp_path / "hook-ran"
    lines = hook.read_text().splitlines()
    assert lines[-1].startswith("exec ")
    hook.write_text("\n".join([*lines[:-1], f"touch {marker}"]) + "\n")  # a hook we can see
    auth = issues.create(queue, title="Auth", touches=["src/auth/**"]).number
    claims.claim(queue, auth, Authority.of({"run-a"}))
    mine = issues.create(queue, title="Docs").number
    gitflow.start_work_on_issue(queue, repo, mine, by=Authority.of({"run-b"}))
    before = git.head(repo)

    (repo / "src" / "auth").mkdir(parents=True)
    (repo / "src" / "auth" / "login.py").write_text("x = 1\n")
    with pytest.raises(PathsReserved) as refused:
        gitflow.commit_tdd_phase(queue, repo, "green", "docs", by=Authority.of({"run-b"}))
    assert refused.value.message.endswith(f"src/auth/login.py by run-a for issue #{auth}")
    assert refused.value.facts["reserved"] == [
        {"path": "src/auth/login.py", "holder": "run-a", "number": auth, "glob": "src/auth/**"}
    ]
    assert git.head(repo) == before and git.staged_paths(repo) == []  # nothing committed
    assert not marker.exists()

    (repo / "src" / "auth" / "login.py").unlink()
    (repo / "notes.md").write_text("notes\n")
    gitflow.commit_tdd_phase(queue, repo, "green", "docs", by=Authority.of({"run-b"}))
    assert git.head(repo) != before
    assert not marker.exists()  # checked in process: the hook exited at once
    _commit(repo, "more.md")  # a commit of the user's own runs the hook
    assert marker.exists()


def test_install_keeps_what_it_did_not_write_alone(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    hook = repo / ".git" / "hooks" / "pre-commit"
    assert workq("--db", "queue.db", "hooks", "install", "--repo", str(repo)).returncode == 0
    again = workq("--db", "queue.db", "hooks", "install", "--repo", str(repo))
    assert again.returncode == 0  # its own hook: replaced
    mixed = hook.read_text() + "echo 'my own check'\n"
    hook.write_text(mixed)
    kept = workq("--db", "queue.db", "hooks", "install", "--repo", str(repo))
    assert kept.returncode == 1 and "has lines of its own" in kept.stderr
    assert hook.read_text() == mixed

    hook.unlink()
    hook.symlink_to(tmp_path / "shared-hooks" / "pre-commit")  # dangling
    linked = workq("--db", "queue.db", "hooks", "install", "--repo", str(repo))
    assert linked.returncode == 1 and "is a symbolic link" in linked.stderr
    forced = workq("--db", "queue.db", "hooks", "install", "--repo", str(repo), "--force")
    assert forced.returncode == 0, forced.stderr
    assert not hook.is_symlink() and not (tmp_path / "shared-hooks").exists()


def test_hooks_outside_a_repository_say_so_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    for args, says in (
        (["install", "--repo", str(tmp_path / "missing")], "is not a directory"),
        (["install", "--repo", str(tmp_path / "plain")], "is not in a git repository"),
        (["check", "--repo", str(tmp_path / "plain")], "is not in a git repository"),
    ):
        done = workq("--db", str(tmp_path / "q.db"), "hooks", *args)
        assert done.returncode == 1, args
        (line,) = done.stderr.splitlines()
        assert line.startswith("error: INVALID_INPUT: ") and says in line, line
