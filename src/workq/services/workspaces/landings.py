"""Landing through pull requests: the record of an issue's work on its way to a protected
default branch, for a repository registered with ``land="pr"``.

pr_landings.py checks and queues a landing (``queue``: the holder's authority,
asked again in the transaction that writes the row), and answers at once. The GitHub worker
then moves it (github/landing.py): push, open or find the pull request, wait for checks
and mergeability, merge, then ``pr_landings.finish_landing`` completes the issue and
cleans up.
Each step is recorded before (an intent) or after (an outcome) it runs, so a rerun after a
crash finishes the job: see the states in db/models.py's ``landings``. A refusal
(``refuse``) keeps what to repair (``failure``) and counts the issue's rounds, blocking it
for a person at ``max_landing_rounds``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Connection, and_, bindparam, exists, func, insert, select, update

from workq.db.engine import retry_lost_read
from workq.db.prepared import Prepared
from workq.db.tables import issues, landings, repositories
from workq.domain import fields
from workq.domain import landing_failures as failures
from workq.domain.authority import Authority
from workq.domain.decisions import Action
from workq.errors import NotFound, Step, WorkqError
from workq.schemas import REASON_MAX, CommentKind, LandingFailure, LandingStatus
from workq.services.handle import Queue, claim_ended, load, record
from workq.services.queue import blocking, door, notes, policies, predicates

# What the worker still has to move; "landed" and "refused" wait for nobody.
ACTIVE = ("queued", "open", "merging", "merged")
EVENT = "landing"
REFUSED_EVENT = "landing_refused"  # raises the landing_refused notice
log = logging.getLogger("workq.landings")


def _failure(stored: str | None) -> LandingFailure | None:
    if not stored:
        return None
    try:
        return LandingFailure.model_validate_json(stored)
    except ValidationError:  # written by a later workq, say: the detail still says why
        return None


def _status(row: Any) -> LandingStatus:
    return LandingStatus(
        number=row.number,
        repository=row.repository,
        branch=row.branch,
        state=row.state,
        detail=row.detail,
        head_sha=row.head_sha,
        pr_number=row.pr_number,
        pr_url=row.pr_url,
        merge_sha=row.merge_sha,
        requested_by=row.requested_by,
        updated_at=row.updated_at,
        rounds=row.rounds or 0,
        failure=_failure(row.failure) if row.state == "refused" else None,
    )


def _row(conn: Connection, issue_id: str) -> Any:
    return conn.execute(select(landings).where(landings.c.issue_id == issue_id)).first()


def queue(
    q: Queue,
    number: int,
    *,
    repo: str,
    branch: str,
    worktree_id: str | None,
    tip: str,
    by: Authority,
    actor: str | None,
) -> LandingStatus:
    """Queue issue ``number``'s ``branch`` (at ``tip``) to land through a pull request, on
    the authority of its holder (the door, ``queue-landing``: its live claim, not while it
    waits on unfinished issues or plans). Asked again with a new tip, the landing goes
    back to the queue with it (its pull request is reused); asked again with the same tip
    while it moves, it is answered as it stands.

    Raises:
        NotHolder, StaleClaim, LeaseLapsed, OpenBlockers, PlanModeActive: the door's
            refusal.
    """
    fields.number(number)

    def work(conn: Connection) -> LandingStatus:
        let = door.admit(q, conn, Action.QUEUE_LANDING, number, by)
        row, now, holder = let.row, let.now, let.holder
        current = _row(conn, row.id)
        if current is not None and current.state in ACTIVE and current.head_sha == tip:
            return _status(current)
        if current is not None and current.state in ("merging", "merged"):
            return _status(current)  # GitHub may be merging the old tip: let it finish
        values = {
            "repository": repo,
            "branch": branch,
            "worktree_id": worktree_id,
            "requested_by": holder,
            "fence": row.fence,
            "head_sha": tip,
            "state": "queued",
            "detail": None,
            "failure": None,  # the refusal it answers; ``rounds`` is kept
            "merge_sha": None,
            "attempts": 0,
            "next_attempt_at": now,
            "updated_at": now,
        }
        if current is None:
            conn.execute(
                insert(landings).values(issue_id=row.id, number=number, created_at=now, **values)
            )
        else:  # the pull request (if one was opened) is kept: the new tip is pushed to it
            conn.execute(update(landings).where(landings.c.issue_id == row.id).values(**values))
        after = {"state": "queued", "branch": branch, "head": tip, "repository": repo}
        record(
            q, conn, kind=EVENT, issue_id=row.id, number=number, actor=actor, now=now, after=after
        )
        found = _row(conn, row.id)
        return _status(found)

    return q.db.write(work)


# Asked by every issue_get: prepared (db/prepared.py), one statement.
_of_number = Prepared(select(landings).where(landings.c.number == bindparam("number")))


@retry_lost_read
def get(q: Queue, number: int) -> LandingStatus | None:
    """Issue ``number``'s landing, or None when it never asked to land through a pull
    request."""
    with q.db.read() as conn:
        found = _of_number.rows(conn, {"number": fields.number(number)})
    return _status(found[0]) if found else None


def status_in(conn: Connection, number: int) -> LandingStatus | None:
    """``get`` in the caller's read."""
    found = _of_number.rows(conn, {"number": fields.number(number)})
    return _status(found[0]) if found else None


