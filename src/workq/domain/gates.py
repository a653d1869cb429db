"""Quality gates as data: a repository's gate table read into specs, the default set, which
files a gate takes, its command line, and what its output says (``file:line:col: message``
diagnostics, pytest's summary counts). Pure: the runner is ``services/coding/gates.py``.

A gate table maps a gate's name to its settings::

    [tool.workq.gates.whitespace]        # pyproject.toml ([gates.NAME] in workq.toml)
    command = "ruff check --select W291,W293 {files}"   # or a list; never a shell
    files = ["**/*.py"]                  # globs (domain/globs.py); default: every file
    timeout = 60                         # seconds, default 300
    kind = "tests"                       # the tests gate; so is a gate named tests or pytest
    env = ["DJANGO_SETTINGS_MODULE"]     # variables passed beyond PATH, HOME, the locale...

A gate's environment never carries a token or another secret, a database URL or one of
workq's own ``WORKQ_*`` settings (``refused_env``), whatever its table lists: a table whose
``env`` names one is refused (``GateEnvRefused``), and the runner never passes one.

Gates are numbered 1, 2, ... in the order the table lists them. ``{files}``, as a whole
argument, becomes the selected files; a gate without it runs its command as it is, once
any file matches its globs.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workq.domain import globs
from workq.errors import InvalidInput

DEFAULT_TIMEOUT = 300.0
TIMEOUT_MAX = 3600.0
GATES_MAX = 20
FILES_PLACEHOLDER = "{files}"
TEST_NAMES = ("tests", "pytest")
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_KEYS = {"command", "files", "timeout", "kind", "env"}
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_KINDS = ("check", "tests")
# What a gate's environment never carries, whatever its table lists. A name is refused when
# it is one of workq's own settings (WORKQ_*), when one of its words (split at "_") is or
# ends in a secret's word (GITHUB_TOKEN, GH_TOKEN, PGPASSWORD, AWS_SECRET_ACCESS_KEY,
# NPM_AUTH_TOKEN), when it names a key (API_KEY, PRIVATE_KEY, ACCESS_KEY) or when it holds a
# database URL (DATABASE_URL, WORKQ_DATABASE_URL, REDIS_DB_URL, PG_DSN). TOKENIZERS_PARALLELISM
# or PYTEST_ADDOPTS are not: a secret's word must end the word that holds it.
_WORKQ_PREFIX = "WORKQ_"
_SECRET_WORDS = (
    "TOKEN",
    "TOKENS",
    "SECRET",
    "SECRETS",
    "PASSWORD",
    "PASSWORDS",
    "PASSWD",
    "PASSFILE",
    "PASSPHRASE",
    "CREDENTIAL",
    "CREDENTIALS",
    "APIKEY",
    "PRIVATEKEY",
)
_KEY_WORDS = ("API", "PRIVATE", "ACCESS", "SECRET", "SIGNING", "ENCRYPTION", "MASTER")
_DATABASE_URL_RE = re.compile(
    r"(^|_)(DATABASE|DB|POSTGRES|POSTGRESQL|PG|MYSQL|MARIADB|REDIS|MONGO|MONGODB)_(URL|URI)$"
    r"|(^|_)DSN$"
)


class GateEnvRefused(InvalidInput):
    """A gate table asks for a variable a gate's environment never carries."""

    code = "GATE_ENV_REFUSED"


@dataclass(frozen=True)
class GateSpec:
    number: int
    name: str
    command: tuple[str, ...]
    files: tuple[str, ...]
    """Globs choosing the files the gate applies to; empty: every file."""
    timeout: float
    tests: bool
    env: tuple[str, ...] = ()
    """Variables of the server's environment passed to the command beyond the usual ones."""

    @property
    def takes_files(self) -> bool:
        return FILES_PLACEHOLDER in self.command


