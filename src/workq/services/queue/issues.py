"""Issues: create, read, list, update, label, reopen and delete."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, delete, insert, select, update

from workq.db.engine import retry_lost_read
from workq.db.prepared import Prepared
from workq.db.tables import counters, issues
from workq.db.tables import dependencies as deps
from workq.db.tables import labels as labels_t
from workq.db.tables import touches as touches_t
from workq.domain import fields, globs, names
from workq.domain.authority import Authority
from workq.domain.decisions import Action
from workq.errors import InvalidInput, InvalidTransition
from workq.schemas import (
    Issue,
    IssueType,
    Priority,
    Status,
)
from workq.services.handle import Queue, load, new_id, record, to_issue
from workq.services.queue import blockers, door, placement, progress

COUNTER = "issue_number"
DEFAULT_AGENT = "claude"

_next_number = (
    update(counters)
    .where(counters.c.name == COUNTER)
    .values(value=counters.c.value + 1)
    .returning(counters.c.value)
)


def next_number(conn: Connection) -> int:
    """Take the next issue number from the counter row, in the caller's transaction."""
    value = conn.execute(_next_number).scalar()
    if value is None:
        highest = conn.execute(select(issues.c.number).order_by(issues.c.number.desc())).scalar()
        value = (highest or 0) + 1
        conn.execute(insert(counters).values(name=COUNTER, value=value))
    return int(value)


def format_description(
    description: str | None,
    *,
    title: str,
    context: str | None = None,
    acceptance_criteria: Sequence[str] | None = None,
    technical_notes: str | None = None,
) -> str:
    """Contract B's issue template, used when structured context is given."""
    if not (context or acceptance_criteria or technical_notes):
        return description or ""
    parts = [f"## Summary\n{description.strip() if description else title}"]
    if context:
        parts.append(f"## Context\n{context.strip()}")
    if acceptance_criteria:
        parts.append(
            "## Acceptance Criteria\n"
            + "\n".join(f"- [ ] {c.strip()}" for c in acceptance_criteria)
        )
    if technical_notes:
        parts.append(f"## Technical Notes\n{technical_notes.strip()}")
    return "\n\n".join(parts) + "\n"


def insert_issue(
    q: Queue,
    conn: Connection,
    *,
    title: str,
    description: str,
    priority: Priority,
    issue_type: IssueType,
    agent: str,
    labels: Sequence[str],
    actor: str | None,
    now: datetime,
    done: bool = False,
    touches: Sequence[str] = (),
    about: Mapping[str, Any] | None = None,
) -> tuple[str, int]:
    """The one way an issue comes to be, in the caller's transaction: the row with the next
    number, its labels, the paths it touches, and its ``created`` event (which feeds the
    outbox). The values must be valid already (``domain.fields``, ``domain.globs``);
    ``about`` adds facts to the event (the plan it came from, the GitHub issue). Returns
    the new issue's id and number."""
    issue_id, number = new_id(), next_number(conn)
    status = Status.DONE if done else Status.OPEN
    values = {
        "title": title,
        "description": description,
        "priority": priority.rank,
        "issue_type": issue_type.value,
        "agent": agent,
    }
    _insert.count(
        conn,
        {
            **values,
            "id": issue_id,
            "number": number,
            "status": status.value,
            "now": now,
            "closed_at": now if done else None,
        },
    )
    for name in labels:
        _insert_label.count(conn, {"issue_id": issue_id, "name": name})
    if touches:
        _set_touches(conn, issue_id, touches)
    after = {
        **values,
        "priority": priority.value,
        "labels": list(labels),
        **({"touches": list(touches)} if touches else {}),
        **(about or {}),
    }
    record(
        q,
        conn,
        kind="created",
        issue_id=issue_id,
        number=number,
        actor=actor,
        now=now,
        after=after,
    )
    return issue_id, number


_insert = Prepared(
    insert(issues).values(
        id=bindparam("id"),
        number=bindparam("number"),
        title=bindparam("title"),
        description=bindparam("description"),
        status=bindparam("status"),
        priority=bindparam("priority"),
        issue_type=bindparam("issue_type"),
        agent=bindparam("agent"),
        is_blocked=False,
        blocked_reason=None,
        open_blockers=0,
        created_at=bindparam("now"),
        updated_at=bindparam("now"),
        closed_at=bindparam("closed_at"),
        fence=0,
    )
)
_insert_label = Prepared(
    insert(labels_t).values(issue_id=bindparam("issue_id"), name=bindparam("name"))
)


