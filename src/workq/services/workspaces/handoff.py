"""The hand-off: when a claim ends without completing (released, blocked, its lapsed lease
taken over, forced, released for a stall), the work its worktree holds that the default
branch lacks is saved, and the next claim of the issue is told what it left.

Saving touches nothing the agent works with: commits stay on their branch, and the
uncommitted edits (tracked and untracked, not ignored) are committed through a temporary
index onto the worktree's HEAD, the commit kept by a ref ``refs/workq/saved/<number>/<n>``.
The worktree, its index and HEAD are left as they were, and nothing is deleted. Each save
is an audit event (``work_saved``), which raises the ``work_left`` notice.

The queue calls :func:`save` through its ``ended`` hooks (:func:`install`), after the change
that ended the claim has committed; the stall watcher calls it for a lapsed lease and
before it releases a stalled claim. As in worktrees.py, git never runs inside a database
transaction: each function reads what it needs, asks git, then writes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, bindparam, select

from workq.db.engine import retry_lost_read
from workq.db.prepared import Prepared
from workq.db.tables import comments, events, gate_runs
from workq.domain import fields
from workq.errors import GitFailed, GitMissing, InvalidInput, NotFound
from workq.schemas import (
    Attempt,
    BriefGate,
    Briefing,
    BriefNote,
    CommentKind,
    Event,
    SavedWork,
)
from workq.services.handle import Queue, load, record
from workq.services.workspaces import worktrees
from workq.services.workspaces.repositories import row as repository_row
from workq.vcs import git

WORK_SAVED = "work_saved"
SAVED_REFS = "refs/workq/saved"
# What an event and a briefing keep: commits' subjects, changed files, the newest notes.
COMMITS_KEPT = 20
SUBJECT_CHARS = 200
FILES_KEPT = 50
NOTES_KEPT = 3
NOTE_CHARS = 500
# How far back in an issue's history a briefing looks for the claim before this one.
EVENTS_READ = 200
# Saving a ref when another save took the same number meanwhile: tries.
REF_TRIES = 5

# The events that start a claim.
CLAIM_STARTS = frozenset({"claimed", "claim_takeover", "force_claimed"})
# The events that end a claim without completing it, and the word a briefing uses.
ENDINGS = {
    "released": "released",
    "blocked": "blocked",
    "stall_released": "stall_released",
    "lease_lapsed": "lapsed",
}
# The word for a claim that ended because the next one took it.
TAKEN = {"claim_takeover": "taken_over", "force_claimed": "forced"}
# How a claim can end without completing: the queue's ``ended`` hooks say the first four,
# the stall watcher the last two.
HOWS = frozenset({"released", "blocked", "taken_over", "forced", "lapsed", "stall_released"})


def restore_command(ref: str) -> str:
    """The command, run in a checkout, that brings the edits saved as ``ref`` back: the
    saved commit's change onto what is checked out (a three-way merge when HEAD moved on),
    left uncommitted. Files it deleted are deleted, new files come back staged."""
    return f"git cherry-pick --no-commit {ref}"


# --- saving ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Work:
    """What git says a worktree holds that the default branch lacks."""

    head: str
    branch: str | None
    base: str | None  # the default branch's full ref, when it exists
    commits: list[str]
    ahead: int
    tree: str | None  # the tree of its uncommitted edits; None: it has none


def _look(path: Path, default_branch: str) -> _Work | None:
    """The work in the worktree at ``path`` (None: nothing its default branch lacks)."""
    head = git.head(path)
    wanted = "refs/heads/" + default_branch
    base = wanted if git.resolve(path, wanted) is not None else None
    ahead = git.count_between(path, base, head) if base else 0
    commits = git.subjects(path, base, head, COMMITS_KEPT) if base and ahead else []
    tree = None
    if git.has_edits(path):
        made = git.edits_tree(path, head)
        if made != git.tree_of(path, head):
            tree = made
    if not ahead and tree is None:
        return None
    return _Work(
        head=head,
        branch=git.current_branch(path),
        base=base,
        commits=[s[:SUBJECT_CHARS] for s in commits],
        ahead=ahead,
        tree=tree,
    )


_last_saved = Prepared(
    select(events.c.after)
    .where(events.c.number == bindparam("number"), events.c.kind == WORK_SAVED)
    .order_by(events.c.id.desc())
    .limit(1)
)


def _keep(path: Path, number: int, commit: str) -> str:
    """A new ref ``refs/workq/saved/<number>/<n>`` at ``commit`` (n one past the highest)."""
    prefix = f"{SAVED_REFS}/{number}"
    for _ in range(REF_TRIES):
        taken = [ref.rsplit("/", 1)[-1] for ref in git.refs_under(path, prefix)]
        n = max((int(t) for t in taken if t.isdigit()), default=0) + 1
        ref = f"{prefix}/{n}"
        if git.create_ref(path, ref, commit):
            return ref
    raise GitFailed(f"could not make a ref under {prefix}: others kept taking it")


def save(
    q: Queue, number: int, *, how: str, holder: str | None, actor: str | None = None
) -> SavedWork | None:
    """Save the work issue ``number``'s active worktree holds that its repository's default
    branch lacks (commits ahead of it, uncommitted edits), after ``holder``'s claim ended
    ``how`` ("released", "blocked", "taken_over", "forced", "lapsed", "stall_released"):
    the edits as a commit onto HEAD kept by a ref under ``refs/workq/saved/<number>/``,
    with the worktree, its index and HEAD untouched, and an audit event ``work_saved``
    (recorded as ``actor``, else the holder). None, and no event, when there is nothing
    to save (no worktree, nothing ahead, nothing edited).

    The same holder's work saved again unchanged (a lapse noticed, then taken over) is the
    save made before: no second event. Another holder's unchanged edits keep their ref.

    Raises:
        InvalidInput: ``how`` is none of those.
        GitFailed, GitMissing: git could not read the worktree (the ``ended`` hook logs it).
    """
    fields.number(number)
    if how not in HOWS:
        raise InvalidInput(f"how must be one of {', '.join(sorted(HOWS))}", field="how")
    with q.db.read() as conn:
        w = worktrees.active_row(conn, number)
        if w is None or w.state != "active":
            return None
        r = repository_row(conn, w.repository)
        found = _last_saved.rows(conn, {"number": number})
    path = Path(w.path)
    if not path.is_dir():
        return None
    work = _look(path, r.default_branch)
    if work is None:
        return None
    last: dict[str, Any] = json.loads(found[0].after or "{}") if found else {}
    same = (
        last.get("worktree_id") == w.id
        and last.get("head") == work.head
        and last.get("edits_tree") == work.tree
    )
    if same and last.get("holder") == holder:
        return _saved(number, last)
    edits_commit = None
    edits_ref = None
    if work.tree is not None:
        kept = last.get("edits_ref") if same else None
        if kept and git.resolve(path, kept) == last.get("edits_commit"):
            edits_ref, edits_commit = kept, last.get("edits_commit")
        else:
            message = f"workq: uncommitted edits of issue #{number} ({how}, held by {holder})\n"
            edits_commit = git.commit_tree(path, work.tree, [work.head], message)
            edits_ref = _keep(path, number, edits_commit)
    tip = edits_commit or work.head
    files = git.files_between(path, work.base or work.head, tip)
    after = {
        "how": how,
        "holder": holder,
        "branch": work.branch,
        "worktree": w.path,
        "worktree_id": w.id,
        "head": work.head,
        "commits": work.commits,
        "commits_ahead": work.ahead,
        "edits_ref": edits_ref,
        "edits_commit": edits_commit,
        "edits_tree": work.tree,
        "files_changed": files[:FILES_KEPT],
    }

    def write(conn: Connection) -> None:
        record(
            q,
            conn,
            kind=WORK_SAVED,
            issue_id=w.issue_id,
            number=number,
            actor=actor or holder,
            now=q.now(),
            after=after,
        )

    q.db.write(write)
    return _saved(number, after)


def _saved(number: int, after: dict[str, Any]) -> SavedWork:
    return SavedWork(
        number=number,
        how=after.get("how") or "",
        holder=after.get("holder"),
        worktree=after.get("worktree") or "",
        branch=after.get("branch"),
        head=after.get("head") or "",
        commits=after.get("commits") or [],
        commits_ahead=after.get("commits_ahead") or 0,
        edits_ref=after.get("edits_ref"),
        files_changed=after.get("files_changed") or [],
    )


def on_ended(q: Queue, number: int, how: str, holder: str | None) -> None:
    """The queue's ``ended`` hook: save the work of the claim that ended."""
    save(q, number, how=how, holder=holder)


