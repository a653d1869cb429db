"""Argument types shared by the tools: typed, bounded and described once."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BeforeValidator, Field

from workq.domain.names import REPOSITORY_NAME_MAX
from workq.schemas import (
    AGENT_MAX,
    DESCRIPTION_MAX,
    FORCE_CLAIM_CONFIRMATION,
    GLOB_MAX,
    GLOBS_PER_ISSUE_MAX,
    LABEL_MAX,
    LABELS_PER_ISSUE_MAX,
    NUMBER_MAX,
    PAGE_MAX,
    REASON_MAX,
    RUN_ID_MAX,
    TITLE_MAX,
)


def _critical_is_urgent(value: object) -> object:
    """``critical`` (the GitHub issue-priority server's word, any case) is accepted as
    urgent, without a fifth value in every priority enum agents read."""
    return "urgent" if isinstance(value, str) and value.lower() == "critical" else value


PriorityName = Annotated[
    Literal["urgent", "high", "medium", "low"], BeforeValidator(_critical_is_urgent)
]
TypeName = Literal["task", "bug", "feature", "chore", "docs"]
StatusName = Literal["open", "in_progress", "done"]

# Undescribed where the name says it all: an issue tool's number, a run id that defaults
# to this server's (the tools' texts and docs/mcp.md say so).
Number = Annotated[int, Field(strict=True, ge=1, le=NUMBER_MAX)]
RunId = Annotated[str | None, Field(min_length=1, max_length=RUN_ID_MAX)]
WaitSeconds = Annotated[
    int | None, Field(strict=True, ge=0, le=300, description="Wait while none is ready")
]
# A claim's fencing token (described once, on the claim's own ``fence`` field; its bounds
# are the service's to check, to keep four schemas small).
Fence = Annotated[int | None, Field(strict=True)]
# The title's limit is checked once it is trimmed (workq.domain.fields), so the schema
# cannot state it as a maxLength of the raw string.
Title = Annotated[str, Field(min_length=1, description=f"One line, <= {TITLE_MAX} chars trimmed")]
Description = Annotated[str, Field(max_length=DESCRIPTION_MAX, description="Markdown")]
Reason = Annotated[str, Field(min_length=1, max_length=REASON_MAX)]
Agent = Annotated[str, Field(min_length=1, max_length=AGENT_MAX, description="e.g. claude, codex")]
Labels = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=LABEL_MAX)]],
    Field(max_length=LABELS_PER_ISSUE_MAX),
]
Touches = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=GLOB_MAX)]],
    Field(max_length=GLOBS_PER_ISSUE_MAX, description="Path globs"),
]
Types = Annotated[list[TypeName], Field(max_length=5)]
Limit = Annotated[int, Field(strict=True, ge=1, le=PAGE_MAX, description="Page size")]
Cursor = Annotated[str, Field(max_length=64, description="next_cursor of the previous page")]
Flag = Annotated[bool, Field(strict=True)]
Repo = Annotated[
    str, Field(min_length=1, max_length=REPOSITORY_NAME_MAX, description="Its repository")
]
Confirmation = Annotated[
    str, Field(max_length=100, description=f"Exactly: {FORCE_CLAIM_CONFIRMATION}")
]
