"""The test tree follows the code (docs/testing.md, "Where a test goes"): every top-level
folder of tests/ has a row in that section's table, and tests/services/ holds one folder
per room of src/workq/services/, found in the source rather than listed here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
SECTION = "## Where a test goes"


def python_folders(parent: Path) -> set[str]:
    """The folders directly under ``parent`` that hold Python (caches and strays left by a
    crashed run hold none)."""
    return {p.name for p in parent.iterdir() if p.is_dir() and any(p.rglob("*.py"))}


def documented_folders() -> set[str]:
    """The folders named in the first column of the section's table: ``| `tests/NAME/` |``."""
    text = (ROOT / "docs" / "testing.md").read_text()
    assert SECTION in text, f"docs/testing.md lost its section {SECTION!r}"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `tests/([a-z_]+)/` \|", section, flags=re.MULTILINE))


def test_every_top_level_test_folder_is_documented() -> None:
    documented = documented_folders()
    assert "services" in documented  # the table was found and read
    found = python_folders(TESTS)
    assert found - documented == set(), "a folder of tests/ with no row in docs/testing.md"
    assert documented - found == set(), "docs/testing.md names a folder that is gone"


def test_tests_services_has_one_folder_per_room() -> None:
    rooms = {
        p.name
        for p in (ROOT / "src" / "workq" / "services").iterdir()
        if (p / "__init__.py").is_file()
    }
    assert rooms  # the rooms were found
    assert python_folders(TESTS / "services") == rooms


def test_every_test_folder_is_a_package() -> None:
    folders = {p.parent for p in TESTS.rglob("*.py")}
    assert [f for f in sorted(folders) if not (f / "__init__.py").is_file()] == []


def test_migration_upgrade_tests_start_from_an_empty_database() -> None:
    """Only tests/db's ``settings`` start below head; a test elsewhere that steps to the
    revision before its migration would silently start from head instead."""
    stray = [
        str(path.relative_to(TESTS))
        for path in TESTS.rglob("test_*.py")
        if re.search(r"^from tests\.db import upgrades", path.read_text(), flags=re.MULTILINE)
        and path.parent != TESTS / "db"
    ]
    assert not stray, f"migration upgrade tests outside tests/db: {stray}"
