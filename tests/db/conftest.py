"""Migrations are the subject here: each test's database starts empty, not as a copy of the
migrated template that tests/conftest.py hands every other test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ENGINES, database
from workq.config import Settings


@pytest.fixture(params=ENGINES)
def settings(request: pytest.FixtureRequest, db_path: Path) -> Iterator[Settings]:
    """A queue's settings, lease 60 s, on a new, empty database."""
    with database(request.param, db_path, template=None) as found:
        yield found