def install(q: Queue) -> None:
    """Have the queue save a claim's work whenever a claim ends without completing (once)."""
    if on_ended not in q.ended:
        q.ended.append(on_ended)


# --- briefing the next claim -----------------------------------------------------------------


@dataclass(frozen=True)
class _Ending:
    """How the claim before the newest one ended, from the issue's history."""

    holder: str | None
    how: str
    at: datetime
    reason: str | None
    since: datetime | None  # when the first claim read began (None: beyond the history read)
    saved: dict[str, Any] | None  # its newest work_saved event's record


def _after(row: Any) -> dict[str, Any]:
    return json.loads(row.after) if row.after else {}


def _before(row: Any) -> dict[str, Any]:
    return json.loads(row.before) if row.before else {}


def _how(current: Any, between: list[Any]) -> tuple[str | None, str, datetime, Any] | None:
    """How the claim before ``current`` (the newest claim's event) ended, from the events
    ``between`` the two claims (newest first): its holder, the word, when, and the event
    that ended it (None for a takeover without a recorded lapse). None: it completed."""
    ends = [e for e in reversed(between) if e.kind in ENDINGS or e.kind == "completed"]
    if current.kind in TAKEN:
        lapse = next((e for e in ends if e.kind == "lease_lapsed"), None)
        holder = _before(current).get("claimed_by")
        if lapse is not None:
            return holder, "lapsed", lapse.created_at, lapse
        return holder, TAKEN[current.kind], current.created_at, None
    stall = [e for e in ends if e.kind == "stall_released"]
    first = (stall or ends or [None])[0]
    if first is None or first.kind == "completed":
        return None
    holder = _before(first).get("claimed_by") or _after(first).get("holder")
    return holder, ENDINGS[first.kind], first.created_at, first


