"""The docs index itself: which files it holds, incremental re-reads, its cache file."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.services.coding.conftest import status
from tests.services.workspaces.gitrepo import make_repo
from workq.errors import InvalidInput
from workq.services.coding import docs_index


def _tree(repo: Path, tmp_path: Path) -> docs_index.Tree:
    return docs_index.locate(repo, tmp_path / "cache")


def test_indexes_tracked_and_untracked_docs_but_not_ignored_vendored_or_other_worktrees(
    docs_repo: Path, tmp_path: Path
) -> None:
    first = docs_index.sync(_tree(docs_repo, tmp_path))
    assert sorted(first.read) == [
        "README.md",
        "docs/architecture/workers.md",
        "docs/coding_standards/dto.md",
        "docs/development/testing.md",
        "docs/development/untracked.md",
        "docs/reference/errors.md",
    ]


def test_only_changed_files_are_read_again_and_deleted_ones_dropped(
    docs_repo: Path, tmp_path: Path
) -> None:
    tree = _tree(docs_repo, tmp_path / "cache")
    docs_index.sync(tree)
    assert docs_index.sync(tree) == docs_index.Synced()  # nothing changed: nothing read
    dto = docs_repo / "docs/coding_standards/dto.md"
    dto.write_text(dto.read_text() + "\nA changed line about kangaroos.\n")
    (docs_repo / "docs/reference/errors.md").unlink()
    again = docs_index.sync(tree)
    assert again.read == ["docs/coding_standards/dto.md"]
    assert again.dropped == ["docs/reference/errors.md"]
    hits = docs_index.search(docs_repo, "kangaroos", "all", tmp_path / "cache").results
    assert [h.file_path for h in hits] == ["docs/coding_standards/dto.md"]
    assert docs_index.search(docs_repo, "INVALID_INPUT", "all", tmp_path / "cache").results == []


def test_same_size_same_second_rewrite_is_seen(docs_repo: Path, tmp_path: Path) -> None:
    tree = _tree(docs_repo, tmp_path)
    docs_index.sync(tree)
    path = docs_repo / "docs/development/testing.md"
    before = path.stat()
    path.write_text(path.read_text().replace("pytest", "pyTEST"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1))
    assert docs_index.sync(tree).read == ["docs/development/testing.md"]


def test_the_cache_lives_in_the_git_directory_and_the_work_tree_stays_clean(
    docs_repo: Path, tmp_path: Path
) -> None:
    before = status(docs_repo)
    tree = _tree(docs_repo, tmp_path)
    docs_index.search(docs_repo, "worker", "all", tmp_path / "cache")
    assert tree.cache.is_file()
    assert tree.cache.parent == docs_repo / ".git" / "workq" / "docs-index"
    assert status(docs_repo) == before
    assert not (tmp_path / "cache").exists()  # used only outside git


def test_each_worktree_has_its_own_index_in_the_shared_git_directory(
    docs_repo: Path, tmp_path: Path
) -> None:
    main = _tree(docs_repo, tmp_path)
    other = _tree(docs_repo / ".worktrees" / "other", tmp_path)
    assert other.root == docs_repo / ".worktrees" / "other"
    assert other.cache.parent == main.cache.parent and other.cache != main.cache
    # The other worktree is on its own commit: no untracked draft there.
    assert "docs/development/untracked.md" not in docs_index.sync(other).read


def test_outside_git_the_folder_is_walked_and_the_cache_is_in_the_cache_folder(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "plain"
    (folder / "docs").mkdir(parents=True)
    (folder / "docs" / "guide.md").write_text("# Guide\n\nHow to deploy.\n")
    (folder / ".hidden").mkdir()
    (folder / ".hidden" / "x.md").write_text("deploy\n")
    (folder / "node_modules").mkdir()
    (folder / "node_modules" / "y.md").write_text("deploy\n")
    hits = docs_index.search(folder, "deploy", "all", tmp_path / "cache").results
    assert [h.file_path for h in hits] == ["docs/guide.md"]
    tree = _tree(folder, tmp_path)
    assert not tree.in_git and tree.cache.parent == tmp_path / "cache" / "docs-index"
    assert sorted(p.name for p in folder.rglob("*")) == sorted(
        ["docs", "guide.md", ".hidden", "x.md", "node_modules", "y.md"]
    )


def test_a_damaged_cache_file_is_rebuilt(docs_repo: Path, tmp_path: Path) -> None:
    tree = _tree(docs_repo, tmp_path)
    docs_index.sync(tree)
    tree.cache.write_bytes(b"this is not a database" * 100)
    for suffix in ("-wal", "-shm"):
        Path(f"{tree.cache}{suffix}").unlink(missing_ok=True)
    hits = docs_index.search(docs_repo, "supervisor", "all", tmp_path / "cache").results
    assert [h.file_path for h in hits] == ["docs/architecture/workers.md"]
    with sqlite3.connect(tree.cache) as conn:
        assert conn.execute("SELECT count(*) FROM files").fetchone() == (6,)


def test_a_cache_of_another_schema_version_is_rebuilt(docs_repo: Path, tmp_path: Path) -> None:
    tree = _tree(docs_repo, tmp_path)
    docs_index.sync(tree)
    with sqlite3.connect(tree.cache) as conn:
        conn.execute("PRAGMA user_version = 999")
    assert len(docs_index.sync(tree).read) == 6


def test_unknown_scope_names_the_choices(docs_repo: Path, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as caught:
        docs_index.search(docs_repo, "worker", "guides", tmp_path / "cache")
    assert caught.value.hint is not None
    assert "architecture" in caught.value.hint and "coding_standards" in caught.value.hint


RACER = """
import sys
from pathlib import Path
from workq.services.coding import docs_index
found = docs_index.search(Path(sys.argv[1]), "topic", "all", Path(sys.argv[2]))
print(len(found.results), sorted(h.file_path for h in found.results)[0])
"""


def test_two_processes_indexing_one_cold_tree_at_once_both_answer(tmp_path: Path) -> None:
    folder = tmp_path / "many"
    (folder / "docs").mkdir(parents=True)
    for i in range(300):
        (folder / "docs" / f"doc{i:03}.md").write_text(f"# Doc {i}\n\ntopic {i} " * 20)
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(folder), str(tmp_path / "cache")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    answers = [r.communicate(timeout=120) for r in racers]
    assert [r.returncode for r in racers] == [0, 0, 0], answers
    outputs = {out for out, _ in answers}
    assert len(outputs) == 1 and outputs.pop().startswith("10 docs/doc")
    tree = _tree(folder, tmp_path)
    with sqlite3.connect(tree.cache) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("SELECT count(*) FROM files").fetchone() == (300,)
        assert conn.execute("SELECT count(DISTINCT path) FROM sections").fetchone() == (300,)


@pytest.fixture(scope="module")
def hostile_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("hostile")
    (folder / "docs").mkdir()
    (folder / "docs" / "a.md").write_text(
        '# A "quoted" NEAR(x) title\n\nSome * text: ^col - AND OR\n'
    )
    return folder


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(query=st.text(max_size=60))
def test_any_query_text_gives_hits_or_invalid_input(hostile_folder: Path, query: str) -> None:
    try:
        found = docs_index.search(hostile_folder, query, "all", hostile_folder / ".cache")
    except InvalidInput:
        return
    assert all(0 < h.relevance_score <= 1 for h in found.results)


RST = """\
==============
more-itertools
==============

