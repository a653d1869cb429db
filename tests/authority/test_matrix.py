"""The generated matrix of design.md section 10 (issue 40, item 6): every face that can
write, from ``tools/list`` of a server with every toolset and profile, the ``workq``
command tree and the board's actions, is in faces.py's table (a test fails naming any that
is missing, and any named there that no longer exists); and each face that acts on claimed
work runs as every caller: the holder, another live caller (another server on the same
database, another person; for agit another agit server, and another agent of the same
one), a stale holder (its lease lapsed), a holder whose lapsed claim was taken over (with
its old fence), no claim, the holder in plan mode, a caller naming the holder's run id,
and an override (the CLI's ``--force``, the board). The outcome must be the table's
(``decide`` on the same facts: allowed, or the refusal's code) and a refusal must leave a
byte-identical snapshot: database (run bindings included), refs, worktrees, files,
uncommitted edits, plan files.

On SQLite, and on PostgreSQL too when WORKQ_TEST_PG_URL is set (``ENGINES``). Each
family of faces has its world built once per engine and test process (``Worlds``) and
copied for each case. Two sessions of one HTTP server are callers in test_sessions.py.
With AUTHORITY_MATRIX_LOG=FILE, each case appends its face, caller, the table's outcome,
the face's and the facts as a JSON line (the matrix as a table, to read)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client

from tests.authority import faces, snapshot
from tests.authority.recipes import NOT_RUN, RECIPES, Ctx, Recipe
from tests.authority.snapshot import git
from tests.authority.world import (
    LEASE,
    NUMBER,
    OTHER,
    PERSON,
    REPO,
    REPO2,
    RUN,
    H,
    SetupFailed,
    T,
    World,
    cli_code,
    code_of,
)
from tests.conftest import ENGINES, PG_URL, drop_pg_database, fresh_pg_database, migrated_sqlite
from tests.github.tools_helpers import fake_env, github_server
from tests.github_fake.server import FakeGitHub
from tests.server.conftest import EVERYTHING
from workq.config import Settings
from workq.domain.authority import Authority
from workq.domain.decisions import RULES, Facts, decide, live

pytestmark = pytest.mark.anyio

NOTHING_CODES = {"NO_ISSUES_AVAILABLE", "ALL_ISSUES_LOCKED"}
DONE = {"allowed", "claimed", "changed"}


# -- the faces --------------------------------------------------------------------------


@pytest.fixture
async def listed_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sqlite_template: Path
) -> dict[str, Any]:
    """``tools/list`` of a server with every toolset and profile, GitHub's included (the
    fake GitHub and a token)."""
    db = migrated_sqlite(sqlite_template, tmp_path / "queue.db")
    with FakeGitHub() as fake:
        async with github_server(monkeypatch, tmp_path, fake, toolsets=EVERYTHING, db=db) as client:
            tools = (await client.list_tools()).tools
    return {t.name: t.annotations for t in tools}


def command_tree() -> set[str]:
    from workq.cli.main import click_command

    return set(faces.commands(click_command(all_commands=True)))


async def test_every_writing_tool_is_in_the_table(listed_tools: dict[str, Any]) -> None:
    writing = {name for name, hints in listed_tools.items() if faces.writes(hints)}
    missing = sorted(writing - set(faces.TOOLS))
    assert not missing, f"tools that write and are not in tests/authority/faces.py: {missing}"
    gone = sorted(set(faces.TOOLS) - set(listed_tools))
    assert not gone, f"tools named in tests/authority/faces.py that no server lists: {gone}"
    hinted = sorted(set(faces.TOOLS) - writing)
    assert not hinted, f"read-only tools (readOnlyHint) named in faces.py: {hinted}"


def test_every_command_is_in_the_table() -> None:
    found = command_tree()
    missing = sorted(found - set(faces.COMMANDS))
    assert not missing, f"workq commands not in tests/authority/faces.py: {missing}"
    gone = sorted(set(faces.COMMANDS) - found)
    assert not gone, f"commands named in tests/authority/faces.py that workq lacks: {gone}"


def test_every_board_action_is_in_the_table() -> None:
    from workq.board.actions import ACTIONS

    missing = sorted(set(ACTIONS) - set(faces.BOARD))
    assert not missing, f"board actions not in tests/authority/faces.py: {missing}"
    gone = sorted(set(faces.BOARD) - set(ACTIONS))
    assert not gone, f"board actions named in tests/authority/faces.py that it lacks: {gone}"


def test_every_face_with_actions_has_a_recipe() -> None:
    """A face that acts on claimed work is run (or NOT_RUN says why not), and a recipe
    performs only actions its face's entry names."""
    tables = {"tool": faces.TOOLS, "cli": faces.COMMANDS, "board": faces.BOARD}
    problems: list[str] = []
    for kind, table in tables.items():
        for face, entry in table.items():
            if isinstance(entry, str):
                continue
            ran = [r for r in RECIPES if r.kind == kind and r.face == face]
            if not ran and f"{kind}:{face}" not in NOT_RUN:
                problems.append(f"{kind}:{face} acts on claimed work but has no recipe")
            done = {a for r in ran for a in r.actions}
            if ran and done != set(entry) and f"{kind}:{face}" not in NOT_RUN:
                problems.append(f"{kind}:{face}: recipes do {sorted(done)}, table {sorted(entry)}")
    for recipe in RECIPES:
        named = tables[recipe.kind].get(recipe.face)
        if not isinstance(named, tuple) or not set(recipe.actions) <= set(named):
            problems.append(f"{recipe.id}: not in the table with {recipe.actions}")
    assert not problems, "\n".join(problems)


