"""The schema, as SQLAlchemy models. Migrations in migrations/ must produce exactly this."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    Dialect,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    SmallInteger,
    String,
    Text,
    TypeDecorator,
    text,
)
from sqlalchemy.dialects import sqlite
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeEngine

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def to_sqlite(value: datetime) -> str:
    """How a datetime is stored on SQLite: "YYYY-MM-DD HH:MM:SS.ffffff" in UTC (the format
    SQLAlchemy's SQLite DateTime uses, so text comparisons order by time)."""
    if value.tzinfo is None:
        raise ValueError("naive datetime given to the database")
    if value.tzinfo is not UTC:
        value = value.astimezone(UTC)
    return value.replace(tzinfo=None).isoformat(" ", "microseconds")


def from_sqlite(value: str) -> datetime:
    """The aware UTC datetime of a value stored by :func:`to_sqlite`."""
    return to_utc(datetime.fromisoformat(value))


def to_utc(value: datetime) -> datetime:
    """Aware, in UTC (a naive value from the database is UTC)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class _SQLiteStamp(sqlite.DATETIME):
    """DATETIME in the schema, with the conversion left to UTCDateTime (the same functions
    the hot path's prepared statements use)."""

    def bind_processor(self, dialect: Dialect) -> None:
        return None

    def result_processor(self, dialect: Dialect, coltype: object) -> None:
        return None


class UTCDateTime(TypeDecorator[datetime]):
    """An aware UTC datetime on every engine (SQLite stores it as text, by to_sqlite)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "sqlite":
            return _SQLiteStamp()  # type: ignore[no-untyped-call]
        return dialect.type_descriptor(self.impl)

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        if dialect.name == "sqlite":
            return to_sqlite(value)
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the database")
        return value.astimezone(UTC)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if isinstance(value, str):
            return from_sqlite(value)
        assert isinstance(value, datetime)
        return to_utc(value)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class IssueRow(Base):
    __tablename__ = "issues"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    number: Mapped[int] = mapped_column(Integer, unique=True)
    title: Mapped[str] = mapped_column(String(256))
    description: Mapped[str] = mapped_column(Text, default="")
    status: Mapped[str] = mapped_column(String(16))
    priority: Mapped[int] = mapped_column(SmallInteger)
    issue_type: Mapped[str] = mapped_column(String(16))
    agent: Mapped[str] = mapped_column(String(64))
    is_blocked: Mapped[bool] = mapped_column(Boolean, default=False)
    blocked_reason: Mapped[str | None] = mapped_column(Text)
    # How many of its blockers are not done: maintained on write so ready never walks the graph.
    open_blockers: Mapped[int] = mapped_column(Integer, default=0)
    claimed_by: Mapped[str | None] = mapped_column(String(128))
    claimed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    closed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # The fencing token: grows with every claim of the issue (0006_wait_fence).
    fence: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    # The registered repository (its name) the issue belongs to, if any (migration 0008_agit).
    repository: Mapped[str | None] = mapped_column(String(64))

    __table_args__ = (
        Index(
            "ix_issues_ready",
            "status",
            "is_blocked",
            "open_blockers",
            "priority",
            "created_at",
            "number",
        ),
        Index("ix_issues_lease", "status", "lease_expires_at"),
        Index("ix_issues_claimed_by", "claimed_by"),
        Index("ix_issues_repository", "repository"),
    )


class LabelRow(Base):
    __tablename__ = "labels"

    issue_id: Mapped[str] = mapped_column(
        ForeignKey("issues.id", ondelete="CASCADE"), primary_key=True
    )
    name: Mapped[str] = mapped_column(String(64), primary_key=True)

    __table_args__ = (Index("ix_labels_name", "name"),)


class DependencyRow(Base):
    """blocker_id must be done before blocked_id is ready."""

    __tablename__ = "dependencies"

    blocker_id: Mapped[str] = mapped_column(
        ForeignKey("issues.id", ondelete="CASCADE"), primary_key=True
    )
    blocked_id: Mapped[str] = mapped_column(
        ForeignKey("issues.id", ondelete="CASCADE"), primary_key=True
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)

    __table_args__ = (Index("ix_dependencies_blocked_id", "blocked_id"),)


class CommentRow(Base):
    __tablename__ = "comments"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    issue_id: Mapped[str] = mapped_column(ForeignKey("issues.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(16))
    body: Mapped[str] = mapped_column(Text)
    author: Mapped[str | None] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)

    __table_args__ = (Index("ix_comments_issue_id", "issue_id"),)


class EventRow(Base):
    """The audit log. Not tied to issues by a foreign key: history outlives a delete."""

    __tablename__ = "events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    issue_id: Mapped[str | None] = mapped_column(String(36))
    number: Mapped[int | None] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(32))
    actor: Mapped[str | None] = mapped_column(String(128))
    before: Mapped[str | None] = mapped_column(Text)
    after: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)

    __table_args__ = (Index("ix_events_number", "number", "id"),)


class CounterRow(Base):
    __tablename__ = "counters"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[int] = mapped_column(Integer)


class GitHubMirrorRow(Base):
    """A GitHub repository this database mirrors to. While a row exists, every mutation of
    an issue queues an outbox row (github/outbox hook); with none, the hook writes nothing."""

    __tablename__ = "github_mirror"

    repo: Mapped[str] = mapped_column(String(200), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # Import: GitHub's own updated_at of the newest issue seen, and the list's ETag.
    import_since: Mapped[datetime | None] = mapped_column(UTCDateTime)
    import_etag: Mapped[str | None] = mapped_column(String(256))
    last_push_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_import_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_error: Mapped[str | None] = mapped_column(Text)
    # The one worker pushing to this repository ("host:pid"), and until when it holds it.
    worker: Mapped[str | None] = mapped_column(String(128))
    worker_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class GitHubOutboxRow(Base):
    """One row per issue with changes GitHub has not seen yet. ``version`` grows with each
    change, so the worker deletes the row only if nothing changed while it pushed."""

    __tablename__ = "github_outbox"

    issue_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    number: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(32))
    version: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(16))  # pending | dead
    attempts: Mapped[int] = mapped_column(Integer)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime)
    changed_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # Set before a create is sent, cleared once its outcome is known: while set, the
    # issue may exist on GitHub and is looked up by its marker before creating again.
    create_started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_error: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (Index("ix_github_outbox_due", "state", "next_attempt_at"),)


class GitHubLinkRow(Base):
    """A local issue and its GitHub issue. Not tied to issues by a foreign key: a deleted
    issue keeps its link so that its GitHub issue can be closed."""

    __tablename__ = "github_links"

    issue_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    number: Mapped[int] = mapped_column(Integer)
    repo: Mapped[str] = mapped_column(String(200))
    gh_number: Mapped[int] = mapped_column(Integer)
    url: Mapped[str] = mapped_column(String(500))
    # What GitHub held after the last push or import (JSON): the base of both directions.
    snapshot: Mapped[str] = mapped_column(Text)
    remote_updated_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    linked_at: Mapped[datetime] = mapped_column(UTCDateTime)

    __table_args__ = (
        Index("ix_github_links_repo", "repo", "gh_number", unique=True),
        Index("ix_github_links_number", "number"),
    )


class GitHubCommentRow(Base):
    """A local comment mirrored to GitHub. ``gh_comment_id`` is None while its POST is in
    flight or its outcome unknown."""

    __tablename__ = "github_comments"

    comment_id: Mapped[int] = mapped_column(
        ForeignKey("comments.id", ondelete="CASCADE"), primary_key=True
    )
    gh_comment_id: Mapped[int | None] = mapped_column(BigInteger)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)


class PlanRow(Base):
    """A plan-mode session of one run id (contract A), and its plan file.

    While a plan is active, ``active_run`` and ``active_slug`` repeat ``run_id`` and ``slug``;
    their unique constraints allow one active plan per run id and per slug. Exiting sets
    both to NULL, which never counts as a duplicate, so finished plans stay as history.
    """

    __tablename__ = "plans"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    run_id: Mapped[str] = mapped_column(String(128))
    slug: Mapped[str] = mapped_column(String(64))
    goal: Mapped[str] = mapped_column(Text)
    phase: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16))  # active | exited | abandoned
    path: Mapped[str] = mapped_column(Text)  # the plan file, absolute
    active_run: Mapped[str | None] = mapped_column(String(128), unique=True)
    active_slug: Mapped[str | None] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    closed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    __table_args__ = (
        Index("ix_plans_run_id", "run_id", "created_at"),
        Index("ix_plans_slug", "slug", "created_at"),
    )


class PlanIssueRow(Base):
    """An issue that ``exit_plan_mode(launchSwarm=true)`` made from task ``task`` of a plan."""

    __tablename__ = "plan_issues"

    plan_id: Mapped[str] = mapped_column(
        ForeignKey("plans.id", ondelete="CASCADE"), primary_key=True
    )
    task: Mapped[int] = mapped_column(Integer, primary_key=True)
    issue_id: Mapped[str] = mapped_column(ForeignKey("issues.id", ondelete="CASCADE"))

    __table_args__ = (Index("ix_plan_issues_issue_id", "issue_id"),)


class WorkflowRow(Base):
    """The workflow phase of a claimed issue (contract B's WorkflowState). Its phase changes
    are events (kind ``workflow_advanced``); a claim that ends (complete, release, block)
    makes the row stale, and the next claim starts again at selection."""

    __tablename__ = "workflows"

    issue_id: Mapped[str] = mapped_column(
        ForeignKey("issues.id", ondelete="CASCADE"), primary_key=True
    )
    phase: Mapped[str] = mapped_column(String(16))
    branch_name: Mapped[str | None] = mapped_column(String(64))
    tests_passed: Mapped[bool | None] = mapped_column(Boolean)
    skip_justification: Mapped[str | None] = mapped_column(Text)
    pr_title: Mapped[str | None] = mapped_column(String(256))
    pr_body: Mapped[str | None] = mapped_column(Text)
    pr_number: Mapped[int | None] = mapped_column(Integer)
    started_by: Mapped[str] = mapped_column(String(128))
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class GitHubPullRow(Base):
    """The pull request submit_pr opened for an issue (its latest). ``merged_at`` is set
    once, by the sync pass that first sees it merged and completes the issue."""

    __tablename__ = "github_pulls"

    issue_id: Mapped[str] = mapped_column(
        ForeignKey("issues.id", ondelete="CASCADE"), primary_key=True
    )
    number: Mapped[int] = mapped_column(Integer)
    repo: Mapped[str] = mapped_column(String(200))
    pr_number: Mapped[int] = mapped_column(Integer)
    url: Mapped[str] = mapped_column(String(500))
    branch: Mapped[str] = mapped_column(String(255))
    opened_at: Mapped[datetime] = mapped_column(UTCDateTime)
    merged_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    __table_args__ = (Index("ix_github_pulls_number", "number"),)


class RepositoryRow(Base):
    """A local git repository agents work on, with one worktree per claimed issue.

    ``path`` is the root of its main work tree (found through the git common directory, so
    registering from inside any of its worktrees names the same repository). The merge
    lease serialises merges into the default branch across processes and machines: a merge
    holds it until ``merge_expires_at`` (a killed merger's lease simply expires)."""

    __tablename__ = "repositories"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    path: Mapped[str] = mapped_column(Text, unique=True)
    default_branch: Mapped[str] = mapped_column(String(255))
    remote_url: Mapped[str | None] = mapped_column(Text)
    worktree_dir: Mapped[str] = mapped_column(Text)  # absolute
    auto_worktree: Mapped[bool] = mapped_column(Boolean, default=False)
    merge_mode: Mapped[str] = mapped_column(String(16))  # merge | squash
    merge_holder: Mapped[str | None] = mapped_column(String(128))
    merge_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class WorktreeRow(Base):
    """A git worktree made for one issue. ``state``: creating (recorded before git makes
    it), active, merging (the merge commit is known: ``merge_commit``), merged, removed.
    Not tied to issues by a foreign key: a deleted issue's worktree is pruned later."""

    __tablename__ = "worktrees"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    repository: Mapped[str] = mapped_column(ForeignKey("repositories.name", ondelete="CASCADE"))
    issue_id: Mapped[str | None] = mapped_column(String(36))
    number: Mapped[int | None] = mapped_column(Integer)
    path: Mapped[str] = mapped_column(Text)
    branch: Mapped[str] = mapped_column(String(255))
    base_commit: Mapped[str] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(16))
    agent: Mapped[str | None] = mapped_column(String(128))
    merge_commit: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)

    __table_args__ = (
        Index("ix_worktrees_repository", "repository", "state"),
        Index("ix_worktrees_number", "number"),
    )


class AgentRow(Base):
    """A registered agent. Its id may serve as a run id: what it claims is held by it."""

    __tablename__ = "agents"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(128))
    agent_type: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    last_seen_at: Mapped[datetime] = mapped_column(UTCDateTime)


class TouchRow(Base):
    """A path glob an issue declares it will touch (0009_reserve_touches); its claim reserves it
    exclusively while the claim lives."""

    __tablename__ = "issue_touches"

    issue_id: Mapped[str] = mapped_column(
        ForeignKey("issues.id", ondelete="CASCADE"), primary_key=True
    )
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    glob: Mapped[str] = mapped_column(String(256))


class ReservationRow(Base):
    """A path glob reserved explicitly by the holder of a claim (``issue_reserve``). It lives
    as long as that claim: while the issue's fence is still ``fence`` and its lease runs."""

    __tablename__ = "reservations"

    issue_id: Mapped[str] = mapped_column(
        ForeignKey("issues.id", ondelete="CASCADE"), primary_key=True
    )
    glob: Mapped[str] = mapped_column(String(256), primary_key=True)
    holder: Mapped[str] = mapped_column(String(128))
    fence: Mapped[int] = mapped_column(Integer)
    mode: Mapped[str] = mapped_column(String(16))  # exclusive | shared
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class GateRunRow(Base):
    """One quality gate run on an issue's checkout (0010_gates): the evidence the tests gate
    and the merge step read. A run counts for ``commit_sha`` only when the tree was clean
    (``dirty`` false) and the gate ran over the whole checkout (``whole_checkout``)."""

    __tablename__ = "gate_runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    issue_id: Mapped[str] = mapped_column(ForeignKey("issues.id", ondelete="CASCADE"))
    number: Mapped[int] = mapped_column(Integer)
    commit_sha: Mapped[str] = mapped_column(String(64))
    dirty: Mapped[bool] = mapped_column(Boolean)
    whole_checkout: Mapped[bool] = mapped_column(Boolean)
    gate: Mapped[str] = mapped_column(String(64))
    gate_number: Mapped[int] = mapped_column(Integer)
    tests: Mapped[bool] = mapped_column(Boolean)
    passed: Mapped[bool] = mapped_column(Boolean)
    score: Mapped[str] = mapped_column(String(32))
    issues_found: Mapped[int] = mapped_column(Integer)
    tests_passed: Mapped[int | None] = mapped_column(Integer)
    tests_failed: Mapped[int | None] = mapped_column(Integer)
    tests_errors: Mapped[int | None] = mapped_column(Integer)
    exit_code: Mapped[int | None] = mapped_column(Integer)
    timed_out: Mapped[bool] = mapped_column(Boolean)
    # JSON: the first issues and failures, and the end of the output (bounded).
    summary: Mapped[str] = mapped_column(Text)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime] = mapped_column(UTCDateTime)
    actor: Mapped[str | None] = mapped_column(String(128))

    __table_args__ = (Index("ix_gate_runs_issue_commit", "issue_id", "commit_sha"),)


class IssueBranchRow(Base):
    """The branch an issue's work is on (0011_gitflow_issue_branches): linked by
    ``start_work_on_issue`` or ``link_issue_to_branch``. ``checkout`` is the work tree it is
    checked out in; ``merge_commit`` is recorded before a merge moves the default branch
    (so a rerun after a crash finishes instead of merging twice)."""

    __tablename__ = "issue_branches"

    issue_id: Mapped[str] = mapped_column(
        ForeignKey("issues.id", ondelete="CASCADE"), primary_key=True
    )
    number: Mapped[int] = mapped_column(Integer)
    branch: Mapped[str] = mapped_column(String(255))
    checkout: Mapped[str] = mapped_column(Text)
    base_commit: Mapped[str | None] = mapped_column(String(64))
    merge_commit: Mapped[str | None] = mapped_column(String(64))
    linked_by: Mapped[str | None] = mapped_column(String(128))
    linked_at: Mapped[datetime] = mapped_column(UTCDateTime)

    __table_args__ = (Index("ix_issue_branches_branch", "branch"),)
