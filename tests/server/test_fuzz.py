"""Hypothesis-generated arguments, valid and invalid, against every tool of a real server
subprocess: each call gets a result or a clean ``isError``, the server keeps answering, and
a refused call changes nothing: in the database, beside it, and in a registered git
repository (its refs, its worktrees and their files)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.types import Tool

from tests.server.conftest import EVERYTHING_LOCAL, error_of, stdio_server, text
from tests.services.workspaces.gitrepo import commit, make_repo, repository_state
from workq.config import Settings
from workq.db import sqlite
from workq.domain.authority import Authority
from workq.server.results import OBJECT_FAILURES
from workq.services.queue import blocking, claims, dependencies, issues
from workq.services.runtime import open_queue
from workq.services.workspaces import claiming, repositories

EXAMPLES = 600  # enough draws to reach every tool of every toolset
# A failure starts with a CODE, or with the seed's wording followed by one.
CLEAN_FAILURE = re.compile(r"^([A-Z_]+: |Could not [^:]+: [A-Z_]+: )")

Json = Any


def seed_003_error(line: str) -> bool:
    """The agit tools answer errors with seed 003's JSON object, workq's code added."""
    try:
        data = json.loads(line)
    except ValueError:
        return False
    return isinstance(data, dict) and bool(data.get("error")) and bool(data.get("code"))


# Characters the text rules are about, drawn often (plain st.text() seldom draws them): C0
# and C1 controls (CSI U+009B, NEL U+0085), DEL, the Unicode line and paragraph separators,
# and white space that trimming removes. Lone surrogates are left out: no UTF-8 client can
# send one, so they would fail in the test's own client, never reaching the server.
AWKWARD = "\x00\x1b\x7f\x80\x85\x9b\x9f\u2028\u2029\t\n\r \u00a0\u3000\ufeff"
CHARACTERS = st.one_of(st.characters(codec="utf-8"), st.sampled_from(AWKWARD))
# What no stored text holds, and what one-line text holds on top of that.
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
LINE_BREAK = re.compile(r"[\n\r\u2028\u2029]")


def one_awkward(low: int, high: int) -> st.SearchStrategy[str]:
    """Plain text with one awkward character in it: the case a rule must catch alone."""
    plain = st.text(st.characters(codec="ascii", categories=["L", "N"]), max_size=8)
    return st.builds(
        lambda a, c, b: (a + c + b)[: max(high, 1)], plain, st.sampled_from(AWKWARD), plain
    ).filter(lambda s: low <= len(s) <= high)


def valid_value(schema: dict[str, Any]) -> st.SearchStrategy[Json]:
    """Values the advertised schema accepts (the domain may still refuse them)."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "anyOf" in schema:  # e.g. a gate's number or name
        return st.one_of([valid_value(choice) for choice in schema["anyOf"]])
    kind = schema.get("type")
    if kind == "integer":
        low, high = schema.get("minimum", -(2**31)), schema.get("maximum", 2**31)
        return st.one_of(st.integers(low, min(high, low + 14)), st.integers(low, high))
    if kind == "boolean":
        return st.booleans()
    if kind == "string":
        low, high = schema.get("minLength", 0), min(schema.get("maxLength", 200), 200)
        return st.one_of(
            st.text(min_size=low, max_size=high),
            one_awkward(low, high),
            st.text(CHARACTERS, min_size=low, max_size=max(low, min(high, 12))),
            st.sampled_from(
                ["autopilot_main", "run-a", "bug", "x", "I understand this may cause conflicts"]
            ),
        ).filter(lambda s: low <= len(s) <= schema.get("maxLength", 10**9))
    if kind == "array":
        return st.lists(
            valid_value(schema.get("items", {})), max_size=min(schema.get("maxItems", 5), 5)
        )
    raise AssertionError(f"no strategy for {schema}")


# Valid, but kept short: a call with nothing ready waits that long (waiting has its own
# tests), and 400 calls must not wait minutes each.
SHORT = {"wait_seconds": st.integers(0, 1)}


def valid_arguments(tool: Tool) -> st.SearchStrategy[dict[str, Json]]:
    properties: dict[str, Any] = tool.input_schema.get("properties", {})
    required = set(tool.input_schema.get("required", []))
    optional = sorted(set(properties) - required)

    def value(name: str) -> st.SearchStrategy[Json]:
        short = SHORT.get(name)
        return short if short is not None else valid_value(properties[name])

    return st.fixed_dictionaries(
        {name: value(name) for name in sorted(required)},
        optional={name: value(name) for name in optional},
    )