# -- the callers ------------------------------------------------------------------------


@dataclass(frozen=True)
class Caller:
    name: str
    state: str  # live | lapsed | taken | unclaimed | planning
    who: str  # h | o: which server or person acts
    naming: str = "own"  # own | holder | sibling: whose run id the call names
    fence: bool = False  # presents the holder's fence (1)
    override: bool = False


CALLERS = {
    c.name: c
    for c in (
        Caller("holder", "live", "h", fence=True),
        Caller("other", "live", "o"),
        Caller("stale", "lapsed", "h", fence=True),
        Caller("taken-over", "taken", "h", fence=True),
        Caller("no-claim", "unclaimed", "h"),
        Caller("planning", "planning", "h", fence=True),
        Caller("naming-holder", "live", "o", naming="holder"),
        Caller("other-agent", "live", "h", naming="sibling"),
        Caller("override", "live", "p", override=True),
        Caller("override-stale", "lapsed", "p", override=True),
        Caller("override-no-claim", "unclaimed", "p", override=True),
    )
}
BASIC = ("holder", "other", "stale", "taken-over", "no-claim")


def callers(recipe: Recipe) -> list[str]:
    if recipe.only:
        return list(recipe.only)
    if recipe.kind == "board":
        return ["override", "override-stale", "override-no-claim"]
    chosen = list(BASIC)
    if any(RULES[a].planning for a in recipe.actions) or recipe.family == "agit":
        chosen.append("planning")
    if recipe.kind == "tool" and recipe.names:
        chosen.append("naming-holder")
    if recipe.kind == "tool" and recipe.names in ("agent", "agent_id"):
        chosen.append("other-agent")
    if recipe.kind == "cli" and recipe.force:
        chosen.append("override")
    return chosen


CASES = [
    pytest.param(recipe, name, id=f"{recipe.id}-{name}")
    for recipe in RECIPES
    for name in callers(recipe)
]


# -- the world of one case --------------------------------------------------------------

GITHUB_FAMILIES = ("github", "pr", "landing")
LATE = ("depend",)  # steps taken once #1 is in the caller's state (a waiting issue cannot
# be claimed again)


def _holder_ids(world: World) -> set[str]:
    """The run ids the holder's server acts for: its own; agit's also its two agents'."""
    return {H, world.agents["h"], world.agents["s"]} if world.agit else {H}