def require(q: Queue, number: int) -> LandingStatus:
    """Issue ``number``'s landing, or NotFound."""
    found = get(q, number)
    if found is None:
        raise NotFound(
            f"Issue #{number} has no landing through a pull request",
            number=number,
            hint=("land it with ", Step.MERGE, " in a repository registered with --land pr"),
        )
    return found


class Due:
    """A landing the worker moves now, with its repository's settings."""

    def __init__(self, row: Any) -> None:
        self.issue_id: str = row.issue_id
        self.number: int = row.number
        self.repository: str = row.repository
        self.worktree_id: str | None = row.worktree_id
        self.branch: str = row.branch
        self.requested_by: str | None = row.requested_by
        self.fence: int = row.fence
        self.head_sha: str = row.head_sha
        self.state: str = row.state
        self.pr_number: int | None = row.pr_number
        self.pr_url: str | None = row.pr_url
        self.merge_sha: str | None = row.merge_sha
        self.attempts: int = row.attempts
        self.root: str = row.path
        self.default_branch: str = row.default_branch
        self.merge_mode: str = row.merge_mode
        self.on_refused: str = row.on_refused
        self.update_branch: bool = bool(row.update_branch)


@retry_lost_read
def due(q: Queue, github_repo: str, *, limit: int = 50) -> Sequence[Due]:
    """The landings into GitHub repository ``github_repo`` whose next step is due, oldest
    first."""
    with q.db.read() as conn:
        rows = conn.execute(
            select(
                landings,
                repositories.c.path,
                repositories.c.default_branch,
                repositories.c.merge_mode,
                repositories.c.on_refused,
                repositories.c.update_branch,
            )
            .join(repositories, repositories.c.name == landings.c.repository)
            .where(
                func.lower(repositories.c.github_repo) == github_repo.lower(),
                landings.c.state.in_(ACTIVE),
                landings.c.next_attempt_at <= q.now(),
            )
            .order_by(landings.c.created_at)
            .limit(limit)
        ).all()
    return [Due(r) for r in rows]


def move(
    q: Queue,
    item: Due,
    state: str,
    *,
    detail: str | None = None,
    retry_in: float | None = None,
    count_attempt: bool = False,
    actor: str | None = None,
    **changes: Any,
) -> bool:
    """Move ``item`` from the state it was read in to ``state`` (with ``changes``), the
    next step due in ``retry_in`` seconds (now when None). False when it had moved
    meanwhile (a new tip queued by its holder): the caller drops it. A change of state is
    recorded in the issue's history; waiting in one is not."""

    def work(conn: Connection) -> bool:
        now = q.now()
        values: dict[str, Any] = {
            "state": state,
            "detail": detail,
            "updated_at": now,
            "next_attempt_at": now + timedelta(seconds=retry_in or 0),
            "attempts": (
                landings.c.attempts + 1
                if count_attempt
                else (landings.c.attempts if state == item.state else 0)
            ),
            **changes,
        }
        moved = conn.execute(
            update(landings)
            .where(
                landings.c.issue_id == item.issue_id,
                landings.c.state == item.state,
                landings.c.head_sha == item.head_sha,
            )
            .values(**values)
        ).rowcount
        if moved and (state != item.state or changes.get("pr_number")):
            after = {"state": state, "detail": detail, **changes}
            record(
                q,
                conn,
                kind=EVENT,
                issue_id=item.issue_id,
                number=item.number,
                actor=actor,
                now=now,
                before={"state": item.state},
                after=after,
            )
        return bool(moved)

    if q.db.write(work):
        item.state = state
        for key, value in changes.items():
            setattr(item, key, value)
        return True
    return False


def asker(item: Due) -> Authority:
    """The claim that asked to land ``item``: its holder, with that claim's fence."""
    asked = () if item.requested_by is None else (item.requested_by,)
    return Authority.of(asked, fence=item.fence)


def keep_leases(q: Queue, github_repo: str) -> int:
    """Extend the leases of the claims whose work waits in the landing queue (the agent
    went on to other work, or ended): while its landing moves, nobody else may take the
    issue. Only live leases of the very claim that asked. A read first: no write while
    nothing waits (the worker asks every few seconds)."""
    waiting = and_(
        landings.c.issue_id == issues.c.id,
        landings.c.state.in_(ACTIVE),
        landings.c.fence == issues.c.fence,
        landings.c.requested_by == issues.c.claimed_by,
        repositories.c.name == landings.c.repository,
        func.lower(repositories.c.github_repo) == github_repo.lower(),
    )
    with q.db.read() as conn:
        if conn.execute(select(exists().where(waiting))).scalar() is not True:
            return 0

    def work(conn: Connection) -> int:
        now = q.now()
        return int(
            conn.execute(
                update(issues)
                .where(exists().where(waiting), predicates.claim_live(now))
                .values(lease_expires_at=q.lease_until(now))
            ).rowcount
        )

    return q.db.write(work)