def _default(number: int, name: str, command: str, *, tests: bool = False) -> GateSpec:
    return GateSpec(number, name, tuple(shlex.split(command)), ("**/*.py",), DEFAULT_TIMEOUT, tests)


_RUFF = "ruff check --no-cache --quiet --output-format concise"
# Starter gate tables (``workq gates init --preset NAME``, ``--default-gates NAME``). A
# repository without a gate table has no gates unless the server names a preset.
PRESETS: dict[str, tuple[GateSpec, ...]] = {
    # Five checks of a typed Python project: the workflow server's mandatory gates, with
    # ruff standing in for pylint.
    "strict": (
        _default(1, "whitespace", f"{_RUFF} --select W291,W293 {{files}}"),
        _default(2, "imports", f"{_RUFF} --select PLC0415 {{files}}"),
        _default(3, "line-length", f"{_RUFF} --select E501 --line-length 100 {{files}}"),
        _default(4, "mypy", "mypy --strict --no-error-summary {files}"),
        _default(5, "tests", "pytest -q --tb=line", tests=True),
    ),
    # A Python project's two: ruff's default rules on the changed files, then the tests.
    "pytest": (
        _default(1, "lint", f"{_RUFF} {{files}}"),
        _default(2, "tests", "pytest -q --tb=line", tests=True),
    ),
}
NO_PRESET = "none"


def preset(name: str) -> tuple[GateSpec, ...]:
    """The gates of preset ``name`` (``none``: no gates).

    Raises:
        InvalidInput: no such preset.
    """
    if name == NO_PRESET:
        return ()
    if name not in PRESETS:
        known = ", ".join(PRESETS)
        raise InvalidInput(f"no gate preset {name!r} (presets: {known})", field="preset")
    return PRESETS[name]


def _joined(command: Sequence[str]) -> str:
    return " ".join(p if p == FILES_PLACEHOLDER else shlex.quote(p) for p in command)


def table_text(specs: Sequence[GateSpec], prefix: str) -> str:
    """``specs`` as a TOML gate table under ``[{prefix}.NAME]``, readable by ``parse_table``."""

    def quoted(value: str) -> str:
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'

    blocks = []
    for s in specs:
        lines = [f"[{prefix}.{s.name}]", f"command = {quoted(_joined(s.command))}"]
        if s.files:
            lines.append(f"files = [{', '.join(quoted(f) for f in s.files)}]")
        if s.timeout != DEFAULT_TIMEOUT:
            lines.append(f"timeout = {s.timeout:g}")
        if s.tests and s.name not in TEST_NAMES:
            lines.append('kind = "tests"')
        if s.env:
            lines.append(f"env = [{', '.join(quoted(v) for v in s.env)}]")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def parse_table(table: object, source: str) -> tuple[GateSpec, ...]:
    """The gates of a gate table (``source`` names it in errors), in the table's order.

    Raises:
        InvalidInput: the table or one of its gates is malformed.
        GateEnvRefused: a gate's ``env`` names a variable a gate never gets (a token or
            another secret, a database URL, a ``WORKQ_*`` setting).
    """
    if not isinstance(table, Mapping):
        raise InvalidInput(f"{source} must be a table of gates ([...gates.NAME])", source=source)
    if len(table) > GATES_MAX:
        raise InvalidInput(f"{source} lists more than {GATES_MAX} gates", source=source)
    return tuple(_gate(n, name, body, source) for n, (name, body) in enumerate(table.items(), 1))