def wrong_value(schema: dict[str, Any]) -> st.SearchStrategy[Json]:
    """Values the schema refuses: another JSON type, or outside the bounds."""
    kind = schema.get("type")
    choices: list[st.SearchStrategy[Json]] = [st.just({"nested": 1})]
    if kind == "integer":
        choices += [st.just("12"), st.just(True), st.just(1.5), st.just([1])]
        if "minimum" in schema:
            choices.append(st.integers(max_value=schema["minimum"] - 1))
        if "maximum" in schema:
            choices.append(st.integers(min_value=schema["maximum"] + 1))
    elif kind == "string":
        choices += [st.integers(), st.just(["not", "a", "string"]), st.just(False)]
        if "enum" in schema:
            choices.append(
                st.text(CHARACTERS, max_size=12).filter(lambda s: s not in schema["enum"])
            )
        if "maxLength" in schema:
            choices.append(st.just("x" * (schema["maxLength"] + 1)))
        if schema.get("minLength", 0) > 0:
            choices.append(st.just(""))
    elif kind == "boolean":
        choices += [st.just("yes please"), st.just(7), st.just([True])]
    elif kind == "array":
        choices += [st.just("not json"), st.just(3), st.just([{"x": 1}])]
    return st.one_of(choices)


@st.composite
def invalid_arguments(draw: st.DrawFn, tool: Tool) -> dict[str, Json]:
    arguments = draw(valid_arguments(tool))
    properties: dict[str, Any] = tool.input_schema.get("properties", {})
    required = sorted(tool.input_schema.get("required", []))
    ways = ["unknown"]
    if properties:
        ways.append("wrong")
    if required:
        ways += ["missing", "null"]
    way = draw(st.sampled_from(ways))
    if way == "unknown":
        arguments[draw(st.sampled_from(["numbr", "issue", "force", "__proto__"]))] = 1
    elif way == "wrong":
        name = draw(st.sampled_from(sorted(properties)))
        arguments[name] = draw(wrong_value(properties[name]))
    elif way == "missing":
        del arguments[draw(st.sampled_from(required))]
    else:
        arguments[draw(st.sampled_from(required))] = None
    return arguments


