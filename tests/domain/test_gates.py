"""The pure rules of quality gates (domain/gates.py): gate tables, file arguments, the
command line, and reading diagnostics and pytest's summary."""

from __future__ import annotations

import tomllib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workq.domain import gates
from workq.errors import InvalidInput


def test_a_gate_table_in_order_with_its_defaults() -> None:
    specs = gates.parse_table(
        {
            "lint": {"command": "ruff check {files}", "files": "src/**"},
            "pytest": {"command": ["pytest", "-q"], "timeout": 30},
            "smoke": {"command": "make smoke", "kind": "tests"},
        },
        "workq.toml [gates]",
    )
    assert [(s.number, s.name, s.tests) for s in specs] == [
        (1, "lint", False),
        (2, "pytest", True),
        (3, "smoke", True),
    ]
    lint = specs[0]
    assert lint.command == ("ruff", "check", "{files}") and lint.takes_files
    assert lint.files == ("src/**",) and lint.timeout == gates.DEFAULT_TIMEOUT
    assert specs[1].timeout == 30.0 and not specs[1].takes_files


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ({"x": {}}, "command is a string or a list"),
        ({"x": {"command": ""}}, "command is empty"),
        ({"x": {"command": "a 'b"}}, "cannot be split"),
        ({"x": {"command": "a", "timeout": 0}}, "timeout is above 0"),
        ({"x": {"command": "a", "timeout": True}}, "timeout is a number"),
        ({"x": {"command": "a", "kind": "lint"}}, "kind is check or tests"),
        ({"x": {"command": "a", "shell": True}}, "unknown setting shell"),
        ({"x": {"command": "a", "files": ["../up"]}}, "leaves the repository"),
        ({"bad name": {"command": "a"}}, "a gate's name"),
        ({"x": "ruff"}, "a gate is a table"),
        ([], "must be a table of gates"),
    ],
)
def test_a_bad_gate_table_is_refused_naming_the_gate(table: object, says: str) -> None:
    with pytest.raises(InvalidInput, match=says):
        gates.parse_table(table, "pyproject.toml [tool.workq.gates]")


def test_the_strict_preset_is_the_workflow_servers_five() -> None:
    assert [(s.number, s.name) for s in gates.PRESETS["strict"]] == [
        (1, "whitespace"),
        (2, "imports"),
        (3, "line-length"),
        (4, "mypy"),
        (5, "tests"),
    ]
    assert [s.tests for s in gates.PRESETS["strict"]] == [False] * 4 + [True]


@pytest.mark.parametrize("name", sorted(gates.PRESETS))
def test_a_presets_table_text_reads_back_as_the_preset(name: str) -> None:
    text = gates.table_text(gates.PRESETS[name], "gates")
    assert gates.parse_table(tomllib.loads(text)["gates"], "t") == gates.PRESETS[name]
    assert "'{files}'" not in text


def test_no_preset_means_no_gates_and_an_unknown_one_is_named() -> None:
    assert gates.preset("none") == ()
    with pytest.raises(InvalidInput, match="no gate preset 'lax' \\(presets: strict, pytest\\)"):
        gates.preset("lax")


def test_files_and_the_command_line() -> None:
    (spec,) = gates.parse_table(
        {"x": {"command": ["lint", "--fast", "{files}", "--end"], "files": ["**/*.py"]}}, "t"
    )
    chosen = gates.select(spec, ["README.md", "a.py", "src/b.py"])
    assert chosen == ["a.py", "src/b.py"]
    assert gates.argv(spec, chosen) == ["lint", "--fast", "a.py", "src/b.py", "--end"]
    assert gates.choose(gates.PRESETS["strict"], [5, "mypy"]) == list(gates.PRESETS["strict"][3:])
    assert gates.choose(gates.PRESETS["strict"], ["1"]) == [gates.PRESETS["strict"][0]]
    with pytest.raises(InvalidInput, match="no gate 'nope'"):
        gates.choose(gates.PRESETS["strict"], ["nope"])


def test_a_file_named_like_an_option_is_given_as_a_path() -> None:
    (spec,) = gates.parse_table({"lint": {"command": "ruff check {files}"}}, "t")
    assert gates.argv(spec, ["--output-file=x", "-rf", "a.py", "src/-x.py"]) == [
        "ruff",
        "check",
        "./--output-file=x",
        "./-rf",
        "a.py",
        "src/-x.py",
    ]


@pytest.mark.parametrize("bad", ["/etc/passwd", "C:/x", "../x", "a/../../x", "a/..", "", " "])
def test_a_file_argument_stays_inside_the_checkout(bad: str) -> None:
    with pytest.raises(InvalidInput):
        gates.relative_file(bad)


@given(st.text(alphabet="ab./\\:", max_size=12))
def test_an_accepted_file_argument_is_always_relative_and_inside(value: str) -> None:
    try:
        clean = gates.relative_file(value)
    except InvalidInput:
        return
    parts = clean.split("/")
    assert not clean.startswith("/") and ".." not in parts and "" not in parts
    assert ":" not in clean[1:2]


def test_diagnostics_are_read_and_bounded() -> None:
    text = "\n".join(
        [
            "/repo/src/a.py:3:7: W291 Trailing whitespace",
            "src/b.py:10: error: Missing return type  [no-untyped-def]",
            "Found 2 errors.",
            "FAILED tests/test_x.py::test_y - assert 1 == 2",
            *[f"src/c.py:{n}:1: E501 Line too long" for n in range(1, 40)],
        ]
    )
    found, total = gates.diagnostics(text, root="/repo", limit=5)
    assert total == 41 and len(found) == 5
    assert found[0] == gates.Diagnostic("src/a.py", 3, "col 7: W291 Trailing whitespace")
    assert found[1] == gates.Diagnostic(
        "src/b.py", 10, "error: Missing return type  [no-untyped-def]"
    )


def test_pytest_summary_counts() -> None:
    out = "\n".join(
        [
            "..F.E",
            "FAILED tests/test_a.py::test_one - assert 1 == 2",
            "ERROR tests/test_b.py::test_two - fixture 'x' not found",
            "=========== 1 failed, 3 passed, 1 error, 2 skipped in 0.52s ===========",
        ]
    )
    counts = gates.pytest_counts(out)
    assert counts is not None
    assert (counts.passed, counts.failed, counts.errors) == (3, 1, 1)
    assert counts.failures == (
        "FAILED tests/test_a.py::test_one - assert 1 == 2",
        "ERROR tests/test_b.py::test_two - fixture 'x' not found",
    )
    assert gates.pytest_counts("12 passed in 3.01s") == gates.TestCounts(12, 0, 0, ())
    assert gates.pytest_counts("no tests ran in 0.01s") == gates.TestCounts(0, 0, 0, ())
    assert gates.pytest_counts("Traceback (most recent call last):") is None


def test_the_score() -> None:
    assert gates.score(True, 0) == "10/10"
    assert gates.score(False, 3) == "7/10"
    assert gates.score(False, 30) == "0/10"
