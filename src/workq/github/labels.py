"""The repository's labels: read once, created on demand in workq's colours."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from workq.github.client import GitHubClient
from workq.github.render import label_color


class RepoLabels:
    """A cache of the repository's label names (lower-case). ``before_write`` runs before
    each create, so the worker can pace it like any other write."""

    def __init__(
        self, client: GitHubClient, repo: str, before_write: Callable[[], None] = lambda: None
    ) -> None:
        self.client = client
        self.repo = repo
        self.before_write = before_write
        self._known: set[str] | None = None

    def forget(self) -> None:
        self._known = None

    def ensure(self, names: Iterable[str]) -> int:
        """Create the missing ones. A 422 ``already_exists`` means someone else made it:
        fine. Returns how many this call created."""
        if self._known is None:
            self._known = {label.name.lower() for label in self.client.list_labels(self.repo)}
        created = 0
        for name in names:
            key = name.lower()
            if key in self._known:
                continue
            self.before_write()
            if self.client.create_label(self.repo, name, color=label_color(name)) is not None:
                created += 1
            self._known.add(key)
        return created
