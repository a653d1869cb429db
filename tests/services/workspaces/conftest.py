"""The workspace and git-step tests drive servers with the SDK's client on asyncio."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
