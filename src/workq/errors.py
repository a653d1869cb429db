"""The exception hierarchy of workq.

Every error carries a stable ``code`` (what happened, for machines), a message (for people),
``facts`` (the details that explain it) and ``hint`` (what the caller should do next).
A subclass's docstring is its default message. Nothing here imports the rest of workq.
"""

from __future__ import annotations

from typing import Any, ClassVar


class WorkqError(Exception):
    """workq failed."""

    code: ClassVar[str] = "INTERNAL"
    hint: str | None = None

    def __init__(
        self, message: str | None = None, *, hint: str | None = None, **facts: Any
    ) -> None:
        self.message = message or (self.__doc__ or self.code).strip()
        if hint is not None:
            self.hint = hint
        self.facts: dict[str, Any] = facts
        super().__init__(self.message)

    def describe(self) -> str:
        """One line: code, message, facts and the next step."""
        text = f"{self.code}: {self.message.rstrip('.')}"
        if self.hint:
            text += f"; {self.hint}"
        return text

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"code": self.code, "error": self.message}
        if self.facts:
            data["details"] = self.facts
        if self.hint:
            data["hint"] = self.hint
        return data


class InvalidInput(WorkqError):
    """The input is not valid."""

    code = "INVALID_INPUT"
    hint = "fix the argument and call again"


class NotFound(WorkqError):
    """No such issue."""

    code = "NOT_FOUND"
    hint = "list issues with issue_list to find the right number"


class Conflict(WorkqError):
    """The operation conflicts with the current state."""

    code = "CONFLICT"


class AlreadyClaimed(Conflict):
    """The issue is claimed by someone else."""

    code = "ALREADY_CLAIMED"
    hint = "pick another with issue_ready"


class NotClaimable(Conflict):
    """The issue cannot be claimed in its current state."""

    code = "NOT_CLAIMABLE"
    hint = "pick another with issue_ready"


class NotHolder(Conflict):
    """Only the holder of the claim may do this."""

    code = "NOT_HOLDER"
    hint = "claim the issue first, or ask its holder to release it"


class OpenBlockers(Conflict):
    """The issue waits on issues that are not done."""

    code = "OPEN_BLOCKERS"
    hint = "finish those first (the claim stays yours), or give it up with issue_release"


class InvalidTransition(Conflict):
    """That state change is not allowed."""

    code = "INVALID_TRANSITION"


class DependencyCycle(Conflict):
    """The dependency would create a cycle."""

    code = "DEPENDENCY_CYCLE"
    hint = "remove the opposite dependency first"


class InvalidConfirmation(WorkqError):
    """The confirmation string does not match."""

    code = "INVALID_CONFIRMATION"
    hint = "pass confirmation='I understand this may cause conflicts'"


class PlanError(WorkqError):
    """Plan mode refused the operation."""

    code = "PLAN_ERROR"


class PlanModeActive(PlanError):
    """This run is in plan mode, where claiming and completing are not allowed."""

    code = "PLAN_MODE_ACTIVE"
    hint = "finish planning with exit_plan_mode first"


class NoActivePlan(PlanError):
    """This run is not in plan mode."""

    code = "NO_ACTIVE_PLAN"
    hint = "start one with enter_plan_mode(slug, goal)"


class PlanEmpty(PlanError):
    """The plan file holds nothing beyond its template."""

    code = "PLAN_EMPTY"
    hint = "write the empty sections of the plan file, then call exit_plan_mode again"


class StorageError(WorkqError):
    """The database could not be used."""

    code = "STORAGE_ERROR"
    hint = "check the database path and run 'workq doctor'"


class Busy(StorageError):
    """The database stayed locked by another writer for too long."""

    code = "DATABASE_BUSY"
    hint = "retry in a moment; nothing was changed"


class ReadOnlyStorage(StorageError):
    """The database cannot be written."""

    code = "READ_ONLY"
    hint = "check the permissions of the database file and its folder"


class StorageFull(StorageError):
    """The disk or database is full."""

    code = "STORAGE_FULL"
    hint = "free disk space; nothing was changed"


class CorruptDatabase(StorageError):
    """The database file is corrupt or not a workq database."""

    code = "CORRUPT_DATABASE"
    hint = "restore from a backup ('workq backup' makes one) or point --db elsewhere"


class ConnectionLost(StorageError):
    """The connection to the database server was lost."""

    code = "CONNECTION_LOST"
    hint = "check the database server; a write may or may not have been applied, read it back"


class SchemaMismatch(StorageError):
    """The database schema does not match this version of workq."""

    code = "SCHEMA_MISMATCH"


class GitHubError(WorkqError):
    """The GitHub API refused the request."""

    code = "GITHUB_API_ERROR"
