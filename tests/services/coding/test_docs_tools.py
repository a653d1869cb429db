"""search_documentation through ``workq serve --toolsets default,context`` working in a
docs repository (a real process over stdio, and the same server built in this process), and
``workq docs search``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, chdir
from pathlib import Path
from typing import Any, get_args

import pytest
from mcp import Client

from tests.server.conftest import call_error, call_ok, stdio_server, text
from tests.services.coding.conftest import environment, status, workq, workq_json
from workq.config import Settings
from workq.server.app import build_server
from workq.server.tools.coding import Scope
from workq.services.coding.docs_index import SCOPES

pytestmark = pytest.mark.anyio


# On asyncio only: here, not in conftest.py, where it would take trio from the gates' tests.
@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _served(tmp_path: Path, cwd: Path) -> Any:
    """A real ``workq serve`` process working in ``cwd``."""
    return stdio_server(
        tmp_path / "q.db", "--toolsets", "default,context", cwd=cwd, env=environment(tmp_path)
    )


@asynccontextmanager
async def _served_here(tmp_path: Path, cwd: Path) -> AsyncIterator[Client]:
    """The server ``_served`` starts, built in this process from the same environment and
    run while this process works in ``cwd`` (the checkout whose docs it searches)."""
    with chdir(cwd):
        with pytest.MonkeyPatch.context() as patch:
            for name, value in environment(tmp_path).items():
                patch.setenv(name, value)
            settings = Settings(db_path=tmp_path / "q.db", toolsets="default,context")
        async with Client(build_server(settings)) as client:
            yield client


async def _search(client: Client, query: str, scope: str | None = None) -> list[dict[str, Any]]:
    args = {"query": query} | ({"scope": scope} if scope else {})
    result = await call_ok(client, "search_documentation", **args)
    assert result.structured_content is not None
    hits: list[dict[str, Any]] = result.structured_content["results"]
    return hits


async def test_ranked_hits_with_title_snippet_line_and_relative_score(
    docs_repo: Path, tmp_path: Path
) -> None:
    async with _served(tmp_path, docs_repo) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        supervisor = await _search(client, "supervisor")
        dto = await _search(client, "DTO validation")
        fixtures = await _search(client, "pytest fixtures")
        errors = await _search(client, "invalid input")
        plain = await client.call_tool("search_documentation", {"query": "restarted supervisor"})
    annotations = tools["search_documentation"].annotations
    assert annotations is not None and annotations.read_only_hint and annotations.idempotent_hint
    # Ignored files, vendored folders and the nested worktree are not searched.
    assert [h["file_path"] for h in supervisor] == ["docs/architecture/workers.md"]
    assert supervisor[0] == {
        "file_path": "docs/architecture/workers.md",
        "title": "Workers",
        "snippet": "…result. Workers that crash are restarted by the supervisor.",
        "relevance_score": 1.0,
        "line_number": 8,
    }
    assert [h["file_path"] for h in dto][:2] == ["docs/coding_standards/dto.md", "README.md"]
    assert dto[0]["title"] == "DTO validation rules" and dto[0]["line_number"] == 3
    assert fixtures[0]["file_path"] == "docs/development/testing.md"
    assert fixtures[0]["line_number"] == 7  # the section that holds both words
    # Text before the first heading: its line, and the title is still the first heading.
    assert errors[0]["file_path"] == "docs/reference/errors.md"
    assert errors[0]["title"] == "Error codes" and errors[0]["line_number"] == 5
    for hits in (dto, fixtures):
        scores = [h["relevance_score"] for h in hits]
        assert scores[0] == 1.0 and all(0 < s <= 1 for s in scores)
        assert scores == sorted(scores, reverse=True)
    assert "docs/architecture/workers.md:8 Workers (1.00)" in text(plain)


async def test_scopes_are_docs_subfolders_and_an_unknown_scope_is_refused(
    docs_repo: Path, tmp_path: Path
) -> None:
    async with _served_here(tmp_path, docs_repo) as client:
        everywhere = await _search(client, "validation")
        standards = await _search(client, "validation", "coding_standards")
        architecture = await _search(client, "validation", "architecture")
        refused = await call_error(
            client, "search_documentation", query="validation", scope="guides"
        )
    assert {h["file_path"] for h in everywhere} == {"docs/coding_standards/dto.md", "README.md"}
    assert [h["file_path"] for h in standards] == ["docs/coding_standards/dto.md"]
    assert architecture == []
    assert "INVALID_INPUT" in text(refused) and "coding_standards" in text(refused)


HOSTILE = [
    'worker"',
    "NEAR(",
    "NEAR(worker supervisor, 2)",
    "work*",
    "worker AND",
    "a OR",
    "^worker",
    "-worker",
    "col:worker",
    "{heading body}: worker",
    "worker)",
    "x" * 500,
]
WORDLESS = ["", "*", "  ", '"', "(", "\"'()*:^-", "a\nb"]


async def test_fts_syntax_in_a_query_is_just_text_and_a_query_without_words_is_refused(
    docs_repo: Path, tmp_path: Path
) -> None:
    async with _served_here(tmp_path, docs_repo) as client:
        answered = [await client.call_tool("search_documentation", {"query": q}) for q in HOSTILE]
        refused = [await client.call_tool("search_documentation", {"query": q}) for q in WORDLESS]
        still = await _search(client, "supervisor")
    assert [text(r) for r in answered if r.is_error] == []
    for query, result in zip(WORDLESS, refused, strict=True):
        assert result.is_error and "INVALID_INPUT" in text(result), query
    assert len(still) == 1


async def test_edits_and_deletions_show_in_the_next_search_and_the_tree_stays_clean(
    docs_repo: Path, tmp_path: Path
) -> None:
    before = status(docs_repo)
    async with _served_here(tmp_path, docs_repo) as client:
        assert await _search(client, "kangaroo") == []
        (docs_repo / "docs/development/testing.md").write_text("# Testing\n\nA kangaroo.\n")
        found = await _search(client, "kangaroo")
        (docs_repo / "docs/development/testing.md").unlink()
        gone = await _search(client, "kangaroo")
    assert [(h["file_path"], h["line_number"]) for h in found] == [
        ("docs/development/testing.md", 3)
    ]
    assert gone == []
    assert sorted(status(docs_repo)) == sorted([*before, " D docs/development/testing.md"])
    assert list((docs_repo / ".git" / "workq" / "docs-index").glob("demo-*.sqlite"))
    assert not (tmp_path / "cache").exists()


def test_docs_search_on_the_command_line(docs_repo: Path, tmp_path: Path) -> None:
    env = environment(tmp_path)
    hits = workq_json(tmp_path / "q.db", "docs", "search", "supervisor", cwd=docs_repo, env=env)
    assert [h["file_path"] for h in hits["results"]] == ["docs/architecture/workers.md"]
    printed = workq(tmp_path / "q.db", "docs", "search", "pytest", cwd=docs_repo, env=env)
    assert printed.returncode == 0 and "docs/development/testing.md:3 Testing" in printed.stdout
    scoped = workq(
        tmp_path / "q.db", "docs", "search", "x", "--scope", "nope", cwd=docs_repo, env=env
    )
    assert scoped.returncode == 1
    assert "INVALID_INPUT: unknown scope 'nope'; choose one of all, architecture" in scoped.stderr
    assert not (tmp_path / "q.db").exists()  # docs search never opens the queue


def test_the_tools_scopes_are_the_services() -> None:
    assert get_args(Scope) == tuple(SCOPES)