def named(world: World, recipe: Recipe, caller: Caller) -> tuple[str | None, str | None]:
    """(run_id, agent) the call names."""
    if recipe.kind == "cli":
        if caller.override or recipe.names != "run_id":
            return None, None
        return RUN[caller.who], None
    if recipe.names == "run_id":
        holder = world.agents["h"] if world.agit else H
        return (holder if caller.naming == "holder" else None), None
    if recipe.names in ("agent", "agent_id"):
        whose = {"own": caller.who, "holder": "h", "sibling": "s"}[caller.naming]
        return None, world.agents[whose]
    return None, None


def expected_authority(world: World, recipe: Recipe, caller: Caller) -> Authority:
    """Who the caller is, by design.md section 10's caller rule (built here, not by the
    face: a face that builds it otherwise shows as a disagreement)."""
    fence = 1 if caller.fence and recipe.fence else None
    if recipe.kind == "board":
        by = Authority.overriding(f"{recipe.face} on the board", who=f"board:{PERSON}")
        return by.claiming_as(recipe.claims_as) if recipe.claims_as else by
    if recipe.kind == "cli":
        if caller.override:
            why = f"workq {recipe.face} {recipe.force}"
            return Authority.overriding(why, who=PERSON, acts_as=PERSON)
        if recipe.for_holder:  # the worker acts for the claim that asked: H, with its fence
            return Authority.of({H}, acts_as=H, fence=1)
        me = RUN[caller.who]
        if recipe.always_override:
            return Authority.overriding(f"workq {recipe.face}", who=me, acts_as=me, fence=fence)
        return Authority.of({me}, acts_as=me, fence=fence, who=me)
    own = RUN[caller.who]
    run_id, agent = named(world, recipe, caller)
    if run_id or agent:  # naming a run id (an agent id) acts as that run alone
        acts = str(run_id or agent)
        return Authority.of({acts}, acts_as=acts, fence=fence, who=own)
    ids = _holder_ids(world) if caller.who == "h" else {own}
    return Authority.of(ids, acts_as=own, fence=fence, who=own)


async def build(world: World, recipe: Recipe) -> None:
    """The family's world: issue #1 (touching src/**) claimed by the holder, and #2."""
    family = world.family
    if recipe.kind == "tool":
        if family == "pr":  # lands through pull requests on the fake GitHub
            assert world.github is not None
            world.repo_options = ("--land", "pr", "--github", world.github.repo)
        if family != "queue":
            world.repository(remote=family in GITHUB_FAMILIES)
        repo = {"repository": REPO} if family != "queue" else {}
        await world.call("h", "issue_create", title="the claimed work", touches=["src/**"], **repo)
        await world.call("h", "issue_create", title="another", **repo)
        if family == "queue":
            await world.call("h", "issue_claim", number=NUMBER)
        elif family in ("repo", "github", "pr"):
            await world.call("h", "issue_claim", number=NUMBER, worktree=True)
        elif family == "agit":
            for who in ("h", "o", "t", "s"):
                agent = await world.call(
                    "h", "agit_register_agent", name=f"agent-{who}", type="custom"
                )
                world.agents[who] = agent["agent_id"]
            await world.call(
                "h", "agit_claim_task", task_id="t-1", agent_id=world.agents["h"], worktree=True
            )
            # the agit server acts for two agents (and its own run id): three run ids
            await world.call("h", "agit_claim_task", task_id="t-2", agent_id=world.agents["s"])
        elif family == "workflow":
            os.chdir(world.repos[REPO])
            await world.call("h", "start_work_on_issue", issue_number=NUMBER, worktree=True)
    else:
        if family == "cli-repo":
            world.repo_options = ("--worktree-per-claim",)
        if family == "landing":  # lands through pull requests on the fake GitHub
            assert world.github is not None
            pr = ("--land", "pr", "--github", world.github.repo)
            world.repo_options = ("--worktree-per-claim", *pr)
        if family != "cli":
            world.repository(remote=family == "landing")
        where = ["--repo", REPO] if family != "cli" else []
        world.cli_ok("create", "the claimed work", "--touch", "src/**", *where)
        world.cli_ok("create", "another", *where)
        world.cli_ok("claim", str(NUMBER), "--run-id", H)
    world.find_worktree()


