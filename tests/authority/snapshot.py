"""What a refused call must leave as it was: the database (every table, the run bindings
among them), and where the face touches git, the repository's refs, its worktrees, the
files under every checkout and their uncommitted edits; plus the plan files.

The database is read from outside workq's services: SQLite by tests/storage.py's ``dump``
(through workq's one SQLite library: a second library in the process would break the
locks of workq's own connections), PostgreSQL through SQLAlchemy's reflection. Each
table's rows are sorted, so the order a database returns them in does not matter."""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import Engine, MetaData, create_engine, select, text
from sqlalchemy.pool import NullPool

from tests.storage import dump
from workq.config import Settings


def dump_database(settings: Settings) -> list[str]:
    """Every table's name and rows, in a stable order."""
    if settings.database_url is None:
        return dump(Path(settings.db_path))
    return _dump_url(settings.database_url)


_SCHEMA: list[MetaData] = []  # reflected once: every database of a run is at the same head


def _dump_url(url: str) -> list[str]:
    """Every table's rows as JSON, in one statement (one round trip)."""
    engine = create_engine(url, poolclass=NullPool)
    try:
        meta = _schema(engine)
        names = sorted(meta.tables)
        query = " UNION ALL ".join(
            f"SELECT '{name}', row_to_json(t)::text FROM \"{name}\" t" for name in names
        )
        with engine.connect() as conn:
            rows = [f"{table}: {row}" for table, row in conn.execute(text(query))]
        return [f"tables: {names}", *sorted(rows)]
    finally:
        engine.dispose()


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_OPTIONAL_LOCKS": "0"}
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout


def _hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _skipped(name: str) -> bool:
    return name in (".git", "__pycache__") or (name.startswith(".") and name.endswith("_cache"))


def _files(root: Path) -> Iterator[str]:
    """Every file under a checkout (outside .git and the tools' caches): name, size, hash.
    A nested worktree folder (``.worktrees``) is left to its own entry."""
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not _skipped(d) and d != ".worktrees")
        for name in sorted(files):
            path = Path(folder, name)
            if _skipped(name) or not path.is_file():
                continue
            yield f"{path.relative_to(root)} {path.stat().st_size} {_hash(path)}"


def repository(repo: Path) -> list[str]:
    """The refs, the worktrees git knows, and for each checkout its files and its
    uncommitted edits (``git status --porcelain``, untracked files too)."""
    lines = ["refs:", *git(repo, "for-each-ref", "--format=%(refname) %(objectname)").splitlines()]
    listed = git(repo, "worktree", "list", "--porcelain")
    lines += ["worktrees:", *listed.splitlines()]
    blocks = [b.splitlines() for b in listed.strip().split("\n\n") if b.strip()]
    checkouts = [Path(b[0].split(" ", 1)[1]) for b in blocks if "bare" not in b]
    for checkout in checkouts:
        lines.append(f"checkout {checkout}:")
        if not checkout.is_dir():
            lines.append("  (missing)")
            continue
        lines += [
            f"  status {s}" for s in git(checkout, "status", "--porcelain=v1", "-uall").splitlines()
        ]
        lines += [f"  file {f}" for f in _files(checkout)]
    return lines


def folder(root: Path) -> list[str]:
    """Files under a folder (the plan files): names, sizes, hashes."""
    if not root.is_dir():
        return []
    return list(_files(root))


@dataclass
class Snapshot:
    database: list[str]
    repositories: dict[str, list[str]] = field(default_factory=dict)
    plans: list[str] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)  # the fake GitHub's pulls and writes

    def differences(self, after: Snapshot) -> list[str]:
        """What changed, as a few lines (empty: byte-identical)."""
        found: list[str] = []
        found += _diff("database", self.database, after.database)
        for name in sorted(set(self.repositories) | set(after.repositories)):
            was, now = self.repositories.get(name, []), after.repositories.get(name, [])
            found += _diff(f"repository {name}", was, now)
        found += _diff("plan files", self.plans, after.plans)
        found += _diff("GitHub", self.outside, after.outside)
        return found


def take(
    settings: Settings, repos: dict[str, Path], plans: Path, outside: list[str] | None = None
) -> Snapshot:
    return Snapshot(
        database=dump_database(settings),
        repositories={name: repository(path) for name, path in repos.items()},
        plans=folder(plans),
        outside=outside or [],
    )


def _diff(what: str, before: list[str], after: list[str]) -> list[str]:
    if before == after:
        return []
    gone = [line for line in before if line not in after]
    new = [line for line in after if line not in before]
    shown = [f"  - {line[:300]}" for line in gone[:6]] + [f"  + {line[:300]}" for line in new[:6]]
    return [f"{what} changed:", *shown]


@dataclass
class Stored:
    """A PostgreSQL database's rows and sequences, to put back in another database at the
    same head: faster than a database made from a template (``CREATE DATABASE ...
    TEMPLATE`` costs a third of a second)."""

    rows: dict[str, list[dict[str, object]]]
    sequences: dict[str, int | None]


def _schema(engine: Engine) -> MetaData:
    if not _SCHEMA:
        found = MetaData()
        found.reflect(engine)
        _SCHEMA.append(found)
    return _SCHEMA[0]


def store(url: str) -> Stored:
    engine = create_engine(url, poolclass=NullPool)
    try:
        meta = _schema(engine)
        with engine.connect() as conn:
            rows = {
                t.name: [dict(r._mapping) for r in conn.execute(select(t))]
                for t in meta.sorted_tables
                if t.name != "alembic_version"
            }
            sequences = {
                str(r.sequencename): r.last_value
                for r in conn.execute(
                    text(
                        "SELECT sequencename, last_value FROM pg_sequences "
                        "WHERE schemaname = current_schema()"
                    )
                )
            }
        return Stored(rows, sequences)
    finally:
        engine.dispose()


def put_back(url: str, stored: Stored) -> None:
    """The database at ``url`` holds exactly ``stored`` (its rows, its sequences)."""
    engine = create_engine(url, poolclass=NullPool)
    try:
        meta = _schema(engine)
        with engine.begin() as conn:
            # DELETE, not TRUNCATE: a few rows go faster than a table's files are replaced
            for table in reversed(meta.sorted_tables):
                if table.name in stored.rows:
                    conn.execute(table.delete())
            for table in meta.sorted_tables:
                found = stored.rows.get(table.name)
                if found:
                    conn.execute(table.insert(), found)
            for name, value in stored.sequences.items():
                called = "true" if value is not None else "false"
                conn.execute(text(f"SELECT setval('\"{name}\"', {value or 1}, {called})"))
    finally:
        engine.dispose()