Python's itertools library is a gem.

Grouping
========

Install it::

    pip install more-itertools

    Not a title
    -----------

``chunked`` breaks an iterable into lists of a given length.
"""


def test_restructuredtext_and_text_docs_are_read_by_their_titles(tmp_path: Path) -> None:
    """An .rst project (Sphinx) is found; .txt docs only where docs live."""
    repo = make_repo(
        tmp_path / "rst",
        {
            "README.rst": RST,
            "docs/api.txt": "API\n===\n\nThe ``ichunked`` function yields chunks lazily.\n",
            "docs/notes.markdown": "# Notes\n\nchunked in Markdown too.\n",
            "requirements.txt": "chunked-parser==1.0\n",
            "tests/data/chunked.txt": "chunked chunked chunked\n",
        },
    )
    assert sorted(docs_index.sync(_tree(repo, tmp_path)).read) == [
        "README.rst",
        "docs/api.txt",
        "docs/notes.markdown",
    ]
    hits = {
        h.file_path: h
        for h in docs_index.search(repo, "chunked", "all", tmp_path / "cache").results
    }
    assert sorted(hits) == ["README.rst", "docs/notes.markdown"]
    rst = hits["README.rst"]
    assert rst.title == "more-itertools"
    assert rst.line_number == 17  # the line the word is on, in its section "Grouping"
    assert "``chunked`` breaks an iterable" in rst.snippet
    api = docs_index.search(repo, "lazily", "all", tmp_path / "cache").results
    assert [(h.file_path, h.title, h.line_number) for h in api] == [("docs/api.txt", "API", 4)]


def test_restructuredtext_sections() -> None:
    from workq.domain import restructuredtext

    found = restructuredtext.sections(RST)
    assert [(s.heading, s.line) for s in found] == [("more-itertools", 1), ("Grouping", 7)]
    assert "Not a title" in found[1].text  # indented: a literal block, not a heading
    # Too short an underline (under 4, shorter than its title) and a transition are text.
    text = "Intro\n\nTitle\n--\n\n----\n\nEnd\n"
    assert [s.heading for s in restructuredtext.sections(text)] == [""]
