"""The schema, as SQLAlchemy Core tables. Migrations in migrations/ must produce exactly this.

Core rather than the declarative ORM: nothing here maps rows to objects, and importing
sqlalchemy.orm would cost every workq process start."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)

from workq.db.times import UTCDateTime

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING)

issues = Table(
    "issues",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("number", Integer, nullable=False, unique=True),
    Column("title", String(256), nullable=False),
    Column("description", Text, nullable=False, default=""),
    Column("status", String(16), nullable=False),
    Column("priority", SmallInteger, nullable=False),
    Column("issue_type", String(16), nullable=False),
    Column("agent", String(64), nullable=False),
    Column("is_blocked", Boolean, nullable=False, default=False),
    Column("blocked_reason", Text),
    # How many of its blockers are not done: maintained on write so ready never walks the graph.
    Column("open_blockers", Integer, nullable=False, default=0),
    Column("claimed_by", String(128)),
    Column("claimed_at", UTCDateTime),
    Column("lease_expires_at", UTCDateTime),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("closed_at", UTCDateTime),
    # The fencing token: grows with every claim of the issue (0006_wait_fence).
    Column("fence", Integer, nullable=False, default=0, server_default=text("0")),
    # The registered repository (its name) the issue belongs to, if any (migration 0008_agit).
    Column("repository", String(64)),
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

labels = Table(
    "labels",
    metadata,
    Column("issue_id", ForeignKey("issues.id", ondelete="CASCADE"), primary_key=True),
    Column("name", String(64), primary_key=True),
    Index("ix_labels_name", "name"),
)

# blocker_id must be done before blocked_id is ready.
dependencies = Table(
    "dependencies",
    metadata,
    Column("blocker_id", ForeignKey("issues.id", ondelete="CASCADE"), primary_key=True),
    Column("blocked_id", ForeignKey("issues.id", ondelete="CASCADE"), primary_key=True),
    Column("created_at", UTCDateTime, nullable=False),
    Index("ix_dependencies_blocked_id", "blocked_id"),
)

comments = Table(
    "comments",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("issue_id", ForeignKey("issues.id", ondelete="CASCADE"), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("body", Text, nullable=False),
    Column("author", String(128)),
    Column("created_at", UTCDateTime, nullable=False),
    Index("ix_comments_issue_id", "issue_id"),
)

# The audit log. Not tied to issues by a foreign key: history outlives a delete.
events = Table(
    "events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("issue_id", String(36)),
    Column("number", Integer),
    Column("kind", String(32), nullable=False),
    Column("actor", String(128)),
    Column("before", Text),
    Column("after", Text),
    Column("created_at", UTCDateTime, nullable=False),
    Index("ix_events_number", "number", "id"),
)

counters = Table(
    "counters",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("value", Integer, nullable=False),
)

# The GitHub mirror (migration 0004_outbox).

# A GitHub repository this database mirrors to. While a row exists, every mutation of an
# issue queues an outbox row (github/outbox hook); with none, the hook writes nothing.
github_mirror = Table(
    "github_mirror",
    metadata,
    Column("repo", String(200), primary_key=True),
    Column("created_at", UTCDateTime, nullable=False),
    # Import: GitHub's own updated_at of the newest issue seen, and the list's ETag.
    Column("import_since", UTCDateTime),
    Column("import_etag", String(256)),
    Column("last_push_at", UTCDateTime),
    Column("last_import_at", UTCDateTime),
    Column("last_error", Text),
    # The one worker pushing to this repository (a process name: services/queue/processes.py),
    # and until when it holds it.
    Column("worker", String(128)),
    Column("worker_expires_at", UTCDateTime),
)

# One row per issue with changes GitHub has not seen yet. ``version`` grows with each
# change, so the worker deletes the row only if nothing changed while it pushed.
github_outbox = Table(
    "github_outbox",
    metadata,
    Column("issue_id", String(36), primary_key=True),
    Column("number", Integer, nullable=False),
    Column("kind", String(32), nullable=False),
    Column("version", Integer, nullable=False),
    Column("state", String(16), nullable=False),  # pending | dead
    Column("attempts", Integer, nullable=False),
    Column("next_attempt_at", UTCDateTime, nullable=False),
    Column("changed_at", UTCDateTime, nullable=False),
    # Set before a create is sent, cleared once its outcome is known: while set, the
    # issue may exist on GitHub and is looked up by its marker before creating again.
    Column("create_started_at", UTCDateTime),
    Column("last_error", Text),
    Index("ix_github_outbox_due", "state", "next_attempt_at"),
)

# A local issue and its GitHub issue. Not tied to issues by a foreign key: a deleted issue
# keeps its link so that its GitHub issue can be closed.
github_links = Table(
    "github_links",
    metadata,
    Column("issue_id", String(36), primary_key=True),
    Column("number", Integer, nullable=False),
    Column("repo", String(200), nullable=False),
    Column("gh_number", Integer, nullable=False),
    Column("url", String(500), nullable=False),
    # What GitHub held after the last push or import (JSON): the base of both directions.
    Column("snapshot", Text, nullable=False),
    Column("remote_updated_at", UTCDateTime),
    Column("linked_at", UTCDateTime, nullable=False),
    Index("ix_github_links_repo", "repo", "gh_number", unique=True),
    Index("ix_github_links_number", "number"),
)

# A local comment mirrored to GitHub. ``gh_comment_id`` is None while its POST is in flight
# or its outcome unknown.
github_comments = Table(
    "github_comments",
    metadata,
    Column("comment_id", ForeignKey("comments.id", ondelete="CASCADE"), primary_key=True),
    Column("gh_comment_id", BigInteger),
    Column("started_at", UTCDateTime, nullable=False),
)

# Plan mode and workflow phases (migration 0005_plans).

# A plan-mode session of one run id (contract A), and its plan file.
#
# While a plan is active, ``active_run`` and ``active_slug`` repeat ``run_id`` and ``slug``;
# their unique constraints allow one active plan per run id and per slug. Exiting sets both
# to NULL, which never counts as a duplicate, so finished plans stay as history.
plans = Table(
    "plans",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("run_id", String(128), nullable=False),
    Column("slug", String(64), nullable=False),
    Column("goal", Text, nullable=False),
    Column("phase", String(16), nullable=False),
    Column("status", String(16), nullable=False),  # active | exited | abandoned
    Column("path", Text, nullable=False),  # the plan file, absolute
    Column("active_run", String(128), unique=True),
    Column("active_slug", String(64), unique=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("closed_at", UTCDateTime),
    Index("ix_plans_run_id", "run_id", "created_at"),
    Index("ix_plans_slug", "slug", "created_at"),
)

# An issue that ``exit_plan_mode(launchSwarm=true)`` made from task ``task`` of a plan.
plan_issues = Table(
    "plan_issues",
    metadata,
    Column("plan_id", ForeignKey("plans.id", ondelete="CASCADE"), primary_key=True),
    Column("task", Integer, primary_key=True),
    Column("issue_id", ForeignKey("issues.id", ondelete="CASCADE"), nullable=False),
    Index("ix_plan_issues_issue_id", "issue_id"),
)

# The workflow phase of a claimed issue (contract B's WorkflowState). Its phase changes are
# events (kind ``workflow_advanced``); a claim that ends (complete, release, block) makes the
# row stale, and the next claim starts again at selection.
workflows = Table(
    "workflows",
    metadata,
    Column("issue_id", ForeignKey("issues.id", ondelete="CASCADE"), primary_key=True),
    Column("phase", String(16), nullable=False),
    Column("branch_name", String(64)),
    Column("tests_passed", Boolean),
    Column("skip_justification", Text),
    Column("pr_title", String(256)),
    Column("pr_body", Text),
    Column("pr_number", Integer),
    Column("started_by", String(128), nullable=False),
    Column("started_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)

# Pull requests opened for issues (migration 0007_github_pulls).

# The pull request submit_pr opened for an issue (its latest). ``merged_at`` is set once, by
# the sync pass that first sees it merged and completes the issue.
github_pulls = Table(
    "github_pulls",
    metadata,
    Column("issue_id", ForeignKey("issues.id", ondelete="CASCADE"), primary_key=True),
    Column("number", Integer, nullable=False),
    Column("repo", String(200), nullable=False),
    Column("pr_number", Integer, nullable=False),
    Column("url", String(500), nullable=False),
    Column("branch", String(255), nullable=False),
    Column("opened_at", UTCDateTime, nullable=False),
    Column("merged_at", UTCDateTime),
    Index("ix_github_pulls_number", "number"),
)

# Agent workspaces (migration 0008_agit).

# A local git repository agents work on, with one worktree per claimed issue.
#
# ``path`` is the root of its main work tree (found through the git common directory, so
# registering from inside any of its worktrees names the same repository). The merge lease
# serialises merges into the default branch across processes and machines: a merge holds it
# until ``merge_expires_at`` (a killed merger's lease simply expires).
repositories = Table(
    "repositories",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("path", Text, nullable=False, unique=True),
    Column("default_branch", String(255), nullable=False),
    Column("remote_url", Text),
    Column("worktree_dir", Text, nullable=False),  # absolute
    Column("auto_worktree", Boolean, nullable=False, default=False),
    Column("merge_mode", String(16), nullable=False),  # merge | squash
    Column("merge_holder", String(128)),
    Column("merge_expires_at", UTCDateTime),
    Column("created_at", UTCDateTime, nullable=False),
    # How its issues' work lands (migration 0015_landings): "local" (the merge queue moves
    # the default branch of the checkout) or "pr" (a pull request on ``github_repo``).
    Column("land", String(8), nullable=False, server_default="local"),
    Column("github_repo", String(200)),
    Column("on_refused", String(8), nullable=False, server_default="return"),  # or block
    Column("update_branch", Boolean, nullable=False, server_default=text("true")),
)

# An issue's work on its way through a pull request (services/workspaces/landings.py).
# ``state``: queued (to push and open), open (waiting for checks and mergeability),
# merging (the merge was asked of GitHub), merged (at ``merge_sha``: the issue is to be
# completed and cleaned up), landed, refused (``detail`` says why).
landings = Table(
    "landings",
    metadata,
    Column("issue_id", ForeignKey("issues.id", ondelete="CASCADE"), primary_key=True),
    Column("number", Integer, nullable=False),
    Column("repository", ForeignKey("repositories.name", ondelete="CASCADE"), nullable=False),
    Column("worktree_id", String(36)),
    Column("branch", String(255), nullable=False),
    Column("requested_by", String(128)),
    Column("fence", Integer, nullable=False),
    Column("head_sha", String(64), nullable=False),
    Column("state", String(16), nullable=False),
    Column("detail", Text),
    Column("pr_number", Integer),
    Column("pr_url", String(500)),
    Column("merge_sha", String(64)),
    Column("attempts", Integer, nullable=False, default=0),
    # What the last refusal found (migration 0016_notices): JSON, the failing checks with
    # their output and annotations, and the pull request's requested changes.
    Column("failure", Text),
    # How many times this issue's landing was refused (kept when it is queued again).
    Column("rounds", Integer, nullable=False, default=0, server_default=text("0")),
    Column("next_attempt_at", UTCDateTime, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Index("ix_landings_state", "state", "next_attempt_at"),
    Index("ix_landings_number", "number"),
)

# A git worktree made for one issue. ``state``: creating (recorded before git makes it),
# active, merging (the merge commit is known: ``merge_commit``), merged, removed. Not tied
# to issues by a foreign key: a deleted issue's worktree is pruned later.
worktrees = Table(
    "worktrees",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("repository", ForeignKey("repositories.name", ondelete="CASCADE"), nullable=False),
    Column("issue_id", String(36)),
    Column("number", Integer),
    Column("path", Text, nullable=False),
    Column("branch", String(255), nullable=False),
    Column("base_commit", String(64), nullable=False),
    Column("state", String(16), nullable=False),
    Column("agent", String(128)),
    Column("merge_commit", String(64)),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Index("ix_worktrees_repository", "repository", "state"),
    Index("ix_worktrees_number", "number"),
)

# A registered agent. Its id may serve as a run id: what it claims is held by it.
agents = Table(
    "agents",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("name", String(128), nullable=False),
    Column("agent_type", String(32), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("last_seen_at", UTCDateTime, nullable=False),
)

# File reservations (migration 0009_reserve_touches).

# A path glob an issue declares it will touch (0009_reserve_touches); its claim reserves it
# exclusively while the claim lives.
touches = Table(
    "issue_touches",
    metadata,
    Column("issue_id", ForeignKey("issues.id", ondelete="CASCADE"), primary_key=True),
    Column("position", Integer, primary_key=True),
    Column("glob", String(256), nullable=False),
)

# A path glob reserved explicitly by the holder of a claim (``issue_reserve``). It lives as
# long as that claim: while the issue's fence is still ``fence`` and its lease runs.
reservations = Table(
    "reservations",
    metadata,
    Column("issue_id", ForeignKey("issues.id", ondelete="CASCADE"), primary_key=True),
    Column("glob", String(256), primary_key=True),
    Column("holder", String(128), nullable=False),
    Column("fence", Integer, nullable=False),
    Column("mode", String(16), nullable=False),  # exclusive | shared
    Column("created_at", UTCDateTime, nullable=False),
)

# One quality gate run on an issue's checkout (migration 0010_gates): the evidence the tests
# gate and the merge step read. A run counts for ``commit_sha`` only when the tree was clean
# (``dirty`` false) and the gate ran over the whole checkout (``whole_checkout``).
gate_runs = Table(
    "gate_runs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("issue_id", ForeignKey("issues.id", ondelete="CASCADE"), nullable=False),
    Column("number", Integer, nullable=False),
    Column("commit_sha", String(64), nullable=False),
    Column("dirty", Boolean, nullable=False),
    Column("whole_checkout", Boolean, nullable=False),
    Column("gate", String(64), nullable=False),
    Column("gate_number", Integer, nullable=False),
    Column("tests", Boolean, nullable=False),
    Column("passed", Boolean, nullable=False),
    Column("score", String(32), nullable=False),
    Column("issues_found", Integer, nullable=False),
    Column("tests_passed", Integer),
    Column("tests_failed", Integer),
    Column("tests_errors", Integer),
    Column("exit_code", Integer),
    Column("timed_out", Boolean, nullable=False),
    # JSON: the first issues and failures, and the end of the output (bounded).
    Column("summary", Text, nullable=False),
    Column("started_at", UTCDateTime, nullable=False),
    Column("finished_at", UTCDateTime, nullable=False),
    Column("actor", String(128)),
    Index("ix_gate_runs_issue_commit", "issue_id", "commit_sha"),
)

# The branch an issue's work is on (migration 0011_gitflow_issue_branches): linked by
# ``start_work_on_issue`` or ``link_issue_to_branch``. ``checkout`` is the work tree it is
# checked out in; ``merge_commit`` is recorded before a merge moves the default branch (so a
# rerun after a crash finishes instead of merging twice).
issue_branches = Table(
    "issue_branches",
    metadata,
    Column("issue_id", ForeignKey("issues.id", ondelete="CASCADE"), primary_key=True),
    Column("number", Integer, nullable=False),
    Column("branch", String(255), nullable=False),
    Column("checkout", Text, nullable=False),
    Column("base_commit", String(64)),
    Column("merge_commit", String(64)),
    Column("linked_by", String(128)),
    Column("linked_at", UTCDateTime, nullable=False),
    Index("ix_issue_branches_branch", "branch"),
)

# The live server acting under a run id (migration 0012_run_bindings): a lease it renews
# with its claims, so that two servers started with one run id do not both act on its
# claims (services/queue/run_ids.py). ``server`` is host:pid:nonce.
run_bindings = Table(
    "run_bindings",
    metadata,
    Column("run_id", String(128), primary_key=True),
    Column("server", String(200), nullable=False),
    Column("bound_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),
    Index("ix_run_bindings_server", "server"),
)


# Telling people (migration 0016_notices).

# Where notices go: a webhook (``target`` is its URL) or a local command (``target`` is its
# argv as JSON). ``events`` is the comma-separated notice events it takes. A webhook's
# signing secret is never stored: ``secret_env`` names the variable the delivering process
# reads it from.
notify_sinks = Table(
    "notify_sinks",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("name", String(64), nullable=False, unique=True),
    Column("kind", String(16), nullable=False),  # webhook | command
    Column("target", Text, nullable=False),
    Column("secret_env", String(128)),
    Column("events", Text, nullable=False),
    Column("created_by", String(128)),
    Column("created_at", UTCDateTime, nullable=False),
)

# The notice outbox: one row per sink per event, written in the event's transaction and
# delivered at least once (``delivery_id`` lets a receiver drop a repeat). ``state``:
# pending, delivered, failed (the retries ran out). A deliverer holds a row until
# ``lease_until`` (a killed one's row is taken again when it lapses).
notices = Table(
    "notices",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("sink_id", ForeignKey("notify_sinks.id", ondelete="CASCADE"), nullable=False),
    Column("event_id", Integer, nullable=False),
    Column("event", String(32), nullable=False),
    Column("number", Integer),
    Column("delivery_id", String(36), nullable=False, unique=True),
    Column("state", String(16), nullable=False),
    Column("attempts", Integer, nullable=False, default=0),
    Column("next_attempt_at", UTCDateTime, nullable=False),
    Column("holder", String(200)),
    Column("lease_until", UTCDateTime),
    Column("last_error", Text),
    Column("created_at", UTCDateTime, nullable=False),
    Column("delivered_at", UTCDateTime),
    UniqueConstraint("sink_id", "event_id"),
    Index("ix_notices_state", "state", "next_attempt_at"),
)

# Queue-wide policies (``scope`` empty) and a repository's own (``scope`` is its name):
# when a claim counts as stalled and what follows, how many landing rounds an issue gets
# (domain/policies.py names them and their defaults).
policies = Table(
    "policies",
    metadata,
    Column("scope", String(64), primary_key=True),
    Column("name", String(64), primary_key=True),
    Column("value", String(64), nullable=False),
    Column("set_by", String(128)),
    Column("set_at", UTCDateTime, nullable=False),
)

# Tool calls answered later (migration 0017_tasks): the MCP Tasks extension
# (services/tasks). ``id`` is the unguessable task id a client polls with; ``owner`` the
# caller it belongs to (its run id: another caller is told no such task exists); ``kind``
# which tool call it stands for, with its ``arguments`` (JSON). ``result`` (JSON) is the
# tool's answer once ``status`` is completed, ``error`` (JSON) a JSON-RPC error once it
# failed. A claim made for the task is ``number`` at ``fence``, in the claim's own
# transaction; ``read_at`` says a client read it; ``released`` that a claim nobody read
# (or a cancelled one) went back to the queue. ``deadline``: when a wait ends.
tasks = Table(
    "tasks",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("owner", String(200), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("arguments", Text, nullable=False),
    Column("status", String(16), nullable=False),
    Column("status_message", Text),
    Column("result", Text),
    Column("error", Text),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("ttl_ms", BigInteger),
    Column("poll_interval_ms", Integer, nullable=False),
    Column("deadline", UTCDateTime),
    Column("number", Integer),
    Column("fence", Integer),
    Column("read_at", UTCDateTime),
    Column("released", Boolean, nullable=False, default=False, server_default=text("false")),
    Index("ix_tasks_status", "status", "kind", "created_at"),
)