async def resume(world: World, recipe: Recipe) -> None:
    """A world copied from its template: its servers start anew (their run ids bound as
    they start); the agit server claims its agent's task again (a restarted agit server
    acting for its agent), so that it acts for that agent."""
    if recipe.family in ("workflow", "github", "pr"):  # the server's checkout: the repository
        os.chdir(world.repos[REPO])
    if recipe.kind == "tool":
        await world.server("h")  # the holder's server runs: its run id is bound to it
    if world.agit:
        await world.call("h", "agit_claim_task", task_id="t-1", agent_id=world.agents["h"])
        await world.call("h", "agit_claim_task", task_id="t-2", agent_id=world.agents["s"])


async def prepare(world: World, recipe: Recipe, step: str) -> None:
    tool = recipe.kind == "tool"
    if step == "commit":
        world.commit_work()
    elif step == "edit":
        world.edit_work()
    elif step == "repo2":
        world.repository(REPO2)
    elif step == "branch":
        git(world.repos[REPO], "switch", "-q", "-c", "feature/1-the-claimed-work-here")
    elif step == "reserve":
        await world.call("h", "issue_reserve", number=NUMBER, glob="docs/**")
    elif step == "depend":
        if tool:
            await world.call("h", "issue_depend", blocker=OTHER, blocked=NUMBER)
        else:
            world.cli_ok("depend", str(NUMBER), "--on", str(OTHER))
    elif step == "block2":
        if tool:
            await world.call("h", "issue_block", number=OTHER, reason="waits for a person")
        else:
            world.cli_ok("block", str(OTHER), "waits for a person")
    elif step == "queue":  # the holder queues its landing (workq merge, land = pr)
        world.cli_ok("merge", str(NUMBER), "--run-id", H)
    elif step == "done2":
        world.cli_ok("claim", str(OTHER), "--run-id", H)
        world.cli_ok("complete", str(OTHER), "--run-id", H)
    else:
        raise AssertionError(f"no such step {step}")


async def bring(world: World, recipe: Recipe, state: str) -> None:
    """Issue #1 to the caller's state."""
    tool = recipe.kind == "tool"
    if state in ("lapsed", "taken"):
        world.lapse()
    if state == "taken":
        if tool and world.agit:
            await world.call("t", "agit_claim_task", task_id="t-1", agent_id=world.agents["t"])
        elif tool:
            await world.call("t", "issue_claim", number=NUMBER)
        else:
            world.cli_ok("claim", str(NUMBER), "--run-id", T, actor=T)
    elif state == "unclaimed":
        if tool:
            await world.call("h", "issue_release", number=NUMBER, discard=True)
        else:
            world.cli_ok("release", str(NUMBER), "--run-id", H, "--discard")
    elif state == "planning":
        if tool:
            await world.call("h", "enter_plan_mode", slug="plan-h", goal="plan the next step")
        else:
            world.cli_ok("plan", "enter", "plan-h", "plan the next step", "--run-id", H)


@dataclass
class Template:
    """A family's world, built once per engine in each test process: its folder (the
    SQLite file, the repositories, their worktrees), its PostgreSQL rows, and what the
    cases read of it."""

    folder: Path
    rows: snapshot.Stored | None
    repos: dict[str, Path]
    worktree_id: str | None
    worktree_path: Path | None
    agents: dict[str, str]


