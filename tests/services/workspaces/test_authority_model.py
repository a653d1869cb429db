"""The authority rule (docs/coordination.md, "Who may act on a claim"; design section 10)
held by every face at once: a hypothesis state machine drives three runs and an admin at
the same three issues of one real git repository registered with workq, through the
services the MCP tools and the CLI call, with the Authority each of those faces builds:

- claims: ``claiming.claim`` (with a worktree) and ``claims.claim``; ``heartbeat``,
  ``complete``, ``release`` (with or without ``discard``) and ``blocking.block``, each with
  no fence, the fence the run was given, or the issue's current fence; ``unblock``;
  ``dependencies.depend``;
- agit: ``worktree_cleanup.remove`` and ``merges.merge`` (the gates of workq.toml run for real: one
  gate that passes);
- git steps: ``gitflow.commit_tdd_phase`` after an agent wrote into the worktree;
- reservations: ``reservations.reserve``, exclusive or shared;
- an admin's override (``Authority.overriding``) of complete, release, block, merge, remove;
- time: the queue's FakeClock moves past the lease, so a claim lapses, another run takes
  it over under a new fence and the first one becomes a stale holder.

A small model says, before each call, whether the rule allows it (the decision table,
domain/decisions.py): only the holder (with its fence, if it presents one) or an override
changes a claimed issue; completing and merging wait for every blocker (an override
completes and merges past them); a lapsed lease is neither renewed by a heartbeat nor
used to reserve paths, commit or merge, while a holder whose lapsed claim nobody took
over may still complete it or give it up (as tests/services/queue/test_model.py has it); only
the holder of a live claim commits (``step``) or merges its worktree (an override too);
anyone may block an unclaimed issue or a lapsed claim, and remove the worktree of a
done, unclaimed or lapsed one (``remove-worktree``) - but only its holder or an override
throws away its uncommitted edits. The call must then be accepted or refused as the
model says. A
call the rule allows may still be refused for what the repository holds (UNMERGED_WORK,
NOTHING_TO_COMMIT, WORKTREE_DIRTY, MERGE_CONFLICT), but only when git shows that reason.

What the machine proves, after every step:

1. Refused means unchanged: every row of every table (but the gates' evidence and the run
   bindings, as tests/server/test_fuzz.py) and the repository's refs, worktrees and files
   are what they were before a refused call.
2. The history: every completed, released, blocked, worktree_merged, tdd_committed and
   worktree_removed event on a claimed issue names the holder of that moment (replayed
   from the claim events before it), or records an override; excepted: a block of a
   lapsed claim (anyone may make it). A merge follows a completion.
3. An issue is done only once every issue it depends on is done, unless its completion
   recorded an override.
4. The default branch exists and only moves forward.
5. No two live reservations of different holders overlap where one is exclusive.

And the model and the database agree on every claim (status, holder, fence, lease,
blocked), every worktree's state and the live reservations.

On SQLite and, with WORKQ_TEST_PG_URL, on PostgreSQL: each example gets a new database (a
copy of the migrated template) and a new repository in its own folder.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from sqlalchemy import inspect, select, text

from tests.conftest import ENGINES, FakeClock, database
from tests.services.workspaces.gitrepo import make_repo, repository_state
from workq.db.tables import dependencies as dependencies_t
from workq.db.tables import issues as issues_t
from workq.domain.authority import Authority
from workq.errors import WorkqError
from workq.schemas import PAGE_MAX, Claim
from workq.services.handle import Queue
from workq.services.queue import blocking, claims, notes, reservations
from workq.services.queue import dependencies as deps_service
from workq.services.queue import issues as issues_service
from workq.services.runtime import open_queue
from workq.services.workspaces import (
    claiming,
    gitflow,
    merges,
    repositories,
    worktree_cleanup,
    worktrees,
)

RUNS = ("run-a", "run-b", "run-c")
ADMIN = "admin"
LEASE = 60
REPO = "app"
ISSUES = (1, 2, 3)
# Few globs whose overlaps are plain: those under one top folder overlap.
GLOBS = ("src/**", "src/app.py", "docs/**")
# The only gate: one that passes, so that merges land once the rule lets them.
GATES_TOML = f"""\
[gates.tests]
command = [{json.dumps(sys.executable)}, "-c", "pass"]
timeout = 60
"""
# What a refused call may leave behind: the gates' evidence (a merge refused later keeps
# the runs it made) and which server acts under which run id (tests/server/test_fuzz.py).
NOT_STATE = ("gate_runs", "run_bindings")
# Events that change a claimed issue: its holder's to make, or an override's.
GUARDED = (
    "completed",
    "released",
    "blocked",
    "worktree_merged",
    "tdd_committed",
    "worktree_removed",
)
TAKES = ("claimed", "claim_takeover", "force_claimed")
ENDS = ("completed", "released", "blocked")

Fence = str  # "none", "mine" (the run's own last fence) or "current" (the issue's)
FENCES = st.sampled_from(["none", "mine", "current"])


def _overlap(a: str, b: str) -> bool:
    return a.split("/")[0] == b.split("/")[0]


def _matches(path: str, glob: str) -> bool:
    """The globs this test draws: ``dir/**`` or one file."""
    return path.startswith(glob[:-2]) if glob.endswith("/**") else path == glob


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)


@dataclass
class Tree:
    """A worktree the model knows: made by a claim, then removed or merged."""

    id: str
    number: int
    path: Path
    branch: str
    state: str = "active"


@dataclass
class Item:
    number: int
    status: str = "open"
    holder: str | None = None
    fence: int = 0  # the token of the issue's latest claim
    until: datetime | None = None
    blocked: bool = False
    blockers: set[int] = field(default_factory=set)
    worktree: str | None = None  # its active worktree
    # Explicit reservations: glob -> (mode, holder, fence of the claim that made it).
    reserved: dict[str, tuple[str, str, int]] = field(default_factory=dict)

    def end_claim(self) -> None:
        self.holder, self.until, self.reserved = None, None, {}


class Model:
    def __init__(self) -> None:
        self.items: dict[int, Item] = {}
        self.trees: dict[str, Tree] = {}
        self.given: dict[tuple[str, int], int] = {}  # the fence each run was last given

    def live(self, item: Item, now: datetime) -> bool:
        return item.status == "in_progress" and item.until is not None and item.until > now

    def holds(self, item: Item, run: str) -> bool:
        return item.status == "in_progress" and item.holder == run

    def waits_on(self, item: Item) -> list[int]:
        return sorted(b for b in item.blockers if self.items[b].status != "done")

    def reaches(self, start: int, target: int) -> bool:
        """Does ``target`` wait, directly or not, on ``start``?"""
        seen, todo = set(), [start]
        while todo:
            current = todo.pop()
            if current == target:
                return True
            seen.add(current)
            todo += [
                i.number
                for i in self.items.values()
                if current in i.blockers and i.number not in seen
            ]
        return False

    def reservations(self, now: datetime) -> set[tuple[int, str, str, str]]:
        """The live reservations: (number, holder, glob, mode)."""
        return {
            (item.number, holder, glob, mode)
            for item in self.items.values()
            if self.live(item, now)
            for glob, (mode, holder, fence) in item.reserved.items()
            if holder == item.holder and fence == item.fence
        }


class AuthorityMachine(RuleBasedStateMachine):
    """Three runs and an admin acting on three issues of one repository, every call judged
    by the model first (see the module's docstring)."""

    engine: str
    template: Path | str | None
    base: Path

    def __init__(self) -> None:
        super().__init__()
        self.stack = contextlib.ExitStack()
        try:
            self._open()
        except BaseException:
            self.stack.close()
            raise

    def _open(self) -> None:
        self.folder = Path(tempfile.mkdtemp(dir=self.base))
        self.stack.callback(shutil.rmtree, self.folder, True)
        found = self.stack.enter_context(
            database(self.engine, self.folder / "workq.db", template=self.template)
        )
        # The gates' evidence is asked of every merge (the passing gate runs).
        self.q: Queue = open_queue(
            found.model_copy(update={"tests_gate": "evidence"}), migrate=True
        )
        self.stack.callback(self.q.db.dispose)
        self.clock = FakeClock()
        self.q.clock = self.clock
        self.q.lease_seconds = LEASE
        self.repo = make_repo(
            self.folder / "app",
            {"workq.toml": GATES_TOML, "README.md": "hello\n", "src/app.py": "x = 1\n"},
        )
        repositories.add(self.q, REPO, self.repo)
        self.model = Model()
        self.main = self._main_tip()
        self.writes = 0
        # Blocked and worktree_removed events a non-holder made on a lapsed claim (which
        # anyone may block, and whose worktree anyone may remove).
        self.lapsed_blocks: set[int] = set()

    def teardown(self) -> None:
        self.stack.close()

    # --- the repository, as git shows it ------------------------------------------------

    def _main_tip(self) -> str:
        """Where main is, read from its ref (loose, else packed): no git process."""
        loose = self.repo / ".git" / "refs" / "heads" / "main"
        if loose.is_file():
            return loose.read_text().strip()
        packed = self.repo / ".git" / "packed-refs"
        lines = packed.read_text().splitlines() if packed.is_file() else []
        tips = [line.split()[0] for line in lines if line.endswith(" refs/heads/main")]
        assert tips, "the default branch is gone"
        return tips[0]

    def _ahead(self, tree: Tree) -> bool:
        """Whether the tree's branch has commits main lacks."""
        found = _git(self.repo, "rev-list", "--count", f"refs/heads/main..refs/heads/{tree.branch}")
        return found.returncode == 0 and int(found.stdout) > 0

    def _dirty(self, tree: Tree) -> bool:
        if not tree.path.is_dir():
            return False
        return bool(_git(tree.path, "status", "--porcelain").stdout.strip())

    def _dirty_paths(self, tree: Tree) -> list[str]:
        lines = _git(tree.path, "status", "--porcelain", "--untracked-files=all").stdout
        return [line[3:] for line in lines.splitlines() if line.strip()]

    def _reserved_by_another(self, n: int, run: str, paths: list[str]) -> bool:
        """Whether a path is reserved exclusively by a live claim on another issue whose
        holder is not the committer (nor one who reserved for issue ``n``)."""
        live = self.model.reservations(self._now())
        mine = {run} | {holder for (number, holder, _, _) in live if number == n}
        return any(
            _matches(path, glob)
            for (number, holder, glob, mode) in live
            if mode == reservations.EXCLUSIVE and number != n and holder not in mine
            for path in paths
        )

    def _conflicts(self, tree: Tree) -> bool:
        found = _git(self.repo, "merge-tree", "--write-tree", "refs/heads/main", tree.branch)
        return found.returncode == 1

    def _write(self, tree: Tree, shared: bool, who: str) -> None:
        """An agent's edit in a worktree (not a workq call)."""
        self.writes += 1
        name = "src/app.py" if shared else f"src/issue{tree.number}.py"
        (tree.path / name).write_text(f"x = {self.writes!r}  # {who}\n")

    # --- refused means unchanged --------------------------------------------------------

    def _snapshot(self) -> dict[str, Any]:
        """Every row of every table (raw, as the driver reads it) and the repository's
        refs, worktrees and files."""
        with self.q.db.read() as conn:
            tables = sorted(set(inspect(conn).get_table_names()) - set(NOT_STATE))
            state: dict[str, Any] = {
                t: sorted((tuple(r) for r in conn.execute(text(f'SELECT * FROM "{t}"'))), key=repr)
                for t in tables
            }
        state["events"] = [e for e in state["events"] if "gates_run" not in e]
        state["repository"] = repository_state(self.repo)
        return state

    def _call(
        self,
        what: str,
        reasons: set[str],
        call: Callable[[], Any],
        legit: set[str] | None = None,
    ) -> Any:
        """Make ``call``: refused when the model gives ``reasons``, accepted when it gives
        none (or refused for one of ``legit``, what the repository justifies). A refusal
        must leave everything as it was. The result, or the WorkqError."""
        legit = legit or set()
        # A refusal the model does not expect fails anyway: no snapshot needed for it.
        before = self._snapshot() if reasons or legit else None
        try:
            got = call()
        except WorkqError as exc:
            assert before is not None, f"{what}: the rule allows it, refused {exc.code}: {exc}"
            after = self._snapshot()
            changed = sorted(k for k in before if before[k] != after.get(k))
            assert not changed, f"{what}: refused ({exc.code}: {exc}) but changed {changed}"
            if not reasons:
                assert exc.code in legit, f"{what}: the rule allows it, refused {exc.code}: {exc}"
            else:
                assert exc.code in reasons | legit, (
                    f"{what}: refused with {exc.code} ({exc}), expected one of {sorted(reasons)}"
                )
            return exc
        assert not reasons, f"{what}: accepted, but the rule refuses it: {sorted(reasons)}"
        return got

    def _fence(self, item: Item, run: str, which: Fence) -> int | None:
        if which == "mine":
            return self.model.given.get((run, item.number))
        if which == "current" and item.fence > 0:
            return item.fence
        return None

    def _stale(self, item: Item, fence: int | None) -> set[str]:
        return {"STALE_CLAIM"} if fence is not None and fence != item.fence else set()

    def _now(self) -> datetime:
        return self.clock.now

    def _latest_event(self, number: int, kind: str) -> int:
        """The newest event of ``kind`` (the hand-off may record ``work_saved`` after it)."""
        found = [e for e in notes.history(self.q, number, limit=PAGE_MAX) if e.kind == kind]
        return found[-1].id

    # --- setting up ---------------------------------------------------------------------

    @initialize(
        holders=st.lists(st.sampled_from((None, *RUNS)), min_size=3, max_size=3),
        edge=st.sampled_from(["none", "before", "after"]),
        committed=st.booleans(),
        then=st.sampled_from(["live", "lapsed", "taken over"]),
    )
    def start(self, holders: list[str | None], edge: str, committed: bool, then: str) -> None:
        """Three issues of the repository, each claimed with a worktree by the run drawn
        for it (or not), through the rules themselves. Drawn too: whether #2 waits for #1
        from the start, or #3 comes to wait for #1 once claimed; whether each holder
        committed a change to the file they all share (merging them meets conflicts);
        whether every claim is live, has lapsed, or has lapsed and been taken over by
        the next run, with the worktree (so the first holder is stale)."""
        for n in ISSUES:
            made = issues_service.create(self.q, title=f"issue {n}")
            assert made.number == n
            repositories.assign(self.q, n, REPO, by=Authority.of(()))
            self.model.items[n] = Item(n)
        if edge == "before":
            self.depend(1, 2)
        for n, run in zip(ISSUES, holders, strict=True):
            if run is not None:
                self.claim(n, run, True)
                if committed and self.model.items[n].worktree is not None:
                    self.commit(n, run, True, True)
        if edge == "after":
            self.depend(1, 3)
        if then != "live":
            self.clock.advance(LEASE + 1)
        if then == "taken over":
            for n, run in zip(ISSUES, holders, strict=True):
                if run is not None:
                    self.claim(n, RUNS[(RUNS.index(run) + 1) % len(RUNS)], True)

    # --- claims -------------------------------------------------------------------------

    @rule(
        n=st.sampled_from(ISSUES),
        run=st.sampled_from(RUNS),
        worktree=st.sampled_from([True, True, False]),
    )
    def claim(self, n: int, run: str, worktree: bool) -> None:
        item, now = self.model.items[n], self._now()
        renewal = self.model.holds(item, run)
        reasons = set()
        if not renewal:  # the table asks who before what it waits on
            if item.status == "done" or item.blocked or self.model.waits_on(item):
                reasons.add("NOT_CLAIMABLE")
            if item.status != "done" and self.model.live(item, now):
                reasons.add("ALREADY_CLAIMED")
        if worktree:
            got = self._call(
                f"claim #{n} with a worktree as {run}",
                reasons,
                lambda: claiming.claim(self.q, n, Authority.of({run}), worktree=True),
            )
        else:
            got = self._call(
                f"claim #{n} as {run}",
                reasons,
                lambda: claims.claim(self.q, n, Authority.of({run})),
            )
        if reasons:
            return
        assert isinstance(got, Claim)
        # A new claim, a takeover, or the holder's own lapsed claim: a new fence.
        if not (renewal and self.model.live(item, now)):
            item.fence += 1
        item.status, item.holder, item.until = "in_progress", run, now + timedelta(seconds=LEASE)
        assert got.fence == item.fence and got.already_held == renewal
        self.model.given[(run, n)] = item.fence
        if worktree:
            info = got.worktree
            assert info is not None
            if item.worktree is not None:
                assert info.worktree_id == item.worktree  # the one it has, whoever made it
            else:
                tree = Tree(info.worktree_id, n, Path(info.path), info.branch)
                self.model.trees[tree.id] = tree
                item.worktree = tree.id

    def _lapsed(self) -> list[int]:
        now = self._now()
        return [
            n
            for n, i in self.model.items.items()
            if i.status == "in_progress" and not self.model.live(i, now)
        ]

    @precondition(lambda self: self._lapsed())
    @rule(data=st.data(), worktree=st.booleans())
    def take_over(self, data: st.DataObject, worktree: bool) -> None:
        """Another run claims a lapsed claim: a new fence; its holder is stale now."""
        n = data.draw(st.sampled_from(self._lapsed()))
        others = [r for r in RUNS if r != self.model.items[n].holder]
        self.claim(n, data.draw(st.sampled_from(others)), worktree)

    @rule(n=st.sampled_from(ISSUES), run=st.sampled_from(RUNS), which=FENCES)
    def heartbeat(self, n: int, run: str, which: Fence) -> None:
        item = self.model.items[n]
        fence = self._fence(item, run, which)
        reasons = self._stale(item, fence)
        if item.status == "done":
            reasons.add("NOT_CLAIMABLE")  # no claim left to renew
        elif not self.model.holds(item, run):
            reasons.add("NOT_HOLDER")
        elif not self.model.live(item, self._now()):
            reasons.add("LEASE_LAPSED")  # not revived: the holder claims again
        self._call(
            f"heartbeat #{n} as {run} (fence {fence})",
            reasons,
            lambda: claims.heartbeat(self.q, n, Authority.of({run}, fence=fence)),
        )
        if not reasons:
            item.until = self._now() + timedelta(seconds=LEASE)

    def _complete(self, n: int, run: str | None, fence: int | None) -> None:
        """Complete as ``run`` (None: an admin's override)."""
        item = self.model.items[n]
        by = (
            Authority.overriding(ADMIN, who="admin")
            if run is None
            else Authority.of({run}, fence=fence)
        )
        reasons, legit = self._stale(item, fence), set()
        if run is not None and item.status != "done":
            if not self.model.holds(item, run):
                reasons.add("NOT_HOLDER")
            if self.model.waits_on(item):
                reasons.add("OPEN_BLOCKERS")  # even for the holder
        tree = self.model.trees.get(item.worktree or "")
        if run is not None and tree is not None and self._ahead(tree):
            legit.add("UNMERGED_WORK")  # its commits would be left behind
        got = self._call(
            f"complete #{n} as {run or 'an override'} (fence {fence})",
            reasons,
            lambda: claims.complete(self.q, n, by, actor=ADMIN if run is None else None),
            legit,
        )
        if not isinstance(got, WorkqError) and item.status != "done":
            item.status = "done"
            item.end_claim()

    @rule(n=st.sampled_from(ISSUES), run=st.sampled_from(RUNS), which=FENCES)
    def complete(self, n: int, run: str, which: Fence) -> None:
        self._complete(n, run, self._fence(self.model.items[n], run, which))

    def _release(self, n: int, run: str | None, fence: int | None, discard: bool) -> None:
        item = self.model.items[n]
        by = (
            Authority.overriding(ADMIN, who="admin")
            if run is None
            else Authority.of({run}, fence=fence)
        )
        reasons, legit = self._stale(item, fence), set()
        if item.status == "done":
            reasons.add("NOT_CLAIMABLE")  # no claim left to give up, even for an override
        elif item.status != "in_progress" or not (run is None or item.holder == run):
            reasons.add("NOT_HOLDER")
        tree = self.model.trees.get(item.worktree or "")
        if run is not None and not discard and tree is not None and self._ahead(tree):
            legit.add("UNMERGED_WORK")
        got = self._call(
            f"release #{n} as {run or 'an override'} (fence {fence}, discard {discard})",
            reasons,
            lambda: claims.release(
                self.q,
                n,
                by,
                reason="giving up",
                discard=discard,
                actor=ADMIN if run is None else None,
            ),
            legit,
        )
        if not reasons and not isinstance(got, WorkqError):
            item.status = "open"
            item.end_claim()

    @rule(
        n=st.sampled_from(ISSUES),
        run=st.sampled_from(RUNS),
        which=FENCES,
        discard=st.booleans(),
    )
    def release(self, n: int, run: str, which: Fence, discard: bool) -> None:
        self._release(n, run, self._fence(self.model.items[n], run, which), discard)

    def _block(self, n: int, run: str | None, fence: int | None) -> None:
        item, now = self.model.items[n], self._now()
        by = (
            Authority.overriding(ADMIN, who="admin")
            if run is None
            else Authority.of({run}, fence=fence)
        )
        reasons = self._stale(item, fence)
        live = self.model.live(item, now)
        if item.status == "done":
            reasons.add("NOT_CLAIMABLE")
        elif run is not None and live and item.holder != run:
            reasons.add("NOT_HOLDER")  # anyone may block an unclaimed or lapsed claim only
        actor = run or ADMIN
        self._call(
            f"block #{n} as {actor} (fence {fence})",
            reasons,
            lambda: blocking.block(self.q, n, "stuck", by=by, actor=actor),
        )
        if reasons:
            return
        if item.holder is not None and item.holder != actor and not live:
            self.lapsed_blocks.add(self._latest_event(n, "blocked"))
        item.status, item.blocked = "open", True
        item.end_claim()

    @rule(n=st.sampled_from(ISSUES), run=st.sampled_from(RUNS), which=FENCES)
    def block(self, n: int, run: str, which: Fence) -> None:
        self._block(n, run, self._fence(self.model.items[n], run, which))

    @precondition(lambda self: any(i.blocked for i in self.model.items.values()))
    @rule(data=st.data())
    def unblock(self, data: st.DataObject) -> None:
        """Unblocking is not the holder's (a blocked issue has no claim)."""
        blocked = [n for n, i in self.model.items.items() if i.blocked]
        n = data.draw(st.sampled_from(blocked))
        blocking.unblock(self.q, n)
        self.model.items[n].blocked = False

    @rule(blocker=st.sampled_from(ISSUES), blocked=st.sampled_from(ISSUES))
    def add_dependency(self, blocker: int, blocked: int) -> None:
        self.depend(blocker, blocked)

    def depend(self, blocker: int, blocked: int) -> None:
        """Dependencies are not the holder's (anyone adds them); only to unfinished issues,
        so that invariant 3 speaks of completions."""
        if self.model.items[blocked].status == "done":
            return
        reasons = set()
        if blocker == blocked:
            reasons.add("INVALID_INPUT")
        elif blocker not in self.model.items[blocked].blockers and self.model.reaches(
            blocked, blocker
        ):
            reasons.add("DEPENDENCY_CYCLE")
        self._call(
            f"#{blocked} depends on #{blocker}",
            reasons,
            lambda: deps_service.depend(self.q, blocker=blocker, blocked=blocked),
        )
        if not reasons:
            self.model.items[blocked].blockers.add(blocker)

    # --- reservations -------------------------------------------------------------------

    @rule(
        n=st.sampled_from(ISSUES),
        who=st.sampled_from(["the holder", *RUNS]),
        glob=st.sampled_from(GLOBS),
        exclusive=st.booleans(),
        which=FENCES,
    )
    def reserve_paths(self, n: int, who: str, glob: str, exclusive: bool, which: Fence) -> None:
        """The issue's holder reserves paths (then they meet each other's), or any run."""
        holder = self.model.items[n].holder
        run = holder if who == "the holder" and holder is not None else who
        self.reserve(n, run if run in RUNS else RUNS[0], glob, exclusive, which)

    def reserve(self, n: int, run: str, glob: str, exclusive: bool, which: Fence) -> None:
        item, now = self.model.items[n], self._now()
        fence = self._fence(item, run, which)
        mode = reservations.EXCLUSIVE if exclusive else reservations.SHARED
        reasons = self._stale(item, fence)
        if item.status == "done":
            reasons.add("NOT_CLAIMABLE")
        elif not self.model.holds(item, run):
            reasons.add("NOT_HOLDER")
        elif not self.model.live(item, now):
            reasons.add("LEASE_LAPSED")
        elif any(
            holder != run and (exclusive or theirs == reservations.EXCLUSIVE) and _overlap(glob, g)
            for (_, holder, g, theirs) in self.model.reservations(now)
        ):
            reasons.add("PATHS_RESERVED")
        self._call(
            f"reserve {glob} ({mode}) on #{n} as {run} (fence {fence})",
            reasons,
            lambda: reservations.reserve(
                self.q, n, Authority.of({run}, fence=fence), glob, mode=mode
            ),
        )
        if not reasons:
            item.reserved = {g: r for g, r in item.reserved.items() if r[2] == item.fence}
            item.reserved[glob] = (mode, run, item.fence)

    # --- git steps and agit -------------------------------------------------------------

    def _active(self) -> list[str]:
        # In the order they were made: worktree ids are random, their order is not.
        return [t.id for t in self.model.trees.values() if t.state == "active"]

    @precondition(lambda self: self._active())
    @rule(data=st.data(), shared=st.booleans(), run=st.sampled_from(RUNS))
    def edit(self, data: st.DataObject, shared: bool, run: str) -> None:
        """An agent writes into a worktree without committing (its holder's, or not)."""
        self._write(self.model.trees[data.draw(st.sampled_from(self._active()))], shared, run)

    @rule(
        data=st.data(),
        run=st.sampled_from(RUNS),
        write=st.sampled_from([True, True, False]),
        shared=st.booleans(),
    )
    def commit_somewhere(self, data: st.DataObject, run: str, write: bool, shared: bool) -> None:
        """A run commits on an issue, mostly one with a worktree (its own or another's)."""
        with_tree = [n for n in ISSUES if self.model.items[n].worktree is not None]
        n = data.draw(st.sampled_from(with_tree or list(ISSUES)))
        self.commit(n, run, write, shared)

    def commit(self, n: int, run: str, write: bool, shared: bool) -> None:
        item = self.model.items[n]
        tree = self.model.trees.get(item.worktree or "")
        reasons, legit = set(), set()
        if tree is None:
            reasons.add("CONFLICT")  # no branch to commit on
        else:
            if write:
                self._write(tree, shared, run)
            if item.status == "done":
                reasons.add("NOT_CLAIMABLE")  # nothing to work on
            elif item.status != "in_progress" or item.holder != run:
                reasons.add("NOT_HOLDER")  # another's work is not committed into
            elif not self.model.live(item, self._now()):
                reasons.add("LEASE_LAPSED")
            if not self._dirty(tree):
                legit.add("NOTHING_TO_COMMIT")
            elif self._reserved_by_another(n, run, self._dirty_paths(tree)):
                reasons.add("PATHS_RESERVED")  # the pre-commit check, made in process
        where = tree.path if tree is not None else self.repo
        self._call(
            f"commit_tdd_phase on #{n} as {run}",
            reasons,
            lambda: gitflow.commit_tdd_phase(
                self.q, where, "green", "x", by=Authority.of({run}), actor=run, number=n
            ),
            legit,
        )

    def _merge(self, wid: str, run: str | None) -> None:
        tree = self.model.trees[wid]
        item = self.model.items[tree.number]
        reasons, legit = set(), set()
        if tree.state != "merged":  # merging what landed already is a no-op for anyone
            if not (item.status == "in_progress" and (run is None or item.holder == run)):
                reasons.add("NOT_HOLDER")  # the holder's, or an override on a claim
            elif run is not None and not self.model.live(item, self._now()):
                reasons.add("LEASE_LAPSED")
            elif run is not None and self.model.waits_on(item):
                reasons.add("OPEN_BLOCKERS")  # an override lands past them
            if tree.state == "removed":
                reasons.add("CONFLICT")  # nothing to merge
            if tree.state == "active":
                if self._dirty(tree):
                    legit.add("WORKTREE_DIRTY")
                if self._conflicts(tree):
                    legit.add("MERGE_CONFLICT")
        by = Authority.overriding(ADMIN, who="admin") if run is None else Authority.of({run})
        got = self._call(
            f"merge worktree of #{tree.number} as {run or 'an override'}",
            reasons,
            lambda: merges.merge(self.q, REPO, wid, by=by, actor=run or ADMIN, wait_seconds=5),
            legit,
        )
        if reasons or isinstance(got, WorkqError) or tree.state == "merged":
            return
        tree.state, item.worktree = "merged", None
        if item.status != "done":
            item.status = "done"
            item.end_claim()

    def _trees(self) -> list[str]:
        return list(self.model.trees)

    @precondition(lambda self: self.model.trees)
    @rule(data=st.data(), run=st.sampled_from(RUNS))
    def merge(self, data: st.DataObject, run: str) -> None:
        """A run merges a worktree, mostly an active one (its own or another's)."""
        self._merge(data.draw(st.sampled_from(self._active() or self._trees())), run)

    def _remove(self, wid: str, run: str | None, force: bool) -> None:
        tree = self.model.trees[wid]
        item = self.model.items[tree.number]
        reasons, legit = set(), set()
        lapsed = False
        if tree.state == "active":
            another = item.status == "in_progress" and not (run is None or item.holder == run)
            if another and self.model.live(item, self._now()):
                reasons.add("NOT_HOLDER")
            lapsed = another
            # Only the holder or an override throws its uncommitted edits away.
            if (not force or another) and self._dirty(tree):
                legit.add("WORKTREE_DIRTY")
        by = Authority.overriding(ADMIN, who="admin") if run is None else Authority.of({run})
        got = self._call(
            f"remove worktree of #{tree.number} as {run or 'an override'} (force {force})",
            reasons,
            lambda: worktree_cleanup.remove(
                self.q, REPO, wid, by=by, force=force, actor=run or ADMIN
            ),
            legit,
        )
        if reasons or isinstance(got, WorkqError) or tree.state != "active":
            return
        if lapsed:  # a lapsed claim's worktree: anyone may remove it
            self.lapsed_blocks.add(self._latest_event(tree.number, "worktree_removed"))
        tree.state, item.worktree = "removed", None

    @precondition(lambda self: self.model.trees)
    @rule(data=st.data(), run=st.sampled_from(RUNS), force=st.booleans())
    def remove(self, data: st.DataObject, run: str, force: bool) -> None:
        self._remove(data.draw(st.sampled_from(self._trees())), run, force)

    # --- who acts -----------------------------------------------------------------------

    def _claimed(self) -> list[int]:
        return [n for n, i in self.model.items.items() if i.status == "in_progress"]

    @precondition(lambda self: self._claimed())
    @rule(
        data=st.data(),
        act=st.sampled_from(
            ["heartbeat", "complete", "commit", "commit", "merge", "merge", "release", "reserve"]
        ),
    )
    def holder_acts(self, data: st.DataObject, act: str) -> None:
        """The holder itself (so that random runs often meet the allowed cases)."""
        n = data.draw(st.sampled_from(self._claimed()))
        item = self.model.items[n]
        run = item.holder
        assert run is not None
        if act == "heartbeat":
            self.heartbeat(n, run, "mine")
        elif act == "complete":
            self.complete(n, run, "mine")
        elif act == "commit":
            self.commit(n, run, True, data.draw(st.booleans()))
        elif act == "merge" and item.worktree is not None:
            self._merge(item.worktree, run)
        elif act == "release":
            self.release(n, run, "mine", data.draw(st.booleans()))
        elif act == "reserve":
            self.reserve(n, run, data.draw(st.sampled_from(GLOBS)), True, "mine")

    def _former(self) -> list[tuple[str, int]]:
        """(run, issue) of the claims their runs were given and no longer hold (all of
        them if there is none)."""
        given = sorted(self.model.given)
        stale = [
            (run, n)
            for (run, n) in given
            if self.model.items[n].holder != run
            or self.model.items[n].fence != self.model.given[(run, n)]
        ]
        return stale or given

    @precondition(lambda self: self.model.given)
    @rule(
        data=st.data(),
        act=st.sampled_from(
            ["heartbeat", "complete", "release", "block", "reserve", "commit", "merge", "remove"]
        ),
    )
    def former_holder_acts(self, data: st.DataObject, act: str) -> None:
        """A run that was given a claim acts on it with that claim's fence, mostly once
        the claim is no longer its own (taken over, ended): a stale holder."""
        run, n = data.draw(st.sampled_from(self._former()))
        tree = self.model.items[n].worktree
        if act == "heartbeat":
            self.heartbeat(n, run, "mine")
        elif act == "complete":
            self.complete(n, run, "mine")
        elif act == "release":
            self.release(n, run, "mine", False)
        elif act == "block":
            self.block(n, run, "mine")
        elif act == "reserve":
            self.reserve(n, run, "src/**", True, "mine")
        elif act == "commit":
            self.commit(n, run, True, False)
        elif tree is not None and act == "merge":
            self._merge(tree, run)
        elif tree is not None:
            self._remove(tree, run, True)

    @rule(
        data=st.data(),
        act=st.sampled_from(["complete", "release", "block", "merge", "remove"]),
    )
    def admin_overrides(self, data: st.DataObject, act: str) -> None:
        """An admin's override (``--force``), recorded in the history."""
        n = data.draw(st.sampled_from(ISSUES))
        if act == "complete":
            self._complete(n, None, None)
        elif act == "release":
            self._release(n, None, None, False)
        elif act == "block":
            self._block(n, None, None)
        elif self.model.trees:
            wid = data.draw(st.sampled_from(self._trees()))
            if act == "merge":
                self._merge(wid, None)
            else:
                self._remove(wid, None, data.draw(st.booleans()))

    @rule(seconds=st.sampled_from([1, 30, LEASE + 1]))
    def wait(self, seconds: int) -> None:
        self.clock.advance(seconds)

    # --- invariants ---------------------------------------------------------------------

    def _stored(self) -> tuple[dict[int, Any], set[tuple[int, int]]]:
        """Each issue's claim as stored, and the dependencies (blocker, blocked)."""
        blocker, blocked = issues_t.alias("blocker"), issues_t.alias("blocked")
        with self.q.db.read() as conn:
            rows = {
                r.number: r
                for r in conn.execute(
                    select(
                        issues_t.c.number,
                        issues_t.c.status,
                        issues_t.c.claimed_by,
                        issues_t.c.fence,
                        issues_t.c.is_blocked,
                        issues_t.c.lease_expires_at,
                    )
                )
            }
            edges = conn.execute(
                select(blocker.c.number, blocked.c.number).select_from(
                    dependencies_t.join(blocker, blocker.c.id == dependencies_t.c.blocker_id).join(
                        blocked, blocked.c.id == dependencies_t.c.blocked_id
                    )
                )
            )
            return rows, {(int(a), int(b)) for a, b in edges}

    @invariant()
    def the_model_and_the_database_agree(self) -> None:
        rows, edges = self._stored()
        for n, item in self.model.items.items():
            row = rows[n]
            assert (row.status, row.claimed_by, row.fence, bool(row.is_blocked)) == (
                item.status,
                item.holder,
                item.fence,
                item.blocked,
            ), f"#{n}: stored {tuple(row)}, the model says {item}"
            assert row.lease_expires_at == item.until, f"#{n}: lease {row.lease_expires_at}"
        assert edges == {(b, i.number) for i in self.model.items.values() for b in i.blockers}
        stored = {w.id: w.state for w in worktrees.list_worktrees(self.q, everything=True)}
        assert stored == {t.id: t.state for t in self.model.trees.values()}
        live = {(h.number, h.holder, h.glob, h.mode) for h in reservations.list_live(self.q)}
        assert live == self.model.reservations(self._now())

    @invariant()
    def the_history_names_the_holder_or_an_override(self) -> None:
        """Invariant 2, replayed from each issue's history: who held it at each event."""
        for n in self.model.items:
            holder: str | None = None
            done = False
            for e in notes.history(self.q, n, limit=PAGE_MAX):
                if e.kind in GUARDED and holder is not None:
                    overridden = bool((e.after or {}).get("override"))
                    assert e.actor == holder or overridden or e.id in self.lapsed_blocks, (
                        f"#{n}: {e.kind} by {e.actor} while {holder} held it, no override: {e}"
                    )
                if e.kind == "worktree_merged":
                    assert done, f"#{n}: merged but never completed"
                if e.kind in TAKES:
                    holder = e.actor
                elif e.kind in ENDS:
                    holder = None
                done = done or e.kind == "completed"

    @invariant()
    def done_only_after_its_blockers(self) -> None:
        """Invariant 3, from the stored statuses and dependencies (none is added to a done
        issue here, and none is reopened)."""
        rows, edges = self._stored()
        for n, row in rows.items():
            open_ = sorted(b for b, i in edges if i == n and rows[b].status != "done")
            if row.status != "done" or not open_:
                continue
            completions = [
                e for e in notes.history(self.q, n, limit=PAGE_MAX) if e.kind == "completed"
            ]
            assert completions and (completions[-1].after or {}).get("override"), (
                f"#{n} done while {open_} are not, and no override recorded"
            )

    @invariant()
    def main_only_moves_forward(self) -> None:
        tip = self._main_tip()
        if tip != self.main:
            moved = _git(self.repo, "merge-base", "--is-ancestor", self.main, tip)
            assert moved.returncode == 0, f"main went from {self.main} to {tip}, not forward"
            self.main = tip

    @invariant()
    def no_two_holders_reserve_the_same_paths(self) -> None:
        held = reservations.list_live(self.q)
        for i, a in enumerate(held):
            for b in held[i + 1 :]:
                exclusive = reservations.EXCLUSIVE in (a.mode, b.mode)
                assert not (a.holder != b.holder and exclusive and _overlap(a.glob, b.glob)), (
                    f"{a} and {b} overlap"
                )


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
def test_every_face_keeps_the_authority_rule(
    engine: str, sqlite_template: Path, pg_template: str | None, tmp_path: Path
) -> None:
    template = sqlite_template if engine == "sqlite" else pg_template
    # A fresh subclass per engine: hypothesis settings may be applied to a class only once.
    machine: type[AuthorityMachine] = type(
        "Machine",
        (AuthorityMachine,),
        {"engine": engine, "template": template, "base": tmp_path},
    )
    run = settings(
        max_examples=12,
        stateful_step_count=15,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )(machine).TestCase
    run().runTest()


def test_an_override_that_removes_a_claimed_worktree_is_recorded(
    queue: Queue, tmp_path: Path
) -> None:
    """The machine's one finding, reduced: an admin removes the worktree of an issue that
    run-a holds (``workq worktree remove --force``, whose help says "recorded in its
    history"). Allowed, as an override, and the worktree_removed event records it, as
    completed, released and blocked events made under an override do (it named only the
    admin, as if the admin held the claim)."""
    repo = make_repo(tmp_path / "app")
    repositories.add(queue, REPO, repo)
    n = issues_service.create(queue, title="held by run-a").number
    repositories.assign(queue, n, REPO, by=Authority.of(()))
    info = claiming.claim(queue, n, Authority.of({"run-a"}), worktree=True).worktree
    assert info is not None
    force = "workq worktree remove --force"
    worktree_cleanup.remove(
        queue,
        REPO,
        info.worktree_id,
        by=Authority.overriding(force, who="admin"),
        force=True,
        actor=ADMIN,
    )
    issue = issues_service.get(queue, n)
    assert (issue.status.value, issue.claimed_by) == ("in_progress", "run-a")  # still run-a's
    (removed,) = [e for e in notes.history(queue, n) if e.kind == "worktree_removed"]
    assert removed.actor == ADMIN
    assert (removed.after or {}).get("override") == force
