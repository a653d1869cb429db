"""The layer rules of docs/architecture.md, checked on the source."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "workq"

# Which top-level packages each part of workq may import.
ALLOWED: dict[str, dict[str, tuple[str, ...]]] = {
    "mcp": {"server": ()},
    "typer": {"cli": ()},
    "rich": {"cli": ()},
    "sqlalchemy": {"db": (), "services": ()},
    "alembic": {"db": ()},
    "httpx2": {"github": ()},
}
# Imports of workq's own layers that a part may not make.
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "domain": ("workq.db", "workq.services", "workq.server", "workq.cli", "workq.github"),
    "db": ("workq.services", "workq.server", "workq.cli", "workq.github"),
    "services": ("workq.server", "workq.cli", "workq.github"),
    "github": ("workq.server", "workq.cli"),
    "server": ("workq.cli",),
}
# The one deliberate exception: `workq serve` imports the server lazily.
EXCEPTIONS = {("cli/main.py", "workq.server.main")}


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def _part(path: Path) -> str:
    relative = path.relative_to(SRC)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


SOURCES = sorted(SRC.rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(SRC)))
def test_imports_follow_the_layers(path: Path) -> None:
    part = _part(path)
    relative = str(path.relative_to(SRC))
    for name in _imports(path):
        top = name.split(".")[0]
        if top in ALLOWED:
            assert part in ALLOWED[top], f"{relative} imports {name}"
        if (relative, name) in EXCEPTIONS:
            continue
        for banned in FORBIDDEN.get(part, ()):
            assert not (name == banned or name.startswith(banned + ".")), (
                f"{relative} imports {name}"
            )


def test_every_command_is_in_the_readme() -> None:
    from typer.main import get_command

    from workq.cli.main import load_commands

    app = load_commands()
    readme = (SRC.parents[1] / "README.md").read_text()
    group = get_command(app)
    for name in group.commands:  # type: ignore[attr-defined]
        assert f"workq {name}" in readme, f"`workq {name}` is not documented in README.md"