def _ending(rows: list[Any]) -> _Ending | None:
    """From ``rows`` (an issue's events, newest first): how the claim before the newest
    one ended, or None when there was none or it completed. What came before the issue's
    last completion is another story, and left out."""
    rows = rows[: next((k for k, e in enumerate(rows) if e.kind == "completed"), len(rows))]
    starts = [k for k, e in enumerate(rows) if e.kind in CLAIM_STARTS]
    if len(starts) < 1:
        return None
    start = rows[starts[1]] if len(starts) > 1 else None
    between = rows[starts[0] + 1 : starts[1] if start is not None else len(rows)]
    found = _how(rows[starts[0]], between)
    if found is None:
        return None
    holder, how, at, first = found
    if holder is None and start is not None:
        holder = start.actor
    said = _after(first) if first is not None else {}
    reason = said.get("reason") or said.get("blocked_reason")
    saves = [_after(e) for e in rows if e.kind == WORK_SAVED]
    saved = next((s for s in saves if s.get("holder") == holder), saves[0] if saves else None)
    return _Ending(
        holder=holder,
        how=how,
        at=at,
        reason=reason if isinstance(reason, str) else None,
        since=rows[starts[-1]].created_at if len(starts) > 1 else None,
        saved=saved,
    )


_history = Prepared(
    select(events.c.kind, events.c.actor, events.c.before, events.c.after, events.c.created_at)
    .where(events.c.number == bindparam("number"))
    .order_by(events.c.id.desc())
    .limit(EVENTS_READ)
)