def refuse(
    q: Queue,
    item: Due,
    why: str,
    found: LandingFailure | None = None,
    *,
    actor: str,
) -> LandingFailure | None:
    """Refuse ``item`` (read in the state it is in) because ``why``, with what was ``found``
    on GitHub (the failing checks, the requested changes), in one transaction: the landing
    refused with its failure and one more round, its history (``landing`` and the
    ``landing_refused`` event, which raises that notice), the issue blocked when this round
    reaches ``max_landing_rounds`` (a person is needed) or its repository blocks on a refusal
    (``on_refused``), and the failure posted on the issue as a comment. The failure as
    stored; None when the landing had moved meanwhile (a new tip queued): nothing changed.
    A block the door refuses (the issue done, or claimed again since) is left out."""
    reason = failures.line(why, failures.REASON_LIMIT) or "refused"
    ended: list[str] = []  # the holder whose claim the block ended

    def work(conn: Connection) -> LandingFailure | None:
        ended.clear()
        now = q.now()
        current = conn.execute(
            select(landings.c.rounds, landings.c.pr_number, landings.c.pr_url)
            .where(*_as_read(item))
            .with_for_update()
        ).first()
        if current is None:
            return None
        rounds = (current.rounds or 0) + 1
        cap = policies.count(conn, "max_landing_rounds", item.repository)
        failure = (found or LandingFailure(reason=reason, head_sha=item.head_sha)).model_copy(
            update={
                "reason": reason,
                "round": rounds,
                "max_rounds": cap,
                "pr_number": current.pr_number,
                "pr_url": current.pr_url,
            }
        )
        conn.execute(
            update(landings)
            .where(*_as_read(item))
            .values(
                state="refused",
                detail=reason,
                rounds=rounds,
                attempts=0,
                updated_at=now,
                next_attempt_at=now,
            )
        )
        _record_refusal(q, conn, item, failure, actor=actor, now=now)
        if rounds >= cap or item.on_refused == "block":
            holder = _block(q, conn, item, failure, actor)
            failure = failure.model_copy(update={"blocked": holder is not False})
            if isinstance(holder, str):
                ended.append(holder)
        conn.execute(
            update(landings)
            .where(landings.c.issue_id == item.issue_id)
            .values(failure=failure.model_dump_json())
        )
        text = fields.comment(failures.comment(failure))
        row = load(conn, item.number, for_update=True)
        notes.add(q, conn, row, text, kind=CommentKind.BLOCKER, author=actor)
        return failure

    refused = q.db.write(work)
    for holder in ended:  # its work is saved for the next agent (workspaces/handoff.py)
        claim_ended(q, item.number, "blocked", holder)
    return refused


def _as_read(item: Due) -> tuple[Any, ...]:
    """The landing of ``item`` as the worker read it: not moved since (a new tip queued)."""
    return (
        landings.c.issue_id == item.issue_id,
        landings.c.state == item.state,
        landings.c.head_sha == item.head_sha,
    )


def _block(
    q: Queue, conn: Connection, item: Due, failure: LandingFailure, actor: str
) -> str | bool:
    """Block the issue for ``failure`` in the caller's transaction: the holder of the claim
    it ended (True: none); False when the door refuses (nothing written)."""
    if failure.round >= failure.max_rounds:
        why = failures.block_reason(failure)
    else:
        why = failures.line(f"Landing refused: {failure.reason}", REASON_MAX) or "refused"
    upstream = Authority.overriding("its landing was refused", who=actor, fence=item.fence)
    try:
        holder = blocking.block_in(
            q, conn, item.number, fields.reason(why), by=upstream, actor=actor
        )
    except WorkqError as exc:  # the issue moved on meanwhile (done, claimed again)
        log.info("landing #%d: not blocked: %s", item.number, exc.message)
        return False
    return holder if holder is not None else True


def _record_refusal(
    q: Queue, conn: Connection, item: Due, failure: LandingFailure, *, actor: str, now: Any
) -> None:
    common = {"issue_id": item.issue_id, "number": item.number, "actor": actor, "now": now}
    record(
        q,
        conn,
        kind=EVENT,
        before={"state": item.state},
        after={"state": "refused", "detail": failure.reason},
        **common,
    )
    checks = [{"name": c.name, "conclusion": c.conclusion} for c in failure.checks]
    record(
        q,
        conn,
        kind=REFUSED_EVENT,
        after={
            "reason": failure.reason,
            "pr_number": failure.pr_number,
            "pr_url": failure.pr_url,
            "round": failure.round,
            "max_rounds": failure.max_rounds,
            "checks": checks,
            "holder": item.requested_by,
        },
        **common,
    )