@dataclass
class Worlds:
    """Every case of a test process works in one folder, ``live``, made anew from its
    family's template: the worktrees, the repositories and the database name absolute
    paths, which stay right only at the path they were made at. On PostgreSQL every case
    of the process works in one database, its rows put back from the template's."""

    live: Path
    store: Path
    sqlite: Path
    pg: str | None
    made: dict[str, Template] = field(default_factory=dict)
    pg_live: str | None = None
    pg_empty: snapshot.Stored | None = None
    fake: FakeGitHub | None = None

    def github(self) -> FakeGitHub:
        """The fake GitHub of the github family (one per test process)."""
        if self.fake is None:
            self.fake = FakeGitHub().start()
        return self.fake

    def reset(self) -> None:
        if self.live.exists():
            shutil.rmtree(self.live)
        self.live.mkdir(parents=True)

    def database(
        self, engine: str, rows: snapshot.Stored | None, *, fresh: bool = False
    ) -> Settings:
        """The case's database: a new queue at head (``fresh``), or the template's rows
        (a SQLite file comes with its folder)."""
        if engine == "sqlite":
            if fresh:
                migrated_sqlite(self.sqlite, self.live / "queue.db")
            return Settings(db_path=self.live / "queue.db", lease_seconds=LEASE)
        assert PG_URL is not None
        if self.pg_live is None:
            self.pg_live = fresh_pg_database(PG_URL, template=self.pg)
            self.pg_empty = snapshot.store(self.pg_live)
        empty = self.pg_empty
        assert empty is not None
        snapshot.put_back(self.pg_live, empty if fresh or rows is None else rows)
        return Settings(database_url=self.pg_live, lease_seconds=LEASE)

    async def world(self, engine: str, recipe: Recipe) -> World:
        early = [step for step in recipe.prepare if step not in LATE]
        key = "-".join([engine, recipe.family, *early])
        github = self.github() if recipe.family in GITHUB_FAMILIES else None
        self.reset()
        if key not in self.made:
            settings = self.database(engine, None, fresh=True)
            world = World(self.live, settings, recipe.family, github=github)
            try:
                await build(world, recipe)
                for step in early:
                    await prepare(world, recipe, step)
            finally:
                await world.close()
            folder = self.store / key
            shutil.copytree(self.live, folder)
            rows = snapshot.store(settings.database_url) if settings.database_url else None
            self.made[key] = Template(
                folder,
                rows,
                dict(world.repos),
                world.worktree_id,
                world.worktree_path,
                dict(world.agents),
            )
            self.reset()
        made = self.made[key]
        shutil.copytree(made.folder, self.live, dirs_exist_ok=True)
        world = World(self.live, self.database(engine, made.rows), recipe.family, github=github)
        if github is not None:  # the fake as new, reading this case's remote
            github.reset()
            github.set_git_dir(str(made.repos["remote"]))
        world.repos = dict(made.repos)
        world.worktree_id, world.worktree_path = made.worktree_id, made.worktree_path
        world.agents = dict(made.agents)
        await resume(world, recipe)
        return world

    def drop(self) -> None:
        if self.fake is not None:
            self.fake.stop()
        if PG_URL is not None and self.pg_live is not None:
            drop_pg_database(PG_URL, self.pg_live)


@pytest.fixture(scope="session")
def worlds(
    tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path, pg_template: str | None
) -> Iterator[Worlds]:
    base = tmp_path_factory.mktemp("authority")
    found = Worlds(base / "world", base / "templates", sqlite_template, pg_template)
    yield found
    found.drop()


# -- the table's answer, and the face's -------------------------------------------------


def expect(world: World, recipe: Recipe, caller: Caller, by: Authority) -> tuple[str, str]:
    """The table's outcome, and the facts it read (for the failure message)."""
    if caller.naming == "holder":
        return "RUN_ID_IN_USE", "the call names a run id another live caller bound"
    code: str | None = None
    facts: Facts | None = None
    now = datetime.now(UTC)
    for action in recipe.actions:
        facts, now = world.facts(action, by, recipe.target)
        refusal = decide(action, facts, by, now)
        if refusal is not None:
            code = refusal.code
            break
    assert facts is not None
    shown = (
        f"{facts.status}, holder {facts.holder}, fence {facts.fence}, "
        f"{'live' if live(facts, now) else 'not live'}, planning {facts.planning}, "
        f"by {sorted(by.run_ids)} as {by.acts_as} fence {by.fence} override {by.override}"
    )
    if recipe.outcome == "next":
        if code == "PLAN_MODE_ACTIVE":
            return code, shown
        return ("claimed" if code is None and not live(facts, now) else "nothing"), shown
    if recipe.outcome == "sweep":
        if recipe.sweeps == "lapsed":  # doctor: the claims whose lease lapsed
            looks = facts.status == "in_progress" and not live(facts, now)
        elif recipe.sweeps == "finished":  # prune: worktrees of done or released issues
            looks = facts.status != "in_progress" and world.worktree_id is not None
        else:  # held, landing: whatever the table lets it do, it does
            looks = True
        return ("changed" if code is None and looks else "unchanged"), shown
    return code or "allowed", shown