def _gates(conn: Connection, issue_id: str) -> list[Any]:
    """The newest run of each gate of the issue."""
    rows = conn.execute(
        select(
            gate_runs.c.gate,
            gate_runs.c.gate_number,
            gate_runs.c.passed,
            gate_runs.c.commit_sha,
            gate_runs.c.finished_at,
        )
        .where(gate_runs.c.issue_id == issue_id)
        .order_by(gate_runs.c.id.desc())
        .limit(100)
    ).all()
    newest: dict[str, Any] = {}
    for row in rows:
        newest.setdefault(row.gate, row)
    return sorted(newest.values(), key=lambda g: (g.gate_number, g.gate))


def _notes(conn: Connection, issue_id: str) -> list[Any]:
    rows = conn.execute(
        select(comments)
        .where(comments.c.issue_id == issue_id)
        .order_by(comments.c.id.desc())
        .limit(NOTES_KEPT)
    ).all()
    return list(rows)[::-1]


@dataclass(frozen=True)
class _Read:
    ending: _Ending
    gates: list[Any]
    notes: list[Any]
    worktree: Any  # the active worktree's row, or None
    root: Path | None  # the repository's checkout
    default_branch: str | None


@retry_lost_read
def _read(q: Queue, number: int) -> _Read | None:
    with q.db.read() as conn:
        ending = _ending(_history.rows(conn, {"number": number}))
        if ending is None:
            return None
        issue = load(conn, number)
        w = worktrees.active_row(conn, number)
        if w is not None and w.state != "active":
            w = None
        name = w.repository if w is not None else issue.repository
        try:
            r = repository_row(conn, name) if name else None
        except NotFound:  # the repository was removed since
            r = None
        return _Read(
            ending=ending,
            gates=_gates(conn, issue.id),
            notes=_notes(conn, issue.id),
            worktree=w,
            root=Path(r.path) if r is not None else None,
            default_branch=r.default_branch if r is not None else None,
        )


@dataclass(frozen=True)
class _Live:
    """What git says now of the work's branch and saved edits."""

    branch: str | None
    commits: list[str]
    ahead: int
    edits_ref: str | None


def _live(read: _Read) -> _Live:
    """The branch the work is on now (the worktree's, else the saved one if git still has
    it), its commits ahead of the default branch, and the saved edits' ref if it is still
    there. git failing (a broken repository) leaves out what it could not say."""
    saved = read.ending.saved or {}
    w = read.worktree
    branch = w.branch if w is not None else saved.get("branch")
    ref = saved.get("edits_ref")
    if read.root is None or read.default_branch is None:
        return _Live(branch, [], 0, ref)
    try:
        if branch is not None and git.branch_tip(read.root, branch) is None:
            branch = None
        if ref is not None and git.resolve(read.root, ref) is None:
            ref = None
        base, tip = "refs/heads/" + read.default_branch, f"refs/heads/{branch}"
        if branch is None or git.resolve(read.root, base) is None:
            return _Live(branch, [], 0, ref)
        ahead = git.count_between(read.root, base, tip)
        commits = git.subjects(read.root, base, tip, COMMITS_KEPT) if ahead else []
    except (GitFailed, GitMissing, OSError):
        return _Live(branch, [], 0, ref)
    return _Live(branch, [s[:SUBJECT_CHARS] for s in commits], ahead, ref)


def _since(when: datetime, since: datetime | None) -> bool:
    return since is None or when >= since


def _left_something(read: _Read, live: _Live) -> bool:
    """Whether the claim before left anything to say: saved work, commits, a reason, gate
    runs or notes made while it held the issue."""
    e = read.ending
    return bool(
        e.saved
        or live.ahead
        or e.reason
        or any(_since(g.finished_at, e.since) for g in read.gates)
        or any(_since(n.created_at, e.since) for n in read.notes)
    )


