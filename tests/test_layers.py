"""The layer rules of docs/architecture.md ("Layers"), checked on the source.

Every part of workq (a subpackage, or a top-level module) lists the parts of workq it may
import and the packages outside the standard library it may import. Anything not listed is a
broken arrow. The checker is tested on a synthetic tree too, so a rule that stops biting
fails here rather than going quiet.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "workq"

# The arrows: which parts of workq each part may import (itself always).
# "workq" is the package's own __init__ (the version).
MAY_IMPORT: dict[str, frozenset[str]] = {
    "workq": frozenset(),
    "errors": frozenset(),
    "nowait": frozenset(),
    "schemas": frozenset({"errors"}),
    "config": frozenset({"errors"}),
    "domain": frozenset({"errors", "schemas"}),
    "plan_schemas": frozenset({"errors", "schemas", "domain"}),
    "github_schemas": frozenset(),
    "db": frozenset({"errors", "nowait"}),
    "vcs": frozenset({"errors", "nowait"}),
    "services": frozenset(
        {"errors", "nowait", "schemas", "plan_schemas", "config", "domain", "db", "vcs"}
    ),
    "github": frozenset(
        {
            "workq",
            "errors",
            "schemas",
            "plan_schemas",
            "github_schemas",
            "config",
            "domain",
            "services",
            "vcs",
        }
    ),
    "bind": frozenset({"errors"}),
    "server": frozenset(
        {"workq", "errors", "schemas", "plan_schemas", "config", "domain", "services", "bind"}
        | {"board", "github", "github_schemas", "nowait"}
    ),
    "board": frozenset({"errors", "schemas", "config", "domain", "services", "bind"}),
    "cli": frozenset(
        {"workq", "errors", "schemas", "plan_schemas", "config", "domain", "services", "github"}
    ),
}
# Packages outside the standard library, and the parts that may import them.
EVERYWHERE_BUT_PURE = frozenset(MAY_IMPORT) - {"workq", "errors", "nowait", "domain", "bind"}
THIRD_PARTY: dict[str, frozenset[str]] = {
    "pydantic": EVERYWHERE_BUT_PURE,
    "pydantic_settings": frozenset({"config"}),
    "sqlalchemy": frozenset({"db", "services"}),
    "alembic": frozenset({"db"}),
    "psycopg": frozenset({"db"}),
    "pysqlite3": frozenset({"db"}),
    "mcp": frozenset({"server"}),
    "mcp_types": frozenset({"server"}),  # the SDK's wire types (mcp's own package)
    "starlette": frozenset({"server", "board"}),
    "sse_starlette": frozenset({"server"}),
    "uvicorn": frozenset({"server", "board"}),
    "jinja2": frozenset({"board"}),
    "markupsafe": frozenset({"board"}),
    "markdown_it": frozenset({"board"}),
    "nh3": frozenset({"board"}),
    "anyio": frozenset({"server"}),
    "typer": frozenset({"cli"}),
    "click": frozenset({"cli"}),
    "rich": frozenset({"cli"}),
    "httpx2": frozenset({"github"}),
}
# Standard-library modules that do I/O on a database, kept where the database is.
STDLIB_RESTRICTED: dict[str, frozenset[str]] = {"sqlite3": frozenset({"db", "services"})}
# One SQLite library per process (db/sqlite.py says why): the standard library's module is
# imported by that module alone, and by the docs index for its own cache file.
SQLITE_MODULE_USERS = frozenset({"db/sqlite.py", "services/coding/docs_index.py"})
# The deliberate exceptions: `workq serve` and `workq board` import their face lazily.
EXCEPTIONS = frozenset({("cli/main.py", "workq.server.main"), ("cli/main.py", "workq.board.main")})


@dataclass(frozen=True)
class Broken:
    path: str
    line: int
    name: str
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line} imports {self.name}: {self.why}"


def part_of(relative: Path) -> str:
    """The part a module belongs to: its subpackage, or its own name at the top level."""
    if len(relative.parts) > 1:
        return relative.parts[0]
    return "workq" if relative.stem == "__init__" else relative.stem


def imported(root: Path, path: Path) -> list[tuple[int, str]]:
    """Every module ``path`` imports, absolute, with its line: relative imports resolved,
    and ``from workq import db`` read as an import of ``workq.db``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    relative = path.relative_to(root)
    package = ["workq", *relative.parts[:-1]]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            found.append((node.lineno, module))
            # `from workq import db` / `from workq.db import engine` import submodules.
            if module == "workq" or module.startswith("workq."):
                here = root.joinpath(*module.split(".")[1:])
                found.extend(
                    (node.lineno, f"{module}.{alias.name}")
                    for alias in node.names
                    if (here / alias.name).is_dir() or (here / f"{alias.name}.py").is_file()
                )
        elif isinstance(node, ast.Call) and _dynamic(node.func) and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                found.append((node.lineno, first.value))
    return found


def _dynamic(func: ast.expr) -> bool:
    """``importlib.import_module(...)``, ``import_module(...)`` or ``__import__(...)``."""
    if isinstance(func, ast.Attribute):
        return func.attr == "import_module"
    return isinstance(func, ast.Name) and func.id in ("import_module", "__import__")