def _gate(number: int, name: object, body: object, source: str) -> GateSpec:
    where = f"{source}.{name}"

    def bad(message: str) -> InvalidInput:
        return InvalidInput(f"{where}: {message}", source=source, gate=str(name))

    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise bad("a gate's name is letters, digits, '_', '.' or '-' (at most 64)")
    if not isinstance(body, Mapping):
        raise bad("a gate is a table with a command")
    unknown = sorted(set(body) - _KEYS)
    if unknown:
        raise bad(f"unknown setting {', '.join(unknown)} (known: {', '.join(sorted(_KEYS))})")
    command = _command(body.get("command"), bad)
    files = body.get("files", [])
    if isinstance(files, str):
        files = [files]
    if not isinstance(files, list):
        raise bad("files is a list of globs")
    checked = tuple(globs.glob(f, field=f"{where}.files") for f in files)
    timeout = body.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise bad("timeout is a number of seconds")
    if not 0 < timeout <= TIMEOUT_MAX:
        raise bad(f"timeout is above 0 and at most {TIMEOUT_MAX:g} seconds")
    kind = body.get("kind")
    if kind is not None and kind not in _KINDS:
        raise bad(f"kind is {' or '.join(_KINDS)}")
    tests = kind == "tests" or (kind is None and name in TEST_NAMES)
    env = _env(body.get("env", []), name, source, bad)
    return GateSpec(number, name, command, checked, float(timeout), tests, env)


def refused_env(name: str) -> str | None:
    """Why a gate's environment never carries the variable ``name`` (a phrase), or None
    when it may: workq's own settings, tokens and other secrets, database URLs."""
    upper = name.upper()
    if upper.startswith(_WORKQ_PREFIX):
        return "one of workq's own settings"
    if _DATABASE_URL_RE.search(upper):
        return "a database URL"
    words = [w for w in upper.split("_") if w]
    if any(w.endswith(_SECRET_WORDS) for w in words):
        return "a secret"
    if any(w == "KEY" and i and words[i - 1] in _KEY_WORDS for i, w in enumerate(words)):
        return "a secret key"
    return None


