"""Which quality gates are in effect: the repository owner's table, read from its default
branch, never from the branch being judged.

A gate table is a ``[gates]`` table in ``workq.toml`` at the repository's root, else a
``[tool.workq.gates]`` table in its ``pyproject.toml``, else none (or the preset the server
names, ``--default-gates``). What decides a merge belongs to the owner (docs/coding-loop.md):
the table in effect for a checkout is the one **committed on its repository's default
branch** (the registered repository's, else the one ``origin/HEAD`` names, else ``main`` or
``master``), read with git (``git show <commit>:<file>``), never from the work tree or the
tip under test: a branch that rewrites its gates (a ``true`` command, an empty table)
rewrites nothing until it is merged; merged, its table is in effect for every branch after.

``proposed`` reads a checkout's own table (what its branch would change the gates to, for
``workq gates init`` and ``workq gates list`` to show); it never decides anything.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import select

from workq.db.engine import retry_lost_read
from workq.db.tables import repositories
from workq.domain import gates as rules
from workq.domain.gates import GateSpec
from workq.errors import GitFailed, InvalidInput
from workq.schemas import GateConfig, GateSetting
from workq.services.handle import Queue
from workq.vcs import git

WORKQ_TOML = "workq.toml"
PYPROJECT = "pyproject.toml"
NONE = "none"
HOW_TO_ADD = "workq gates init [--preset strict|pytest] writes a starter table"
# The modes of the tests gate (Settings.tests_gate, Queue.tests_gate).
TRUST = "trust"
EVIDENCE = "evidence"
# The default branch of a repository workq has not registered, in the order asked: the
# branch its origin's HEAD names, then these.
USUAL_DEFAULTS = ("main", "master")
GIT_TIMEOUT = 30.0


@dataclass(frozen=True)
class Configuration:
    source: str
    """``workq.toml [gates] on BRANCH``, ``pyproject.toml [tool.workq.gates] on BRANCH``
    (the owner's table), ``preset NAME`` (the server's default) or ``none``; a checkout's
    own table (``proposed``) without the branch."""
    gates: tuple[GateSpec, ...]


@dataclass(frozen=True)
class Owner:
    """Where the gates of a checkout's repository are read: its default branch, at a
    commit."""

    root: Path
    """The checkout's work tree root (any worktree of the repository)."""
    branch: str
    commit: str


