"""Pydantic models for the parts of GitHub's REST answers the mirror reads.

Unknown fields are ignored, so GitHub adding fields never breaks parsing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_validator


class _GhModel(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class GhUser(_GhModel):
    login: str
    id: int
    type: str = "User"


class GhLabel(_GhModel):
    name: str
    id: int | None = None
    color: str = ""
    description: str | None = None
    default: bool = False


class GhPermissions(_GhModel):
    admin: bool = False
    maintain: bool = False
    push: bool = False
    triage: bool = False
    pull: bool = False


class GhRepo(_GhModel):
    id: int
    name: str
    full_name: str
    private: bool = False
    html_url: str = ""
    has_issues: bool = True
    archived: bool = False
    default_branch: str = "main"
    permissions: GhPermissions | None = None

    @property
    def can_push(self) -> bool:
        """Whether the token may write issues and labels (False when GitHub did not say)."""
        return self.permissions is not None and self.permissions.push


class GhIssue(_GhModel):
    id: int
    number: int
    title: str
    body: str | None = None
    state: Literal["open", "closed"]
    state_reason: str | None = None
    labels: list[GhLabel] = []
    user: GhUser | None = None
    html_url: str
    url: str = ""
    comments: int = 0
    created_at: datetime
    updated_at: datetime
    closed_at: datetime | None = None
    pull_request: dict[str, Any] | None = None
    assignees: list[GhUser] = []

    @field_validator("labels", mode="before")
    @classmethod
    def _labels_as_objects(cls, value: Any) -> Any:
        # GitHub answers label objects; accept bare names too.
        if isinstance(value, list):
            return [{"name": item} if isinstance(item, str) else item for item in value]
        return value

    @property
    def is_pull_request(self) -> bool:
        """Pull requests appear in the issue list with a ``pull_request`` key."""
        return self.pull_request is not None

    @property
    def label_names(self) -> list[str]:
        return [label.name for label in self.labels]


class GhComment(_GhModel):
    id: int
    body: str | None = None
    user: GhUser | None = None
    html_url: str = ""
    issue_url: str = ""
    created_at: datetime
    updated_at: datetime


class GhBranchRef(_GhModel):
    """The ``head`` or ``base`` of a pull request."""

    ref: str
    sha: str
    label: str = ""


class GhPull(_GhModel):
    id: int
    number: int
    title: str
    body: str | None = None
    state: Literal["open", "closed"]
    html_url: str
    url: str = ""
    draft: bool = False
    merged: bool = False
    merged_at: datetime | None = None
    merge_commit_sha: str | None = None
    # null while GitHub is still computing whether it merges cleanly.
    mergeable: bool | None = None
    mergeable_state: str = "unknown"
    head: GhBranchRef
    base: GhBranchRef
    user: GhUser | None = None
    created_at: datetime
    updated_at: datetime


class GhReview(_GhModel):
    id: int
    user: GhUser | None = None
    state: str
    body: str | None = None
    submitted_at: datetime | None = None
    html_url: str = ""
    commit_id: str | None = None  # the head the review was given on


class GhReviewComment(_GhModel):
    """A comment on a line of a pull request's diff (``GET .../pulls/{n}/comments``)."""

    id: int
    pull_request_review_id: int | None = None
    path: str = ""
    line: int | None = None  # null when the line is no longer in the diff
    original_line: int | None = None
    body: str = ""
    user: GhUser | None = None
    html_url: str = ""
    commit_id: str | None = None


class GhCheckOutput(_GhModel):
    title: str | None = None
    summary: str | None = None
    annotations_count: int = 0


class GhCheckRun(_GhModel):
    id: int
    name: str
    status: str
    conclusion: str | None = None
    html_url: str | None = None
    details_url: str | None = None
    output: GhCheckOutput | None = None


class GhAnnotation(_GhModel):
    """One annotation of a check run (``GET .../check-runs/{id}/annotations``)."""

    path: str = ""
    start_line: int | None = None
    end_line: int | None = None
    annotation_level: str | None = None  # notice, warning or failure
    title: str | None = None
    message: str | None = None


class GhCheckRuns(_GhModel):
    total_count: int
    check_runs: list[GhCheckRun]


class GhStatus(_GhModel):
    context: str
    state: str
    description: str | None = None
    target_url: str | None = None


class GhCombinedStatus(_GhModel):
    state: str
    sha: str = ""
    total_count: int = 0
    statuses: list[GhStatus] = []
