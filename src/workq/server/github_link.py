"""The server's link to GitHub for the github toolset: the checked client and repository,
or the setup error that every GitHub tool answers with.

``workq serve`` checks the link before serving (token accepted, repository found) and
refuses to start when the toolset was asked for by name; under ``--toolsets all`` it keeps
the error instead, and each GitHub tool answers with it. A server built without that check
(in-process tests, HTTP) connects on the first GitHub call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from workq.config import Settings
from workq.errors import WorkqError

if TYPE_CHECKING:
    from workq.github.repository import Connection


class GitHubLink:
    def __init__(self, settings: Settings, cwd: Path | None = None) -> None:
        self.settings = settings
        self.cwd = cwd or Path.cwd()
        self._lock = threading.Lock()
        self._connection: Connection | None = None
        self._error: WorkqError | None = None

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
                self._error = None
            return self._connection

    def keep_error(self, error: WorkqError) -> None:
        """Answer every GitHub call with ``error`` (the toolset came with ``all``)."""
        with self._lock:
            self._error = error

    def get(self, mirror: Callable[[], str | None]) -> Connection:
        with self._lock:
            error = self._error
        if error is not None:
            raise error
        return self.check(mirror)

    def close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.client.close()
                self._connection = None
