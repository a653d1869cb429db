"""What every command shares: settings from the global options, and a lazily opened queue."""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from workq.cli import output
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

    def queue(self, *, migrate: bool | None = None, existing: bool = False) -> Queue:
        """The queue of the settings, opened once. ``existing``: a command that only reads
        refuses a missing SQLite file instead of creating an empty one (``NO_DATABASE``)."""
        if self._queue is None:
            from workq.services.runtime import open_queue

            settings = self.for_reading() if existing else self.named()
            self._queue = open_queue(settings, migrate=migrate)
        return self._queue

    def named(self) -> Settings:
        """The settings, the database they name said on stderr with --verbose."""
        settings = self.settings()
        if self.verbose:
            from workq.services.preflight import describe_database

            said = f"workq: database {describe_database(settings)}"
            output.errors().print(said, markup=False)
        return settings

    def for_reading(self) -> Settings:
        """The settings of a command that only reads: a missing SQLite file is refused, not
        created (``NO_DATABASE``, naming the path and how to make or name one)."""
        from workq.services.preflight import require_database

        settings = self.named()
        require_database(settings, create="'workq init'")
        return settings

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