def _where(read: _Read, live: _Live) -> tuple[str, bool, str | None]:
    """Where the work is, in words; whether the worktree still holds the saved edits; the
    command that brings them back when it does not."""
    saved = read.ending.saved or {}
    w = read.worktree
    ref = live.edits_ref
    kept = f", which keeps its {live.ahead} commit(s)" if live.ahead else ""
    if w is None:
        where = (
            f"No worktree now: the work is on branch {live.branch}{kept}"
            if live.branch
            else ("No worktree and no branch of it now")
        )
        if ref:
            where += f"; the uncommitted edits are saved as {ref}: in a checkout, run: "
            where += restore_command(ref)
        return where, False, restore_command(ref) if ref else None
    same = saved.get("worktree_id") == w.id and Path(w.path).is_dir()
    if same or not saved:
        where = f"In the worktree {w.path} on branch {w.branch}{kept}"
        if ref and same:
            where += f"; it still holds the uncommitted edits (also saved as {ref})"
            return where, True, None
    else:
        again = w.branch == saved.get("branch") and live.ahead
        where = (
            f"A new worktree {w.path} on branch {w.branch}"
            + (f", the saved branch{kept}" if again else "")
            + " (the earlier worktree was removed)"
        )
    if ref:
        where += f"; bring the saved edits back in it with: {restore_command(ref)}"
        return where, False, restore_command(ref)
    return where, False, None


def briefing(q: Queue, number: int) -> Briefing | None:
    """What the claim of issue ``number`` before the newest one left, for the newest one's
    holder: who held it, how and when it ended, the commits ahead of the default branch
    (read from git now), the newest run of each gate, the newest notes, and where the work
    is (the worktree, the branch, the saved edits and the command that brings them back).
    None when there was no such claim, when it completed, or when it left nothing."""
    read = _read(q, number)
    if read is None:
        return None
    live = _live(read)
    if not _left_something(read, live):
        return None
    where, in_worktree, restore = _where(read, live)
    e = read.ending
    return Briefing(
        previous_holder=e.holder,
        ended=e.how,
        ended_at=e.at,
        reason=e.reason,
        commits=live.commits,
        commits_ahead=live.ahead,
        gates=[
            BriefGate(gate=g.gate, passed=g.passed, commit=g.commit_sha, finished_at=g.finished_at)
            for g in read.gates
        ],
        notes=[
            BriefNote(
                kind=CommentKind(n.kind),
                author=n.author,
                body=_cut(n.body),
                created_at=n.created_at,
            )
            for n in read.notes
        ],
        worktree=read.worktree.path if read.worktree is not None else None,
        branch=live.branch,
        edits_ref=live.edits_ref,
        edits_in_worktree=in_worktree,
        restore=restore,
        where=where,
    )


def _cut(text: str) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= NOTE_CHARS else text[: NOTE_CHARS - 3] + "..."


# --- the attempts, from the history ----------------------------------------------------------


def attempts(history: list[Event]) -> list[Attempt]:
    """The claims of an issue from its history (oldest first): who held each, since when,
    how it ended and the work it left. The board's issue page lists them."""
    found: list[dict[str, Any]] = []
    for e in history:
        current = found[-1] if found else None
        if e.kind in CLAIM_STARTS:
            if current is not None and e.kind in TAKEN and current["ended"] is None:
                current.update(ended=TAKEN[e.kind], ended_at=e.created_at)
            found.append({"holder": e.actor, "claimed_at": e.created_at, "ended": None})
        elif current is None:
            continue
        elif e.kind == WORK_SAVED:
            holder = (e.after or {}).get("holder")
            mine = [a for a in found if a["holder"] == holder] or [current]
            mine[-1]["saved"] = _saved_words(e.after or {})
        elif e.kind in ENDINGS or e.kind == "completed":
            _close(current, e)
    return [Attempt(**a) for a in found]


def _close(attempt: dict[str, Any], e: Event) -> None:
    """End ``attempt`` by event ``e``: the first ending counts (a lapse stays a lapse when
    the claim is released later), but a stall release says more than the release it is."""
    ended = attempt.get("ended")
    if ended is None or (ended == "released" and e.kind == "stall_released"):
        attempt.update(ended=ENDINGS.get(e.kind, e.kind), ended_at=e.created_at)


def _saved_words(after: dict[str, Any]) -> str:
    said = []
    if after.get("commits_ahead"):
        said.append(f"{after['commits_ahead']} commit(s) on {after.get('branch') or 'HEAD'}")
    if after.get("edits_ref"):
        said.append(f"edits saved as {after['edits_ref']}")
    return ", ".join(said) or "saved"