def _command(value: object, bad: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        try:
            parts = shlex.split(value)
        except ValueError as exc:
            raise bad(f"command cannot be split: {exc}") from None
    elif isinstance(value, list) and all(isinstance(part, str) for part in value):
        parts = list(value)
    else:
        raise bad("command is a string or a list of strings")
    if not parts or not parts[0]:
        raise bad("command is empty")
    return tuple(parts)


def _env(value: object, name: str, source: str, bad: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(
        isinstance(v, str) and _ENV_NAME_RE.fullmatch(v) for v in value
    ):
        raise bad("env is a list of environment variable names")
    for variable in value:
        why = refused_env(variable)
        if why is not None:
            raise GateEnvRefused(
                f"{source}.{name}: env lists {variable}, {why}: a gate's environment never "
                "carries a token or another secret, a database URL or workq's own WORKQ_* "
                "settings",
                hint=(
                    f"take {variable} out of the env list of gate {name!r} ({source}); a "
                    "check that needs a credential reads it from a file of its own, not from "
                    "the environment of the workq that runs it"
                ),
                source=source,
                gate=name,
                key=variable,
            )
    return tuple(value)


def choose(specs: Sequence[GateSpec], wanted: Iterable[int | str] | None) -> list[GateSpec]:
    """The gates ``wanted`` names (numbers or names), in configuration order; all when None.

    Raises:
        InvalidInput: a number or name that no gate has.
    """
    if wanted is None:
        return list(specs)
    chosen: set[int] = set()
    for item in wanted:
        if isinstance(item, str) and item.isdigit() and not any(s.name == item for s in specs):
            item = int(item)
        found = [
            s for s in specs if (s.number == item if isinstance(item, int) else s.name == item)
        ]
        if not found:
            known = ", ".join(f"{s.number}={s.name}" for s in specs) or "none"
            raise InvalidInput(f"no gate {item!r} (gates: {known})", field="gates")
        chosen.add(found[0].number)
    return [s for s in specs if s.number in chosen]


def relative_file(value: object) -> str:
    """A file argument as a clean path relative to the checkout.

    Raises:
        InvalidInput: not text, empty, absolute, or leaving the checkout with ``..``.
    """
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput("a file is a non-empty path relative to the checkout", field="files")
    text = value.strip().replace("\\", "/")
    if text.startswith("/") or (len(text) > 1 and text[1] == ":"):
        raise InvalidInput(
            f"file {text!r} is absolute: give it relative to the checkout", field="files"
        )
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise InvalidInput(f"file {text!r} leaves the checkout (..)", field="files")
    if not parts or any(not c.isprintable() for c in text):
        raise InvalidInput(f"file {text!r} is not a usable path", field="files")
    clean = "/".join(parts)
    if len(clean) > 1 and clean[1] == ":":
        raise InvalidInput(
            f"file {text!r} looks absolute: give it relative to the checkout", field="files"
        )
    return clean


def select(spec: GateSpec, files: Iterable[str]) -> list[str]:
    """The files (relative paths) the gate applies to."""
    if not spec.files:
        return list(files)
    return [f for f in files if any(globs.matches(f, g) for g in spec.files)]


def argv(spec: GateSpec, files: Sequence[str]) -> list[str]:
    """The gate's command with ``{files}`` replaced by ``files``. A file whose name starts
    with ``-`` is given as ``./-name``: a path to every program, never one of its options
    (a committed ``--output-file=x`` would otherwise redirect a linter's report)."""
    out: list[str] = []
    for part in spec.command:
        if part == FILES_PLACEHOLDER:
            out.extend(f"./{f}" if f.startswith("-") else f for f in files)
        else:
            out.append(part)
    return out


@dataclass(frozen=True)
class Diagnostic:
    file: str
    line: int
    message: str


_DIAGNOSTIC_RE = re.compile(
    r"^(?P<file>[^\s:][^:]*?):(?P<line>\d+):(?:(?P<col>\d+):)?\s*(?P<msg>\S.*)$"
)


def diagnostics(text: str, root: str = "", limit: int = 20) -> tuple[list[Diagnostic], int]:
    """The first ``limit`` ``file:line[:col]: message`` lines of ``text`` and how many there
    were; a file under ``root`` is given relative to it."""
    found: list[Diagnostic] = []
    total = 0
    prefix = root.rstrip("/") + "/" if root else ""
    for raw in text.splitlines():
        match = _DIAGNOSTIC_RE.match(raw.strip())
        if match is None:
            continue
        total += 1
        if len(found) < limit:
            name = match["file"]
            if prefix and name.startswith(prefix):
                name = name[len(prefix) :]
            message = match["msg"].strip()
            if match["col"]:
                message = f"col {match['col']}: {message}"
            found.append(Diagnostic(name, int(match["line"]), message[:300]))
    return found, total


@dataclass(frozen=True)
class TestCounts:
    __test__ = False  # not a pytest test class

    passed: int
    failed: int
    errors: int
    failures: tuple[str, ...]
    """pytest's short summary lines (``FAILED ...``, ``ERROR ...``), the first few."""


_COUNT_RE = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)\b")
_SUMMARY_RE = re.compile(r"\bin [\d.]+s\b")


def pytest_counts(text: str, limit: int = 20) -> TestCounts | None:
    """The counts of pytest's last summary line (``3 failed, 10 passed in 0.5s``), or None
    when the output has none."""
    summary: dict[str, int] | None = None
    failures: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith(("FAILED ", "ERROR ")) and len(failures) < limit:
            failures.append(line[:300])
        if _SUMMARY_RE.search(line) and (_COUNT_RE.search(line) or "no tests ran" in line):
            summary = {}
            for count, word in _COUNT_RE.findall(line):
                key = "errors" if word.startswith("error") else word
                summary[key] = summary.get(key, 0) + int(count)
    if summary is None:
        return None
    return TestCounts(
        summary.get("passed", 0),
        summary.get("failed", 0),
        summary.get("errors", 0),
        tuple(failures),
    )


def score(passed: bool, issues: int) -> str:
    """A pylint-like mark: 10/10 when the gate passed, a point off per issue found."""
    if passed:
        return "10/10"
    return f"{max(0, 10 - issues)}/10"