async def act(world: World, recipe: Recipe, caller: Caller, ctx: Ctx) -> str:
    before: tuple[Any, ...] = (
        world.row(recipe.target),
        world.worktree_of(recipe.target),
        landed(world),
    )
    nothing = False
    if recipe.kind == "tool":
        client: Client = await world.server(caller.who)
        result = await client.call_tool(recipe.face, recipe.build(ctx))
        code = code_of(result) if result.is_error else None
    elif recipe.kind == "cli":
        actor = PERSON if caller.override else RUN[caller.who]
        args = list(recipe.build(ctx))
        if caller.override and recipe.force:
            args.append(recipe.force)
        try:
            done = world.cli(*args, actor=actor)
        except Exception as exc:  # a command that crashed in this process
            return f"CRASH({exc!r:.120})"
        nothing = recipe.outcome == "next" and done.returncode == 2
        code = None if done.returncode == 0 or nothing else cli_code(done)
    else:
        code = await board_call(world, recipe, ctx)
    after: tuple[Any, ...] = (
        world.row(recipe.target),
        world.worktree_of(recipe.target),
        landed(world),
    )
    if recipe.sweeps == "landing":  # did it push, open or merge? (the mirror writes too)
        before, after = before[2:], after[2:]
    if recipe.outcome == "next":
        if code is not None and code not in NOTHING_CODES:
            return code
        took = after[0].get("fence", 0) > before[0].get("fence", 0)
        return "claimed" if took and not nothing else "nothing"
    if recipe.outcome == "sweep":
        if code is not None:
            return code
        return "changed" if after != before else "unchanged"
    return code or "allowed"


def landed(world: World) -> list[str]:
    """What a landing changes outside: the remote's refs, the fake's pull requests."""
    if world.github is None or "remote" not in world.repos:
        return []
    refs = git(world.repos["remote"], "for-each-ref", "--format=%(refname) %(objectname)")
    pulls = [f"{p['number']} {p['state']} {p['head']['sha']}" for p in world.github.pulls()]
    return [*refs.splitlines(), *pulls]


async def board_call(world: World, recipe: Recipe, ctx: Ctx) -> str | None:
    """The board's action, posted from its own page (its header, no other origin)."""
    from workq.board.app import build_app

    app = build_app(world.queue(), token=None)
    transport = httpx2.ASGITransport(app=app)
    async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        answer = await http.post(
            f"/api/issues/{recipe.target}/{recipe.face}",
            json=recipe.build(ctx),
            headers={"x-workq-board": "1", "x-workq-actor": PERSON},
        )
    if answer.status_code == 200:
        return None
    body = answer.json()
    return str(body.get("code") or f"HTTP{answer.status_code}")


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def use_fake_github(worlds: Worlds, monkeypatch: pytest.MonkeyPatch) -> None:
    """Servers and commands started from now on talk to the fake GitHub only."""
    for key in [k for k in os.environ if k.startswith(("GITHUB_", "GH_"))]:
        monkeypatch.delenv(key)
    for key, value in fake_env(worlds.github()).items():
        if key.startswith("GITHUB_"):
            monkeypatch.setenv(key, value)


def log_case(recipe: Recipe, who: str, wanted: str, got: str, facts: str) -> None:
    if os.environ.get("AUTHORITY_MATRIX_LOG"):
        import json

        with open(os.environ["AUTHORITY_MATRIX_LOG"], "a") as log:
            log.write(json.dumps([recipe.id, who, wanted, got, facts]) + "\n")


