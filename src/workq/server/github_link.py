"""The server's link to GitHub for the GitHub tools: the checked client and repository.

``workq serve`` checks the link before serving (token accepted, repository found) and
refuses to start when it cannot be made. A server built without that check (in-process
tests, HTTP) connects on the first GitHub call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from workq.config import Settings

if TYPE_CHECKING:
    from workq.github.repository import Connection


class GitHubLink:
    def __init__(self, settings: Settings, cwd: Path | None = None) -> None:
        self.settings = settings
        self.cwd = cwd or Path.cwd()
        self._lock = threading.Lock()
        self._connection: Connection | None = None

    def check(self, mirror: Callable[[], str | None]) -> Connection:
        """Connect now (or answer the connection made before).

        Raises:
            GitHubToolsSetup, GitHubUnreachable: no token, refused token, no repository.
        """
        from workq.github.repository import connect

        with self._lock:
            if self._connection is None:
                self._connection = connect(
                    setting=self.settings.github_repo, mirror=mirror, cwd=self.cwd
                )
            return self._connection

    def close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.client.close()
                self._connection = None
