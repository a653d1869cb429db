"""The fake GitHub lands pull requests as GitHub does, against a real bare repository that a
clone pushes to: ``PUT /pulls/{n}/merge`` (merge, squash, rebase; 405, 409), ``PUT
/pulls/{n}/update-branch``, the computed ``mergeable_state`` and ``protect_branch`` (a
``pre-receive`` hook refusing pushes, required checks, up to date), and a fault injected
after the merge. All through the HTTP API."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.github.tools_helpers import clone_with_remote, git
from tests.github_fake.server import FakeGitHub, RemoteFakeGitHub

REPO = "acme/widgets"
NOT_MERGEABLE = "Pull Request is not mergeable"


@dataclass
class Remote:
    """The bare repository the fake reads (``bare``) and a clone that pushes to it."""

    bare: Path
    work: Path

    def tip(self, branch: str) -> str:
        return git(self.bare, "rev-parse", f"refs/heads/{branch}")

    def commit(self, branch: str, name: str, text: str, message: str, *, push: bool = True) -> str:
        """A commit on ``branch`` in the clone writing file ``name``, pushed; its sha."""
        git(self.work, "checkout", "-q", branch)
        (self.work / name).write_text(text)
        git(self.work, "add", name)
        git(self.work, "commit", "-q", "-m", message)
        if push:
            git(self.work, "push", "-q", "origin", branch)
        return git(self.work, "rev-parse", "HEAD")

    def parents(self, commit: str) -> list[str]:
        return git(self.bare, "log", "-1", "--format=%P", commit).split()

    def subject(self, commit: str) -> str:
        return git(self.bare, "log", "-1", "--format=%s", commit)


@pytest.fixture
def api(fake_github: FakeGitHub) -> Iterator[httpx2.Client]:
    headers = {"Authorization": f"Bearer {fake_github.token}"}
    with httpx2.Client(
        base_url=fake_github.url, headers=headers, trust_env=False, timeout=10.0
    ) as client:
        yield client


@pytest.fixture
def remote(tmp_path: Path, fake_github: FakeGitHub) -> Remote:
    """main (a README) and feature (plus feature.txt) pushed to ``remote.git``, which the
    fake reads."""
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    work = clone_with_remote(tmp_path, str(bare))
    git(work, "push", "-q", "origin", "main")
    git(work, "branch", "feature")
    fake_github.set_git_dir(str(bare))
    found = Remote(bare, work)
    found.commit("feature", "feature.txt", "new\n", "Add the feature")
    return found


def open_pull(api: httpx2.Client, title: str = "Add the feature") -> dict[str, Any]:
    made = api.post(
        f"/repos/{REPO}/pulls", json={"title": title, "head": "feature", "base": "main"}
    )
    assert made.status_code == 201, made.text
    return dict(made.json())


def get_pull(api: httpx2.Client, number: int) -> dict[str, Any]:
    got = api.get(f"/repos/{REPO}/pulls/{number}")
    assert got.status_code == 200, got.text
    return dict(got.json())


def state(api: httpx2.Client, number: int) -> tuple[bool | None, str]:
    pull = get_pull(api, number)
    return pull["mergeable"], pull["mergeable_state"]


def merge(api: httpx2.Client, number: int, **body: str) -> httpx2.Response:
    return api.put(f"/repos/{REPO}/pulls/{number}/merge", json=body)


def update_branch(api: httpx2.Client, number: int, **body: str) -> httpx2.Response:
    return api.put(f"/repos/{REPO}/pulls/{number}/update-branch", json=body)


@pytest.mark.parametrize("method", ["merge", "squash", "rebase"])
def test_a_merge_moves_main_to_a_commit_with_the_branch(api, remote, fake_github, method):
    pull = open_pull(api)
    number = pull["number"]
    base = remote.commit("main", "other.txt", "other\n", "Another change")
    head = remote.tip("feature")
    found = get_pull(api, number)
    assert (found["head"]["sha"], found["base"]["sha"]) == (head, base)
    assert (found["mergeable"], found["mergeable_state"]) == (True, "clean")
    assert api.get(f"/repos/{REPO}/pulls/{number}/merge").status_code == 404

    done = merge(api, number, merge_method=method, sha=head)
    assert done.status_code == 200, done.text
    main = remote.tip("main")
    assert main not in (base, head)
    assert done.json() == {
        "sha": main,
        "merged": True,
        "message": "Pull Request successfully merged",
    }
    assert git(remote.bare, "show", f"{main}:feature.txt") == "new"
    assert git(remote.bare, "show", f"{main}:other.txt") == "other"
    if method == "merge":
        assert remote.parents(main) == [base, head]
        assert remote.subject(main) == f"Merge pull request #{number} from acme/feature"
        assert git(remote.bare, "log", "-1", "--format=%b", main) == "Add the feature"
    elif method == "squash":
        assert remote.parents(main) == [base]
        assert remote.subject(main) == f"Add the feature (#{number})"
    else:
        assert remote.parents(main) == [base]
        assert remote.subject(main) == "Add the feature"
        assert git(remote.bare, "log", "-1", "--format=%an", main) == "t"
    assert git(remote.bare, "log", "-1", "--format=%cn <%ce>", main) == (
        "GitHub <noreply@github.com>"
    )

    merged = get_pull(api, number)
    assert merged["merged"] is True and merged["state"] == "closed"
    assert merged["merge_commit_sha"] == main
    assert (merged["mergeable"], merged["mergeable_state"]) == (None, "unknown")
    assert merged["head"]["sha"] == head
    assert fake_github.issue(number)["pull_request"]["merged_at"] == merged["merged_at"]
    assert api.get(f"/repos/{REPO}/pulls/{number}/merge").status_code == 204

    again = merge(api, number, merge_method=method)
    assert again.status_code == 405
    assert again.json()["message"] == NOT_MERGEABLE
    assert remote.tip("main") == main


def test_a_stale_sha_is_409_and_the_head_follows_pushes(api, remote):
    pull = open_pull(api)
    number, old = pull["number"], pull["head"]["sha"]
    main = remote.tip("main")
    new = remote.commit("feature", "more.txt", "more\n", "More of the feature")
    assert get_pull(api, number)["head"]["sha"] == new

    refused = merge(api, number, sha=old)
    assert refused.status_code == 409
    assert refused.json()["message"] == "Head branch was modified. Review and try the merge again."
    assert remote.tip("main") == main
    assert get_pull(api, number)["merged"] is False

    assert merge(api, number, sha=new, merge_method="rebase").status_code == 200
    assert git(remote.bare, "show", "main:more.txt") == "more"


def test_a_conflict_is_dirty_and_405_even_when_forced_clean(api, remote, fake_github):
    remote.commit("feature", "README", "feature's\n", "README on feature")
    main = remote.commit("main", "README", "main's\n", "README on main")
    number = open_pull(api)["number"]
    assert state(api, number) == (False, "dirty")

    refused = merge(api, number)
    assert refused.status_code == 405
    assert refused.json()["message"] == "Merge conflict"
    conflict = update_branch(api, number)
    assert conflict.status_code == 422
    assert conflict.json()["message"] == "merge conflict between base and head"

    fake_github.set_pull(number, mergeable=True, mergeable_state="clean")
    assert state(api, number) == (True, "clean")
    assert merge(api, number, merge_method="squash").json()["message"] == "Merge conflict"
    fake_github.set_pull(number, mergeable_state=None)
    assert state(api, number) == (False, "dirty")
    assert remote.tip("main") == main

    bad = merge(api, number, merge_method="octopus")
    assert bad.status_code == 422
    assert bad.json()["errors"] == [
        {"resource": "PullRequest", "code": "invalid", "field": "merge_method"}
    ]


def test_update_branch_merges_main_into_the_head(api, remote):
    pull = open_pull(api)
    number, old = pull["number"], pull["head"]["sha"]
    base = remote.commit("main", "other.txt", "other\n", "Another change")

    stale = update_branch(api, number, expected_head_sha="0" * 40)
    assert stale.status_code == 422
    assert stale.json()["message"] == "expected_head_sha is not the head of the branch"
    assert remote.tip("feature") == old

    done = update_branch(api, number, expected_head_sha=old)
    assert done.status_code == 202
    assert done.json() == {"message": "Updating pull request branch.", "url": pull["html_url"]}
    head = remote.tip("feature")
    assert remote.parents(head) == [old, base]
    assert remote.subject(head) == "Merge branch 'main' into feature"
    assert git(remote.bare, "show", f"{head}:other.txt") == "other"
    assert get_pull(api, number)["head"]["sha"] == head

    git(remote.work, "checkout", "-q", "feature")
    git(remote.work, "pull", "-q", "--ff-only", "origin", "feature")
    assert (remote.work / "other.txt").read_text() == "other\n"
    assert update_branch(api, number).status_code == 202  # up to date: nothing to do
    assert remote.tip("feature") == head


def test_protect_branch_refuses_pushes_and_blocks_until_the_required_check_passes(
    api, remote, fake_github
):
    pull = open_pull(api)
    number, head = pull["number"], pull["head"]["sha"]
    main = remote.tip("main")
    made = fake_github.protect_branch("main", required_checks=["ci"])
    assert made == {
        "branch": "main",
        "required_checks": ["ci"],
        "up_to_date": False,
        "hook": str(remote.bare / "hooks" / "pre-receive"),
    }
    assert os.access(made["hook"], os.X_OK)
    assert state(api, number) == (True, "blocked")

    remote.commit("main", "direct.txt", "direct\n", "A direct push", push=False)
    with pytest.raises(subprocess.CalledProcessError) as refused:
        git(remote.work, "push", "-q", "origin", "main")
    assert (
        "remote: error: GH006: Protected branch update failed for refs/heads/main."
        in refused.value.stderr
    )
    assert remote.tip("main") == main

    assert merge(api, number).status_code == 405
    fake_github.add_check_run(head, "ci", status="in_progress", conclusion=None)
    assert state(api, number) == (True, "blocked")
    fake_github.add_check_run(head, "ci", conclusion="failure")
    assert state(api, number) == (True, "blocked")
    fake_github.add_check_run(head, "ci")
    assert state(api, number) == (True, "clean")
    fake_github.add_check_run(head, "lint", conclusion="failure")
    assert state(api, number) == (True, "unstable")

    new = remote.commit("feature", "more.txt", "more\n", "More of the feature")
    assert state(api, number) == (True, "blocked")  # the check passed on the old head
    fake_github.add_status(new, "ci", "success")
    assert state(api, number) == (True, "clean")

    done = merge(api, number, sha=new)
    assert done.status_code == 200, done.text
    assert remote.tip("main") == done.json()["sha"]
    assert remote.parents(remote.tip("main")) == [main, new]


def test_up_to_date_protection_is_behind_until_the_branch_is_updated(api, remote, fake_github):
    number = open_pull(api)["number"]
    remote.commit("main", "other.txt", "other\n", "Another change")
    control = RemoteFakeGitHub(fake_github.url)  # over HTTP, /_control/protect_branch
    control.protect_branch("main", up_to_date=True)
    assert state(api, number) == (True, "behind")
    refused = merge(api, number)
    assert refused.status_code == 405
    assert refused.json()["message"] == NOT_MERGEABLE

    assert update_branch(api, number).status_code == 202
    assert state(api, number) == (True, "clean")
    main = remote.tip("main")
    done = merge(api, number, merge_method="rebase")
    assert done.status_code == 200
    # the branch's merge of main is left out: one commit, Add the feature, on main
    assert remote.parents(done.json()["sha"]) == [main]
    assert remote.subject(done.json()["sha"]) == "Add the feature"
    assert git(remote.bare, "show", "main:feature.txt") == "new"


def test_a_502_after_the_merge_leaves_the_pull_merged(api, remote, fake_github):
    number = open_pull(api)["number"]
    main = remote.tip("main")
    fake_github.inject_fault("PUT", "/repos/*/*/pulls/*/merge", status=502, when="after")

    failed = merge(api, number)
    assert failed.status_code == 502
    assert failed.headers["content-type"].startswith("text/html")
    (logged,) = [r for r in fake_github.writes() if r.path.endswith("/merge")]
    assert (logged.status, logged.fault, logged.applied) == (502, "error", True)
    pull = get_pull(api, number)
    assert pull["merged"] is True
    assert remote.tip("main") == pull["merge_commit_sha"] != main
    assert git(remote.bare, "show", "main:feature.txt") == "new"
    assert merge(api, number).status_code == 405


def test_without_a_git_dir_merging_is_recorded(api, fake_github):
    fake_github.seed_branch("main")
    fake_github.seed_branch("feature")
    pull = open_pull(api)
    number, head = pull["number"], pull["head"]["sha"]
    fake_github.set_pull(number, mergeable_state="blocked")
    assert state(api, number) == (True, "blocked")
    assert merge(api, number).status_code == 405
    fake_github.set_pull(number, mergeable_state=None, draft=True)
    assert state(api, number) == (True, "draft")
    assert merge(api, number).status_code == 405
    fake_github.set_pull(number, draft=False)

    assert update_branch(api, number, expected_head_sha=head).status_code == 202
    moved = get_pull(api, number)["head"]["sha"]
    assert moved != head
    assert merge(api, number, sha=head).status_code == 409
    done = merge(api, number, sha=moved)
    assert done.status_code == 200
    assert get_pull(api, number)["merge_commit_sha"] == done.json()["sha"]