def check(root: Path) -> list[Broken]:
    """Every import under ``root`` (a tree laid out as src/workq) that breaks a rule."""
    broken: list[Broken] = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        part = part_of(relative)
        where = relative.as_posix()
        if part not in MAY_IMPORT:
            broken.append(Broken(where, 1, "-", f"'{part}' has no entry in the layer rules"))
            continue
        for line, name in imported(root, path):
            why = broken_rule(part, where, name)
            if why is not None:
                broken.append(Broken(where, line, name, why))
    return broken


def broken_rule(part: str, where: str, name: str) -> str | None:
    """The rule that module ``where`` (of ``part``) breaks by importing ``name``, if any."""
    top = name.split(".")[0]
    if top == "workq":
        target_part = name.split(".")[1] if "." in name else "workq"
        if target_part == part or target_part in MAY_IMPORT[part]:
            return None
        if (where, name) in EXCEPTIONS:
            return None
        return f"{part} may not import {target_part}"
    if top in THIRD_PARTY:
        return None if part in THIRD_PARTY[top] else f"{top} is not for {part}"
    if top in STDLIB_RESTRICTED:
        if part not in STDLIB_RESTRICTED[top]:
            return f"{top} is not for {part}"
        if top == "sqlite3" and where not in SQLITE_MODULE_USERS:
            return "open SQLite through workq.db.sqlite (one library per process)"
        return None
    if top not in sys.stdlib_module_names and top != "__future__":
        return f"{top} is not in the layer rules"
    return None


def test_the_source_follows_the_layers() -> None:
    broken = check(SRC)
    assert not broken, "\n".join(map(str, broken))


def test_every_part_of_the_source_has_rules() -> None:
    parts = {part_of(p.relative_to(SRC)) for p in SRC.rglob("*.py")}
    assert parts == set(MAY_IMPORT)


# The arrows between the services' capabilities (services/<capability>/): which others each
# may import. ``handle`` (the Queue) and ``runtime`` (opening one) are for all.
SERVICE_ARROWS: dict[str, frozenset[str]] = {
    "queue": frozenset(),  # the floor: rooms above act through the Queue handle's hooks
    "plans": frozenset({"queue", "coding", "sync"}),
    "workspaces": frozenset({"queue", "plans", "coding", "sync"}),  # sync: landings
    "coding": frozenset({"queue", "plans", "workspaces"}),
    "sync": frozenset({"queue"}),
    "maintenance": frozenset({"queue"}),
    # Telling people: reads the queue, saves a stalled claim's work (workspaces).
    "notices": frozenset({"queue", "workspaces"}),
    # Tool calls answered later: a task's claim is claim_next's (workspaces), with a hook;
    # gates and merges run as tasks (coding, workspaces).
    "tasks": frozenset({"queue", "workspaces", "coding"}),
    # Opening a queue hangs the rooms' hooks on it: the GitHub outbox, the worktrees' refusal,
    # the notice outbox.
    "runtime": frozenset({"sync", "workspaces", "notices"}),
}
SERVICES_FOR_ALL = frozenset({"handle", "runtime", "preflight"})


def capability_of(path: Path) -> str:
    relative = path.relative_to(SRC / "services")
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def test_the_services_follow_their_capabilities() -> None:
    broken = []
    for path in sorted((SRC / "services").rglob("*.py")):
        mine = capability_of(path)
        if mine == "__init__":
            continue
        allowed = SERVICE_ARROWS.get(mine, frozenset()) | SERVICES_FOR_ALL | {mine}
        for line, name in imported(SRC, path):
            if name.startswith("workq.services."):
                theirs = name.split(".")[2]
                if theirs not in allowed:
                    broken.append(f"{path.relative_to(SRC)}:{line} imports {name}")
    assert set(SERVICE_ARROWS) | SERVICES_FOR_ALL == {
        capability_of(p) for p in (SRC / "services").rglob("*.py")
    } - {"__init__"}
    assert not broken, "\n".join(broken)


def module_graph(root: Path) -> dict[str, set[str]]:
    """Each workq module and the workq modules it imports anywhere: at the top, inside
    functions, under TYPE_CHECKING."""

    def name_of(path: Path) -> str:
        parts = ["workq", *path.relative_to(root).with_suffix("").parts]
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    modules = {name_of(p): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for _, imported_name in imported(root, path):
            target = imported_name
            while target not in modules and "." in target:
                target = target.rsplit(".", 1)[0]
            if target in modules and target not in (name, "workq"):
                targets.add(target)
        graph[name] = targets
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: strongly connected groups of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_architecture_doc_draws_the_arrows_of_this_table() -> None:
    doc = (SRC.parents[1] / "docs" / "architecture.md").read_text()
    table = doc.split("<!-- room-arrows -->")[1].split("<!-- /room-arrows -->")[0]
    drawn: dict[str, frozenset[str]] = {}
    for line in table.strip().splitlines()[2:]:
        room, arrows = (cell.strip() for cell in line.strip("|").split("|"))
        drawn[room] = frozenset(a.strip() for a in arrows.split(",") if not a.startswith("("))
    assert drawn == SERVICE_ARROWS


def test_the_queue_is_the_floor() -> None:
    assert SERVICE_ARROWS["queue"] == frozenset()


def test_no_module_imports_itself_round_a_circle() -> None:
    assert circles(module_graph(SRC)) == []


def test_a_circle_is_found(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "db/changes.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from workq.db.engine import Database\n",
            "db/engine.py": "from workq.db.changes import Feed\n",
        },
    )
    assert circles(module_graph(root)) == [["workq.db.changes", "workq.db.engine"]]


