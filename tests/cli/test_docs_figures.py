"""Figures and promises of the docs that a test can recompute, so they cannot go stale."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_every_source_contract_cited_in_the_code_is_summed_up() -> None:
    """The code and the docs cite the documents workq was specified from by the names
    docs/contracts.md gives them (contract A-E), never by their file names ("seed 002"),
    which a reader of this repository cannot open."""
    contracts = (ROOT / "docs" / "contracts.md").read_text()
    cited: set[str] = set()
    sources = [*(ROOT / "src").rglob("*.py"), *(ROOT / "migrations").rglob("*.py")]
    for path in [
        *sources,
        *(ROOT / "docs").glob("*.md"),
        ROOT / "README.md",
        ROOT / "CHANGELOG.md",
    ]:
        text = path.read_text()
        cited |= {m.upper() for m in re.findall(r"\b[Cc]ontract ([A-E])\b", text)}
        if path.name != "contracts.md":  # which says what older commits called them
            assert not re.search(r"\b[Ss]eeds?\b", text), f"{path} speaks of a seed"
    assert cited, "no citation found: the pattern is wrong"
    for name in cited:
        assert f"## Contract {name}" in contracts, f"contract {name} is cited but not summed up"
    assert "../shared" not in (ROOT / "docs" / "architecture.md").read_text()


@pytest.mark.skipif(
    os.geteuid() != 0
    or shutil.which("runuser") is None
    or not list(Path("/usr/lib/postgresql").glob("*/bin/initdb")),
    reason="needs root and an installed PostgreSQL (the script runs initdb as postgres)",
)
def test_pg_start_says_why_postgres_cannot_reach_a_private_folder() -> None:
    with tempfile.TemporaryDirectory() as private:  # 0700, owned by root
        done = subprocess.run(
            ["bash", str(ROOT / "scripts" / "pg_start.sh")],
            env={**os.environ, "WORKQ_PG_DIR": f"{private}/pg"},
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode != 0 and done.stdout.strip() == "false"
    assert "cannot reach" in done.stderr and f"{private} is closed to other users" in done.stderr
