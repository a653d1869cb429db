"""Fixtures: a fresh fake GitHub per test, and a client pointed at it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:  # so that ``tests.github_fake`` imports under any rootdir layout
    sys.path.insert(0, _ROOT)

from tests.github_fake.server import FakeGitHub  # noqa: E402
from workq.github import GitHubClient  # noqa: E402


@pytest.fixture
def fake_github() -> Iterator[FakeGitHub]:
    """A running in-process fake on 127.0.0.1 with repo ``acme/widgets`` and ``.token``."""
    with FakeGitHub() as fake:
        yield fake


@pytest.fixture
def gh_client(fake_github: FakeGitHub) -> Iterator[GitHubClient]:
    """A client for ``fake_github`` (2 s timeout, no proxies from the environment)."""
    with GitHubClient(
        fake_github.token, base_url=fake_github.url, timeout=2.0, trust_env=False
    ) as client:
        yield client
