"""The names of repositories (domain/names.py): workq's own, GitHub's OWNER/NAME, and the
OWNER/NAME a git remote's URL ends in."""

from __future__ import annotations

import pytest

from workq.domain import names
from workq.errors import InvalidInput


@pytest.mark.parametrize("name", ["app", "App.2", "a", "my_repo-1", "9lives", "a" * 64])
def test_a_repository_name_is_letters_digits_and_dot_underscore_dash(name: str) -> None:
    assert names.repository_name(name) == name


@pytest.mark.parametrize(
    "name", ["", ".hidden", "-x", "_x", "a/b", "a b", "é", "a\n", "a" * 65, None, 7]
)
def test_anything_else_is_refused_naming_the_field(name: object) -> None:
    with pytest.raises(InvalidInput) as refused:
        names.repository_name(name)  # type: ignore[arg-type]
    assert refused.value.facts["field"] == "repo"
    assert "use 1-64 of A-Z a-z 0-9 . _ -" in refused.value.message


@pytest.mark.parametrize("repo", ["acme/widgets", "a/b", "Acme-1/w.i_d-gets", "./.."])
def test_a_github_repository_is_owner_slash_name(repo: str) -> None:
    assert names.is_github_repo(repo)


@pytest.mark.parametrize(
    "repo", ["", "acme", "acme/", "/widgets", "a/b/c", " acme/widgets", "acme/widgets\n", "a b/c"]
)
def test_anything_else_is_not_a_github_repository(repo: str) -> None:
    assert not names.is_github_repo(repo)


def test_the_owner_is_before_the_slash() -> None:
    assert names.owner("acme/widgets") == "acme"


@pytest.mark.parametrize(
    ("url", "repo"),
    [
        ("https://github.com/acme/widgets", "acme/widgets"),
        ("https://github.com/acme/widgets.git", "acme/widgets"),
        ("https://github.com/acme/widgets/", "acme/widgets"),
        ("https://github.com/acme/widgets.git/", "acme/widgets"),
        ("https://github.com/acme/w.js.git", "acme/w.js"),
        ("https://x-access-token:secret@github.com/acme/widgets.git", "acme/widgets"),
        ("ssh://git@github.com/acme/widgets.git", "acme/widgets"),
        ("ssh://git@github.com:22/acme/widgets.git", "acme/widgets"),
        ("git+ssh://git@github.com/acme/widgets", "acme/widgets"),
        ("git@github.com:acme/widgets.git", "acme/widgets"),
        ("git@github.com:acme/widgets", "acme/widgets"),
        ("github.com:acme/widgets.git", "acme/widgets"),
        ("  git@github.com:acme/widgets.git\n", "acme/widgets"),
        ("https://git.example.com/acme/widgets.git", "acme/widgets"),
        ("git@git.example.com:acme/widgets.git", "acme/widgets"),
    ],
)
def test_a_remote_url_names_its_repository(url: str, repo: str) -> None:
    assert names.github_repo_of_remote(url) == repo


@pytest.mark.parametrize(
    "url",
    [
        "",
        "/srv/git/acme/widgets.git",
        "../widgets",
        "acme/widgets",
        "./acme:x/widgets",
        "file:///srv/acme/widgets.git",
        "https://github.com/acme",
        "https://github.com/group/acme/widgets.git",
        "https://github.com/acme/wid gets",
        "C:\\src\\acme/widgets",
    ],
)
def test_a_path_or_a_longer_url_names_none(url: str) -> None:
    assert names.github_repo_of_remote(url) is None


@pytest.mark.parametrize(
    ("url", "repo"),
    [
        ("https://github.com/acme/widgets.git", "acme/widgets"),
        ("https://GitHub.com/acme/widgets.git", "acme/widgets"),
        ("https://token@github.com:443/acme/widgets", "acme/widgets"),
        ("git@github.com:acme/widgets.git", "acme/widgets"),
        ("github.com:acme/widgets", "acme/widgets"),
        ("https://git.example.com/acme/widgets.git", None),
        ("git@gitlab.com:acme/widgets.git", None),
        ("https://notgithub.com/acme/widgets", None),
        ("https://github.com.example/acme/widgets", None),
    ],
)
def test_a_remote_on_another_host_names_none_when_the_host_is_given(
    url: str, repo: str | None
) -> None:
    assert names.github_repo_of_remote(url, host="github.com") == repo