def _toml(text: str, name: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInput(f"{name} is not valid TOML: {exc}", source=name) from None


def _table(read: Callable[[str], str | None], default: str, suffix: str = "") -> Configuration:
    """The gate table of the files ``read(name)`` returns (None: no such file); ``suffix``
    says where they were read (`` on main``)."""
    text = read(WORKQ_TOML)
    if text is not None:
        data = _toml(text, f"{WORKQ_TOML}{suffix}")
        if "gates" in data:
            source = f"{WORKQ_TOML} [gates]{suffix}"
            return Configuration(source, rules.parse_table(data["gates"], source))
    text = read(PYPROJECT)
    if text is not None:
        tool = _toml(text, f"{PYPROJECT}{suffix}").get("tool", {})
        workq = tool.get("workq", {}) if isinstance(tool, dict) else {}
        if isinstance(workq, dict) and "gates" in workq:
            source = f"{PYPROJECT} [tool.workq.gates]{suffix}"
            return Configuration(source, rules.parse_table(workq["gates"], source))
    if default == rules.NO_PRESET:
        return Configuration(NONE, ())
    return Configuration(f"preset {default}", rules.preset(default))


def show_file(root: Path, commit: str, name: str) -> str | None:
    """The text of file ``name`` (at the repository's root) in ``commit`` (a full hash),
    or None when the commit has no such file: ``git show COMMIT:NAME --``."""
    args = ["show", "--no-textconv", f"{commit}:{name}", "--"]
    done = git.run(args, cwd=root, check=False, timeout=GIT_TIMEOUT)
    if done.returncode == 0:
        return done.stdout
    # Absent: what a missing table means. Anything else is git's failure to report.
    listed = git.run(["ls-tree", "--name-only", commit, "--", name], cwd=root, timeout=GIT_TIMEOUT)
    if not listed.stdout.strip():
        return None
    raise GitFailed(
        f"git show {commit[:12]}:{name} failed: {done.stderr.strip()[-500:]}",
        command="show",
    )


def proposed(checkout: Path, *, default: str = rules.NO_PRESET) -> Configuration:
    """A checkout's own gate table, as its files are now: what its branch would make the
    gates once merged. It decides nothing (``in_effect`` does).

    Raises:
        InvalidInput: a gate table that is malformed (naming the file and the gate).
    """

    def read(name: str) -> str | None:
        path = checkout / name
        return path.read_text(encoding="utf-8") if path.is_file() else None

    return _table(read, default)


def _ref_commit(root: Path, ref: str) -> str | None:
    done = git.run(
        ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"],
        cwd=root,
        check=False,
        timeout=GIT_TIMEOUT,
    )
    return done.stdout.strip() or None if done.returncode == 0 else None


@retry_lost_read
def _registered(q: Queue, main_root: Path) -> tuple[str, bool] | None:
    """The default branch of the repository registered at ``main_root``, and whether it
    lands through pull requests; None when none is."""
    with q.db.read() as conn:
        found = conn.execute(
            select(repositories.c.default_branch, repositories.c.land).where(
                repositories.c.path == str(main_root)
            )
        ).first()
    return None if found is None else (str(found.default_branch), found.land == "pr")


def owner(q: Queue | None, checkout: Path) -> Owner | None:
    """The default branch of the repository ``checkout`` stands in, and its tip: the
    registered repository's (for one that lands through pull requests, as last fetched
    from GitHub, ``origin/BRANCH``, where merges happen); else the branch ``origin/HEAD``
    names; else ``main`` or ``master``; else the branch the main work tree has checked
    out. None when there is no such commit (a repository without one)."""
    root = git.toplevel(checkout)
    common = git.common_dir(root)
    main_root = common.parent.resolve() if common.name == ".git" else None
    if main_root is not None and q is not None:
        registered = _registered(q, main_root)
        if registered is not None:
            branch, through_pulls = registered
            fetched = f"refs/remotes/origin/{branch}"
            if through_pulls and (tip := _ref_commit(root, fetched)) is not None:
                return Owner(root, f"origin/{branch}", tip)
            tip = _ref_commit(root, f"refs/heads/{branch}")
            if tip is None:
                raise InvalidInput(
                    f"the default branch {branch!r} of the repository at {main_root} is gone: "
                    "its gates cannot be read",
                    hint="restore the branch, or register the repository again with its "
                    "default branch",
                    field="default_branch",
                )
            return Owner(root, branch, tip)
    names: list[str] = []
    remote_head = git.run(
        ["symbolic-ref", "--quiet", "--short", "refs/remotes/origin/HEAD"],
        cwd=root,
        check=False,
        timeout=GIT_TIMEOUT,
    )
    if remote_head.returncode == 0 and remote_head.stdout.strip().startswith("origin/"):
        names.append(remote_head.stdout.strip().removeprefix("origin/"))
    names += USUAL_DEFAULTS
    if main_root is not None:
        checked_out = git.current_branch(main_root)
        if checked_out is not None:
            names.append(checked_out)
    for name in names:
        for ref in (f"refs/heads/{name}", f"refs/remotes/origin/{name}"):
            tip = _ref_commit(root, ref)
            if tip is not None:
                return Owner(root, name, tip)
    return None


def in_effect(q: Queue | None, checkout: Path, *, preset: str | None = None) -> Configuration:
    """The gates in effect for the repository ``checkout`` stands in: the table committed
    on its default branch (``owner``), else the server's preset (``q.default_gates``, or
    ``preset`` without a queue: a repository no database registers). Never the checkout's
    own files nor the tip being judged.

    Raises:
        InvalidInput: the owner's table is malformed (naming the file, the branch and the
            gate); GateEnvRefused (domain/gates.py): a gate's env names a secret.
    """
    default = q.default_gates if q is not None else (preset or rules.NO_PRESET)
    found = owner(q, checkout)
    if found is None:
        return _table(lambda _name: None, default)
    return _table(
        lambda name: show_file(found.root, found.commit, name),
        default,
        f" on {found.branch}",
    )


def unconfigured(q: Queue, checkout: Path, commit: str | None = None) -> str | None:
    """What a merge says once when the repository has no gates in effect (after it, the
    default branch is at ``commit``: its table is the one read): that nothing was checked,
    and how to add them. None when it has gates, or when merges trust the agent's word."""
    if q.tests_gate == TRUST or in_effect(q, checkout).gates:
        return None
    return f"no quality gates are configured, so none ran; {HOW_TO_ADD}"


def init(checkout: Path, preset: str = "pytest") -> tuple[Path, Configuration]:
    """Write preset ``preset``'s gates as the ``[gates]`` table of ``workq.toml`` at the root
    of the work tree ``checkout`` stands in (added to the file if it has no gate table).
    Committed and merged into the default branch, they are in effect.

    Raises:
        InvalidInput: no such preset, or the checkout already has a gate table (editing it
            is the owner's choice), or its workq.toml is not valid TOML.
    """
    specs = rules.preset(preset)
    if not specs:
        raise InvalidInput("preset 'none' has no gates to write", field="preset")
    root = git.toplevel(checkout)
    found = proposed(root)
    if found.source != NONE:
        raise InvalidInput(
            f"{root} already has gates ({found.source}): edit that table instead",
            field="preset",
            source=found.source,
        )
    path = root / WORKQ_TOML
    before = path.read_text(encoding="utf-8") if path.is_file() else ""
    table = rules.table_text(specs, "gates")
    text = f"{before.rstrip()}\n\n{table}" if before.strip() else table
    source = f"{WORKQ_TOML} [gates]"
    written = Configuration(source, rules.parse_table(_toml(text, WORKQ_TOML)["gates"], source))
    path.write_text(text, encoding="utf-8")
    return path, written


def _settings(root: Path, found: Configuration) -> GateConfig:
    return GateConfig(
        checkout=str(root),
        source=found.source,
        gates=[
            GateSetting(
                gate_number=s.number,
                name=s.name,
                command=list(s.command),
                files=list(s.files),
                timeout=s.timeout,
                tests=s.tests,
                env=list(s.env),
            )
            for s in found.gates
        ],
    )


def settings(q: Queue | None, checkout: Path, *, preset: str | None = None) -> GateConfig:
    """The gates in effect for the work tree ``checkout`` stands in, as an answer (without
    a queue: as no database registers its repository, ``preset`` the default)."""
    root = git.toplevel(checkout)
    return _settings(root, in_effect(q, root, preset=preset))


def pending(q: Queue | None, checkout: Path, *, preset: str | None = None) -> GateConfig | None:
    """The checkout's own gate table when it differs from the one in effect (its branch
    changes the gates: in effect once merged), else None."""
    root = git.toplevel(checkout)
    default = q.default_gates if q is not None else (preset or rules.NO_PRESET)
    mine = proposed(root, default=default)
    if mine.gates == in_effect(q, root, preset=preset).gates:
        return None
    return _settings(root, mine)