@pytest.mark.parametrize(("recipe", "who"), CASES)
async def test_the_face_answers_as_the_table_says(
    recipe: Recipe, who: str, engine: str, worlds: Worlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    caller = CALLERS[who]
    world: World | None = None
    if recipe.family in GITHUB_FAMILIES:
        use_fake_github(worlds, monkeypatch)
    try:
        try:
            world = await worlds.world(engine, recipe)
            await bring(world, recipe, caller.state)
            for step in recipe.prepare:
                if step in LATE:
                    await prepare(world, recipe, step)
            if recipe.kind == "tool":
                await world.server(caller.who)  # started (and bound) before the snapshot
        except SetupFailed as exc:
            pytest.fail(f"{recipe.id} as {who}: the setup failed: {exc}")
        by = expected_authority(world, recipe, caller)
        wanted, facts = expect(world, recipe, caller, by)
        run_id, agent = named(world, recipe, caller)
        fence = 1 if caller.fence and recipe.fence else None
        ctx = Ctx(run_id=run_id, agent=agent, fence=fence, worktree_id=world.worktree_id)
        before = world.snapshot()
        got = await act(world, recipe, caller, ctx)
        after = world.snapshot()
    finally:
        if world is not None:
            await world.close()
    log_case(recipe, who, wanted, got, facts)
    problems = []
    if got != wanted:
        problems.append(f"expected {wanted}, got {got} ({facts})")
    if got not in DONE and not (recipe.outcome == "sweep" and got == "unchanged"):
        problems += before.differences(after)
    assert not problems, f"{recipe.id} as {who}: " + "\n".join(problems)


# -- the faces that say they only read --------------------------------------------------

ARGUMENTS = {  # a valid value for each required parameter of a read-only tool, by name
    "number": NUMBER,
    "issue_number": NUMBER,
    "issueNumber": NUMBER,
    "pr_number": 1,
    "repo": REPO,
    "query": "work",
}


@pytest.mark.parametrize("who", ["h", "o"])
async def test_the_tools_that_only_read_change_nothing(
    who: str,
    engine: str,
    worlds: Worlds,
    listed_tools: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each tool hinted read-only (so not in faces.TOOLS), called by the holder's server and
    by another's on a claimed issue with a worktree, a remote and the fake GitHub, leaves
    the snapshot as it was: a tool that writes under that hint would escape the table."""
    reading = Recipe("read-only tools", "tool", "github", (), lambda c: {})
    use_fake_github(worlds, monkeypatch)
    world = await worlds.world(engine, reading)
    worlds.github().seed_issue("a GitHub issue")  # #1 on GitHub
    problems: list[str] = []
    try:
        client = await world.server(who)
        tools = {t.name: t for t in (await client.list_tools()).tools}
        for name in sorted(n for n, hints in listed_tools.items() if not faces.writes(hints)):
            schema = tools[name].input_schema or {}
            arguments = {key: ARGUMENTS[key] for key in schema.get("required", [])}
            before = world.snapshot()
            await client.call_tool(name, arguments)  # (the pull request tools: not found)
            problems += [
                f"{name} by run-{who}: {line}" for line in before.differences(world.snapshot())
            ]
    finally:
        await world.close()
    assert not problems, "\n".join(problems)


READ_COMMANDS = {  # the arguments of each command that only reads, on a claimed issue
    "show": ["1"],
    "history": ["1"],
    "repo status": [REPO],
    "conflicts": [REPO],
    "gates evidence": ["1"],
    "gates list": ["1"],
    "plan show": ["plan-h"],
    "docs search": ["work"],
    "workflow show": ["1"],
    "hooks check": ["--repo", "."],
    "watch": ["--since", "0", "--count", "1"],
}


async def test_the_commands_that_only_read_change_nothing(engine: str, worlds: Worlds) -> None:
    """Each command faces.py says only reads, run on a claimed issue with a worktree (the
    holder in plan mode, so that plan show has a plan), succeeds and leaves the snapshot
    as it was."""
    reading = Recipe("read-only commands", "cli", "cli-repo", (), lambda c: [])
    world = await worlds.world(engine, reading)
    problems: list[str] = []
    try:
        await bring(world, reading, "planning")
        for name in sorted(n for n, entry in faces.COMMANDS.items() if entry == faces.READS):
            before = world.snapshot()
            done = world.cli(
                *name.split(), *READ_COMMANDS.get(name, []), actor=H, cwd=world.repos[REPO]
            )
            if done.returncode != 0:
                problems.append(
                    f"workq {name}: exit {done.returncode}: {done.stderr.strip()[:200]}"
                )
            problems += [f"workq {name}: {line}" for line in before.differences(world.snapshot())]
    finally:
        await world.close()
    assert not problems, "\n".join(problems)
