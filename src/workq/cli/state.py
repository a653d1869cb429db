"""What every command shares: settings from the global options, and a lazily opened queue."""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from workq.config import Settings, load_settings
from workq.domain.authority import Authority

if TYPE_CHECKING:
    from workq.services.handle import Queue


@dataclass
class State:
    db: Path | None = None
    database_url: str | None = None
    verbose: bool = False
    actor_name: str | None = None
    _queue: Queue | None = field(default=None, repr=False)

    def settings(self, **overrides: object) -> Settings:
        return load_settings(db_path=self.db, database_url=self.database_url, **overrides)

    def queue(self, *, migrate: bool | None = None) -> Queue:
        if self._queue is None:
            from workq.services.runtime import open_queue

            self._queue = open_queue(self.settings(), migrate=migrate)
        return self._queue

    @property
    def actor(self) -> str:
        if self.actor_name:
            return self.actor_name
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = "unknown"
        return os.environ.get("WORKQ_ACTOR") or f"cli-{user}"

    def run_id(self, given: str | None = None) -> str:
        """Whom a command claims or acts for: --run-id, else WORKQ_RUN_ID, else --as."""
        return given or self.settings().run_id or self.actor

    def acting(
        self,
        run_id: str | None = None,
        *,
        override: str | None = None,
        fence: int | None = None,
    ) -> Authority:
        """Who a command acts as: the run id it names (see :meth:`run_id`), claiming under
        it; or, when told to override (``--force``, ``--ignore-plan-mode``), on anyone's
        claim for ``override``, the person (``--as``) and the reason recorded. The one place
        the CLI builds an Authority."""
        me = self.run_id(run_id)
        if override is not None:
            return Authority.overriding(override, who=self.actor, fence=fence, acts_as=me)
        return Authority.of({me}, acts_as=me, fence=fence, who=self.actor)

    def close(self) -> None:
        if self._queue is not None:
            self._queue.db.dispose()
            self._queue = None


def state(ctx: typer.Context) -> State:
    found = ctx.find_root().obj
    assert isinstance(found, State)
    return found