def create(
    q: Queue,
    *,
    title: str,
    description: str | None = None,
    priority: str | Priority = Priority.MEDIUM,
    issue_type: str | IssueType = IssueType.TASK,
    agent: str | None = None,
    labels: Sequence[str] = (),
    touches: Sequence[str] = (),
    actor: str | None = None,
    context: str | None = None,
    acceptance_criteria: Sequence[str] | None = None,
    technical_notes: str | None = None,
    repository: str | None = None,
) -> Issue:
    """Create an issue. With ``context``, ``acceptance_criteria`` or ``technical_notes`` the
    description follows the issue template (:func:`format_description`); with
    ``repository`` it belongs to that registered repository from the start (NOT_FOUND, and
    nothing created, for a name no repository has)."""
    checked_title = fields.title(title)
    checked_description = fields.description(
        format_description(
            description,
            title=title,
            context=context,
            acceptance_criteria=acceptance_criteria,
            technical_notes=technical_notes,
        )
    )
    rank = fields.priority(priority)
    kind = fields.issue_type(issue_type)
    owner = fields.agent(agent) if agent else DEFAULT_AGENT
    label_names = fields.labels(labels)
    paths = globs.globs(touches)
    if repository is not None:
        names.repository_name(repository)

    def work(conn: Connection) -> Issue:
        _, number = insert_issue(
            q,
            conn,
            title=checked_title,
            description=checked_description,
            priority=rank,
            issue_type=kind,
            agent=owner,
            labels=label_names,
            actor=actor,
            now=q.now(),
            touches=paths,
        )
        if repository is not None:
            placement.place(q, conn, number, repository, actor=actor)
        return to_issue(load(conn, number), labels=label_names, touches=paths)

    return q.db.write(work)


_touches = Prepared(
    select(touches_t.c.glob)
    .where(touches_t.c.issue_id == bindparam("issue_id"))
    .order_by(touches_t.c.position)
)


def touches_of(conn: Connection, issue_id: str) -> list[str]:
    return [r.glob for r in _touches.rows(conn, {"issue_id": issue_id})]


def _set_touches(conn: Connection, issue_id: str, paths: Sequence[str]) -> None:
    conn.execute(delete(touches_t).where(touches_t.c.issue_id == issue_id))
    if paths:
        conn.execute(
            insert(touches_t),
            [{"issue_id": issue_id, "position": i, "glob": g} for i, g in enumerate(paths)],
        )


def _labels_of(conn: Connection, issue_id: str) -> list[str]:
    rows = conn.execute(
        select(labels_t.c.name).where(labels_t.c.issue_id == issue_id).order_by(labels_t.c.name)
    )
    return [r[0] for r in rows]


_blocker = issues.alias("blocker")
_blocked_by = Prepared(
    select(_blocker.c.number)
    .join(deps, deps.c.blocker_id == _blocker.c.id)
    .where(deps.c.blocked_id == bindparam("issue_id"))
    .order_by(_blocker.c.number)
)
_blocks = Prepared(
    select(issues.c.number)
    .join(deps, deps.c.blocked_id == issues.c.id)
    .where(deps.c.blocker_id == bindparam("issue_id"))
    .order_by(issues.c.number)
)
_labels = Prepared(
    select(labels_t.c.name)
    .where(labels_t.c.issue_id == bindparam("issue_id"))
    .order_by(labels_t.c.name)
)


def detail(conn: Connection, number: int) -> Issue:
    """Issue ``number`` in full (labels, blockers, touches), read in the caller's transaction."""
    row = load(conn, number)
    ids = {"issue_id": row.id}
    issue = to_issue(
        row,
        labels=[r.name for r in _labels.rows(conn, ids)],
        blocked_by=[r.number for r in _blocked_by.rows(conn, ids)],
        blocks=[r.number for r in _blocks.rows(conn, ids)],
        touches=touches_of(conn, row.id),
    )
    return issue


@retry_lost_read
def get(q: Queue, number: int) -> Issue:
    """Issue ``number`` in full; while its live claim is stalled, since when."""
    fields.number(number)
    with q.db.read() as conn:
        found = detail(conn, number)
        if found.claimed_by is None:
            return found
        held = progress.of_issue(conn, number, q.now())
    if held is None or not held.stalled(q.now()):
        return found
    return found.model_copy(update={"stalled_since": held.stalled_since})


@retry_lost_read
def waits_on(q: Queue, number: int) -> list[int]:
    """The numbers of the unfinished issues issue ``number`` waits on (of its blockers,
    those not done)."""
    fields.number(number)
    with q.db.read() as conn:
        return blockers.waits_on(conn, load(conn, number))


def _checked(
    title: str | None,
    description: str | None,
    priority: str | Priority | None,
    issue_type: str | IssueType | None,
    agent: str | None,
) -> dict[str, Any]:
    """The column values of the fields given, each checked."""
    changes: dict[str, Any] = {}
    if title is not None:
        changes["title"] = fields.title(title)
    if description is not None:
        changes["description"] = fields.description(description)
    if priority is not None:
        changes["priority"] = fields.priority(priority).rank
    if issue_type is not None:
        changes["issue_type"] = fields.issue_type(issue_type).value
    if agent is not None:
        changes["agent"] = fields.agent(agent)
    return changes