# The checker itself, on a synthetic tree laid out like src/workq.


def _tree(root: Path, files: dict[str, str]) -> Path:
    base = {
        "__init__.py": "__version__ = '0'\n",
        "errors.py": "class WorkqError(Exception): ...\n",
        "config.py": "from pydantic_settings import BaseSettings\n",
        "db/__init__.py": "",
        "db/engine.py": "import sqlalchemy\nfrom workq.errors import WorkqError\n",
        "services/__init__.py": "",
        "services/queue/issues.py": "from workq.db.engine import Database\n",
        "server/__init__.py": "",
        "server/app.py": "import mcp\nimport workq\nfrom workq.services import issues\n",
        "cli/__init__.py": "",
        "cli/main.py": "import typer\nfrom workq.server.main import serve\n",
        "cli/maintenance.py": "from workq.services.queue.issues import create\n",
        "domain/__init__.py": "",
        "domain/rules.py": "import re\nfrom workq.errors import WorkqError\n",
    }
    for name, text in {**base, **files}.items():
        path = root / "workq" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "workq"


def test_the_checker_passes_a_tree_that_follows_the_layers(tmp_path: Path) -> None:
    assert check(_tree(tmp_path, {})) == []


@pytest.mark.parametrize(
    ("path", "source", "why"),
    [
        ("cli/maintenance.py", "from workq.db import migrate\n", "cli may not import db"),
        ("cli/maintenance.py", "from workq import db\n", "cli may not import db"),
        ("cli/maintenance.py", "import workq.db.engine\n", "cli may not import db"),
        ("server/tools.py", "from workq.db.engine import Database\n", "server may not import db"),
        ("server/tools.py", "from workq.cli import main\n", "server may not import cli"),
        ("cli/other.py", "from workq.server import app\n", "cli may not import server"),
        ("services/x.py", "from workq.server.app import build\n", "services may not import"),
        ("services/x.py", "from ..cli import admin\n", "services may not import cli"),
        ("server/x.py", "x = __import__('workq.db.engine')\n", "server may not import db"),
        (
            "server/x.py",
            "import importlib\nx = importlib.import_module('sqlalchemy')\n",
            "sqlalchemy is not for server",
        ),
        ("db/x.py", "from workq.services import issues\n", "db may not import services"),
        ("domain/x.py", "from workq.config import Settings\n", "domain may not import config"),
        ("domain/x.py", "import pydantic\n", "pydantic is not for domain"),
        ("errors.py", "from workq.schemas import Status\n", "errors may not import schemas"),
        ("schemas.py", "from workq.db import tables\n", "schemas may not import db"),
        ("config.py", "import sqlalchemy\n", "sqlalchemy is not for config"),
        ("services/x.py", "import mcp.server\n", "mcp is not for services"),
        ("services/x.py", "import uvicorn\n", "uvicorn is not for services"),
        ("cli/x.py", "from starlette.routing import Route\n", "starlette is not for cli"),
        ("cli/x.py", "import sqlalchemy\n", "sqlalchemy is not for cli"),
        ("cli/x.py", "import sqlite3\n", "sqlite3 is not for cli"),
        ("services/x.py", "import sqlite3\n", "through workq.db.sqlite"),
        ("db/engine.py", "import sqlite3\n", "through workq.db.sqlite"),
        ("server/x.py", "import httpx2\n", "httpx2 is not for server"),
        ("github/x.py", "import typer\n", "typer is not for github"),
        ("github/x.py", "import requests\n", "requests is not in the layer rules"),
        ("newpart/x.py", "import os\n", "'newpart' has no entry"),
    ],
)
def test_the_checker_finds_a_broken_arrow(tmp_path: Path, path: str, source: str, why: str) -> None:
    root = _tree(tmp_path, {path: "import os\n\n" + source})
    broken = check(root)
    assert broken, "the checker let it through"
    assert {b.path for b in broken} == {path}, broken
    assert all(why in b.why for b in broken), broken
    if "no entry" not in why:
        assert {b.line for b in broken} == {source.count("\n") + 2}


def test_every_command_is_in_the_readme() -> None:
    from typer.main import get_command

    from workq.cli.main import load_commands

    app = load_commands()
    readme = (SRC.parents[1] / "README.md").read_text()
    group = get_command(app)
    for name in group.commands:  # type: ignore[attr-defined]
        assert f"workq {name}" in readme, f"`workq {name}` is not documented in README.md"