def snapshot(db: Path, repo: Path) -> dict[str, list[Any]]:
    """Every row of every table, every file the server wrote beside the database, and the
    repository's refs, worktrees and the state of each one's files."""
    with sqlite.connect(f"file:{db}?mode=ro", uri=True) as conn:
        tables = [
            name
            for (name,) in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        # Save the quality gates' runs: a merge refused by its gates keeps the evidence it
        # ran for (docs/mcp.md, ERR_QUALITY_GATE_FAILED: "nothing changed but the stored
        # runs"); and which live server acts under which run id: a call that names a run id
        # binds it to its server before it is judged (docs/coordination.md, "One run id,
        # one live server"). Neither is the queue's state.
        state: dict[str, list[Any]] = {
            t: sorted(conn.execute(f'SELECT * FROM "{t}"'), key=repr)
            for t in tables
            if t not in ("gate_runs", "run_bindings")
        }
        state["events"] = [e for e in state["events"] if "gates_run" not in e]
    state["files"] = sorted(
        (str(f.relative_to(db.parent)), f.read_bytes())
        for f in db.parent.rglob("*")
        if f.is_file() and not f.name.startswith(db.name) and f.suffix != ".stderr"
    )
    state["repository"] = repository_state(repo)
    return state


def stored_text_problems(db: Path) -> list[str]:
    """Stored text that holds what no command may store."""
    one_line = [
        ("issues", "title"),
        ("issues", "agent"),
        ("issues", "claimed_by"),
        ("labels", "name"),
        ("plans", "slug"),
        ("plans", "run_id"),
    ]
    multi_line = [
        ("issues", "description"),
        ("issues", "blocked_reason"),
        ("comments", "body"),
        ("plans", "goal"),
    ]
    problems = []
    with sqlite.connect(f"file:{db}?mode=ro", uri=True) as conn:
        for (table, column), pattern in [
            *((place, LINE_BREAK) for place in one_line),
            *((place, CONTROL) for place in one_line + multi_line),
        ]:
            for (value,) in conn.execute(f'SELECT "{column}" FROM "{table}"'):
                if isinstance(value, str) and pattern.search(value):
                    problems.append(f"{table}.{column}: {value!r:.80}")
    return problems


# The seeded repository's files. Its one quality gate is cheap and fails: a merge the
# fuzzer draws is refused at its gates without running mypy and pytest (the default gates)
# each time.
REPOSITORY = {
    "README.md": "hello\n",
    "src/app.py": "x = 1\n",
    "workq.toml": '[gates.tests]\ncommand = ["git", "rev-parse", "--verify", "refs/x"]\n',
}


def seed(db: Path, repo: Path) -> None:
    """Issues in every state, and a repository "app" holding three of them: one with a
    worktree another run holds (a commit and an uncommitted file in it), one with the
    fuzzing server's own worktree, one not yet started."""
    queue = open_queue(Settings(db_path=db))
    try:
        for n in range(12):
            issues.create(queue, title=f"seed {n}", issue_type=("task", "bug", "docs")[n % 3])
        dependencies.depend(queue, blocker=1, blocked=2)
        claims.claim(queue, 3, Authority.of({"run-a"}))
        claims.claim(queue, 4, Authority.of({"autopilot_main"}))
        blocking.block(
            queue, 5, "waiting for a decision", by=Authority.overriding("admin", who="admin")
        )
        repositories.add(queue, "app", repo)
        for n in (6, 7, 8):
            repositories.assign(queue, n, "app", by=Authority.of(()))
        for n, holder in ((6, "run-a"), (7, "fuzzer")):
            made = claiming.claim(queue, n, Authority.of({holder}), worktree=True).worktree
            assert made is not None
            commit(Path(made.path), {f"src/work_{n}.py": "x = 1\n"}, f"work on #{n}")
            (Path(made.path) / "notes.txt").write_text("not committed\n")
    finally:
        queue.db.dispose()


@pytest.mark.slow
def test_every_tool_survives_generated_arguments(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    db = tmp_path / "fuzz.db"
    repo = make_repo(tmp_path_factory.mktemp("repo") / "app", REPOSITORY)
    seed(db, repo)
    # search_documentation's index of the server's folder: in a folder of the test's, not
    # beside the database (whose folder the snapshots hold) nor in $HOME.
    env = {"WORKQ_CACHE_DIR": str(tmp_path_factory.mktemp("docs-cache"))}
    server = stdio_server(db, "--toolsets", EVERYTHING_LOCAL, "--run-id", "fuzzer", env=env)
    with (
        start_blocking_portal("asyncio") as portal,
        portal.wrap_async_context_manager(server) as client,
    ):
        tools = portal.call(client.list_tools).tools
        assert len(tools) >= 21
        seen: set[tuple[str, bool]] = set()

        # Every tool gets its share: drawn from all of them, one could be left out.
        @settings(
            max_examples=max(10, EXAMPLES // len(tools)),
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(data=st.data())
        def one_call(tool: Tool, data: st.DataObject) -> None:
            valid = data.draw(st.booleans(), label="valid")
            strategy = valid_arguments(tool) if valid else invalid_arguments(tool)
            arguments = data.draw(strategy, label="arguments")
            before = snapshot(db, repo)
            problems = stored_text_problems(db)
            result = portal.call(client.call_tool, tool.name, arguments)
            seen.add((tool.name, valid))
            line = text(result)
            assert "Traceback" not in line and not line.startswith("Error executing tool")
            failure_object = tool.name in OBJECT_FAILURES
            if not valid:
                assert result.is_error, f"{tool.name}({arguments}) was accepted: {line}"
                if failure_object:
                    assert json.loads(line)["code"] == "INVALID_INPUT", line
                else:
                    assert line.startswith("INVALID_INPUT: "), line
            if result.is_error and failure_object:  # the contract's object, text and data
                assert result.structured_content == json.loads(line), line
                assert result.structured_content["success"] is False
            elif result.is_error:
                assert CLEAN_FAILURE.match(line) or seed_003_error(line), line
                assert result.structured_content is None
                assert error_of(result)["code"] in line
                assert snapshot(db, repo) == before, f"{tool.name}({arguments}) failed but changed"
            else:
                stored = set(stored_text_problems(db)) - set(problems)
                assert not stored, f"{tool.name}({arguments}) stored {stored}"

        for tool in tools:
            one_call(tool)
        # The server still answers, and the queue is consistent.
        assert len(portal.call(client.list_tools).tools) == len(tools)
    assert {name for name, _ in seen} == {t.name for t in tools}
    with sqlite.connect(f"file:{db}?mode=ro", uri=True) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        drift = conn.execute(
            "SELECT i.number FROM issues i WHERE i.open_blockers != ("
            " SELECT count(*) FROM dependencies d JOIN issues b ON b.id = d.blocker_id"
            " WHERE d.blocked_id = i.id AND b.status != 'done')"
        ).fetchall()
        assert drift == []
