"""A task as the services return it (services/tasks): what a client of the MCP Tasks
extension sees of a tool call answered later. Pydantic only: no database, no I/O."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict


class TaskStatus(StrEnum):
    WORKING = "working"
    INPUT_REQUIRED = "input_required"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL = frozenset({TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED})


class TaskView(BaseModel):
    """One task. ``answer`` (completed): the kind's answer, which the face renders as the
    tool's result: ``{"value": ...}`` for a success, ``{"refused": ...}`` for a refusal (a
    stored workq error, ``errors.revived``). ``error`` (failed): the JSON-RPC error."""

    model_config = ConfigDict(frozen=True)

    id: str
    kind: str
    status: TaskStatus
    status_message: str | None = None
    created_at: datetime
    updated_at: datetime
    ttl_ms: int | None
    poll_interval_ms: int
    answer: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    number: int | None = None
    fence: int | None = None