def _relabel(
    conn: Connection, issue_id: str, adding: Sequence[str], removing: Sequence[str]
) -> dict[str, list[str]]:
    """Add and remove labels; what changed, as the event records it."""
    current = set(_labels_of(conn, issue_id))
    added = sorted(set(adding) - current)
    removed = sorted(set(removing) & current)
    if len(current | set(added)) - len(removed) > 32:
        raise InvalidInput("at most 32 labels per issue", field="labels")
    changed: dict[str, list[str]] = {}
    if added:
        conn.execute(insert(labels_t), [{"issue_id": issue_id, "name": n} for n in added])
        changed["labels_added"] = added
    if removed:
        conn.execute(
            delete(labels_t).where(labels_t.c.issue_id == issue_id, labels_t.c.name.in_(removed))
        )
        changed["labels_removed"] = removed
    return changed


def update_issue(
    q: Queue,
    number: int,
    *,
    title: str | None = None,
    description: str | None = None,
    priority: str | Priority | None = None,
    issue_type: str | IssueType | None = None,
    agent: str | None = None,
    add_labels: Sequence[str] = (),
    remove_labels: Sequence[str] = (),
    touches: Sequence[str] | None = None,
    repository: str | None = None,
    by: Authority,
    actor: str | None = None,
) -> Issue:
    """``touches``: the issue's path globs, all of them (an empty list clears them);
    ``repository``: the registered repository the issue belongs to from now on. Those two
    are what a claim's reservations and worktree hang on: while another caller holds a
    live claim, only its holder or an override changes them (domain/decisions.py,
    ``reshape``); the other fields anyone may edit."""
    fields.number(number)
    changes = _checked(title, description, priority, issue_type, agent)
    adding = fields.labels(add_labels)
    removing = fields.labels(remove_labels)
    paths = None if touches is None else globs.globs(touches)
    if repository is not None:
        names.repository_name(repository)
    if not changes and not adding and not removing and paths is None and repository is None:
        raise InvalidInput(
            "nothing to change: give at least one field to update",
            hint=(
                "pass title, description, priority, type, agent, touches, repository,"
                " or labels to add or remove"
            ),
            number=number,
        )

    action = Action.EDIT if paths is None and repository is None else Action.RESHAPE

    def work(conn: Connection) -> Issue:
        let = door.admit(q, conn, action, number, by)
        row, now = let.row, let.now
        if repository is not None:
            placement.place(q, conn, number, repository, actor=actor)
        before = {k: getattr(row, k) for k in changes if getattr(row, k) != changes[k]}
        after = {k: changes[k] for k in before}
        after.update(_relabel(conn, row.id, adding, removing))
        if paths is not None:
            now_touching = touches_of(conn, row.id)
            if paths != now_touching:
                _set_touches(conn, row.id, paths)
                before["touches"] = now_touching
                after["touches"] = paths
        if after:
            conn.execute(
                update(issues).where(issues.c.id == row.id).values(**changes, updated_at=now)
            )
            record(
                q,
                conn,
                kind="updated",
                issue_id=row.id,
                number=number,
                actor=actor,
                now=now,
                before=_readable(before),
                after=_readable(after),
            )
        return detail(conn, number)

    return q.db.write(work)


def _readable(values: dict[str, Any]) -> dict[str, Any]:
    if "priority" in values:
        values = {**values, "priority": Priority.from_rank(values["priority"]).value}
    return values


def reopen(q: Queue, number: int, *, actor: str | None = None) -> Issue:
    """Bring a done issue back to open; the issues it blocks wait for it again."""
    fields.number(number)

    def work(conn: Connection) -> Issue:
        row = load(conn, number, for_update=True)
        if row.status != Status.DONE.value:
            raise InvalidTransition(
                f"Issue #{number} is {row.status}, not done", hint="only done issues reopen"
            )
        now = q.now()
        conn.execute(
            update(issues)
            .where(issues.c.id == row.id)
            .values(status=Status.OPEN.value, closed_at=None, updated_at=now)
        )
        blockers.blocker_reopened(conn, row.id)
        record(
            q,
            conn,
            kind="reopened",
            issue_id=row.id,
            number=number,
            actor=actor,
            now=now,
            before={"status": row.status},
            after={"status": Status.OPEN.value},
        )
        return detail(conn, number)

    return q.db.write(work)


def delete_issue(q: Queue, number: int, *, by: Authority, actor: str | None = None) -> Issue:
    """Hard delete. Issues it blocked stop waiting for it. Its history stays. An issue
    another caller holds a live claim on only its holder or an override deletes."""
    fields.number(number)

    def work(conn: Connection) -> Issue:
        let = door.admit(q, conn, Action.DELETE, number, by)  # locks: a complete counts once
        gone = detail(conn, number)
        if gone.status != Status.DONE:
            blockers.blocker_finished(conn, gone.id)  # nobody waits for it any more
        conn.execute(delete(issues).where(issues.c.id == gone.id))
        record(
            q,
            conn,
            kind="deleted",
            issue_id=gone.id,
            number=number,
            actor=actor,
            now=let.now,
            before=gone.model_dump(mode="json", exclude={"id"}),
            after=by.recorded() if let.overridden else None,
        )
        return gone

    return q.db.write(work)
