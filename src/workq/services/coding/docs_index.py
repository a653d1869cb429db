"""Ranked search over a repository's docs (contract E's ``search_documentation``): Markdown
(``.md``, ``.markdown``), reStructuredText (``.rst``) and text (``.txt``, read as
reStructuredText; only in a ``doc`` or ``docs`` folder, or named ``README``, ``CHANGES``,
``HISTORY`` or ``NEWS``, so that ``requirements.txt`` and test data stay out).

The index is SQLite FTS5, ranked by ``bm25()``, one row per section (heading to heading)
so that line numbers and snippets point into the document. It lives in a cache file that
workq names, never in the work tree: ``<git common dir>/workq/docs-index/<name>-<hash>.sqlite``
(one per checkout, every worktree's file in the repository's shared git directory), or
under the cache folder outside a git repository. Any database the queue uses (SQLite or
PostgreSQL) is left alone.

Each search brings the index up to date first: it lists the docs, compares each file's
``(mtime_ns, size)`` with what the index holds, re-reads only the files that changed and
drops the ones that are gone. No watcher runs in between. The files are read outside the
write transaction; the write (``BEGIN IMMEDIATE``, busy timeout, WAL) rechecks what another
process may have indexed meanwhile. A cache file that cannot be read is rebuilt.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import sqlite3
import stat
from collections.abc import Callable
from contextlib import closing, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from workq.domain import markdown, restructuredtext
from workq.errors import Busy, GitMissing, InvalidInput, StorageError
from workq.schemas import DocHit, DocResults
from workq.services.queue.search import words
from workq.vcs import git

log = logging.getLogger("workq.docs")
T = TypeVar("T")

# Contract E's scopes: a folder of docs/ each, or everything.
SCOPES: dict[str, str] = {
    "all": "",
    "architecture": "docs/architecture/",
    "coding_standards": "docs/coding_standards/",
    "development": "docs/development/",
    "reference": "docs/reference/",
    "implementation": "docs/implementation/",
}
RESULTS = 10
MARKDOWN = (".md", ".markdown")
RST = (".rst", ".txt")
TEXT_FOLDERS = frozenset({"doc", "docs"})
TEXT_NAMES = ("README", "CHANGES", "HISTORY", "NEWS")
SNIPPET_CHARS = 150
FILE_BYTES_MAX = 1_000_000  # read of one document; the rest is not indexed
FILES_MAX = 20_000  # documents indexed outside a git repository
# Folders never searched: what git ignores is skipped too, inside a repository.
SKIPPED = frozenset({".git", ".worktrees", "node_modules", ".venv", "venv", "__pycache__"})
BUSY_TIMEOUT_S = 10.0
SCHEMA_VERSION = 1
_SCHEMA = (
    "CREATE TABLE files (path TEXT PRIMARY KEY, mtime_ns INTEGER NOT NULL,"
    " size INTEGER NOT NULL, title TEXT NOT NULL)",
    "CREATE TABLE sections (id INTEGER PRIMARY KEY, path TEXT NOT NULL,"
    " line INTEGER NOT NULL, text_line INTEGER NOT NULL)",
    "CREATE INDEX sections_path ON sections (path)",
    "CREATE VIRTUAL TABLE sections_fts USING fts5"
    "(heading, body, tokenize = 'unicode61 remove_diacritics 2')",
    # A word in a heading weighs four times one in the text.
    "INSERT INTO sections_fts (sections_fts, rank) VALUES ('rank', 'bm25(4.0, 1.0)')",
)


@dataclass(frozen=True)
class Tree:
    """The documents' root (a work tree, or a folder outside git) and its cache file."""

    root: Path
    cache: Path
    in_git: bool


@dataclass
class Synced:
    """What one sync did: the files it (re-)read and the ones it dropped."""

    read: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)


def locate(start: Path, cache_dir: Path) -> Tree:
    """The tree ``start`` stands in and the cache file workq keeps its index in."""
    try:
        found = git.locate(start)
    except GitMissing:
        found = None
    if found is not None:
        root, common = found
        folder = common / "workq" / "docs-index"
    else:
        root, folder = start.resolve(), cache_dir / "docs-index"
    digest = hashlib.sha256(str(root).encode()).hexdigest()[:12]
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", root.name)[:40] or "root"
    return Tree(root=root, cache=folder / f"{name}-{digest}.sqlite", in_git=found is not None)


def scope_prefix(scope: str) -> str:
    """The path prefix of a scope; an unknown scope is INVALID_INPUT naming the choices."""
    if scope not in SCOPES:
        raise InvalidInput(
            f"unknown scope {scope!r}", hint=f"choose one of {', '.join(SCOPES)}", field="scope"
        )
    return SCOPES[scope]


def on_disk(tree: Tree, prefix: str = "") -> dict[str, tuple[int, int]]:
    """Every document under ``prefix``: its path relative to the root, with its
    ``(mtime_ns, size)``. Symbolic links are not followed."""
    if tree.in_git:
        names = git.listed_files(tree.root, *(f"{prefix}*{s}" for s in (*MARKDOWN, *RST)))
    else:
        names = _walk(tree.root, prefix)
    found: dict[str, tuple[int, int]] = {}
    base = str(tree.root)
    for name in names:
        if "/" in name and SKIPPED.intersection(name.split("/")[:-1]):
            continue
        if not is_document(name):
            continue
        try:
            info = os.lstat(os.path.join(base, name))
        except OSError:  # listed by git, deleted since
            continue
        if stat.S_ISREG(info.st_mode):
            found[name] = (info.st_mtime_ns, info.st_size)
    return found


def is_document(path: str) -> bool:
    """Whether the file at ``path`` (relative to the root) is one the index reads."""
    folders, _, name = path.rpartition("/")
    suffix = Path(name).suffix.lower()
    if suffix != ".txt":
        return suffix in MARKDOWN or suffix in RST
    return bool(TEXT_FOLDERS.intersection(folders.lower().split("/"))) or name.upper().startswith(
        TEXT_NAMES
    )


def _walk(root: Path, prefix: str) -> list[str]:
    start = root / prefix if prefix else root
    found: list[str] = []
    for folder, dirs, files in os.walk(start):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED and not d.startswith("."))
        where = Path(folder).relative_to(root)
        for name in sorted(files):
            if is_document(name):
                found.append((where / name).as_posix())
                if len(found) >= FILES_MAX:
                    return found
    return found


def _with_cache(tree: Tree, work: Callable[[sqlite3.Connection], T]) -> T:
    """``work`` on the cache, with its schema. A file SQLite cannot read (damaged, or not
    a database) is deleted and made again, once."""
    tree.cache.parent.mkdir(parents=True, exist_ok=True)
    for attempt in (1, 2):
        try:
            with closing(_open(tree.cache)) as conn:
                return work(conn)
        except sqlite3.DatabaseError as exc:
            if _is_busy(exc):
                raise _busy() from exc
            if attempt == 2:
                raise StorageError(
                    f"the docs index {tree.cache} cannot be used: {exc}",
                    hint="check the disk, or delete that file",
                ) from exc
            log.warning("workq: rebuilding the docs index %s: %s", tree.cache, exc)
            _discard(tree.cache)
    raise AssertionError("unreachable")


def _open(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
            conn.execute("BEGIN IMMEDIATE")
            if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                for (name,) in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table'"
                    " AND name IN ('files', 'sections', 'sections_fts')"
                ).fetchall():
                    conn.execute(f"DROP TABLE {name}")
                for statement in _SCHEMA:
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("COMMIT")
    except BaseException:
        conn.close()
        raise
    return conn


def _discard(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        with suppress(FileNotFoundError):
            Path(f"{path}{suffix}").unlink()


def _is_busy(exc: sqlite3.DatabaseError) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and (
        "locked" in str(exc) or "busy" in str(exc)
    )


def _busy() -> Busy:
    return Busy(
        "the docs index is being written by another process", hint="search again in a moment"
    )


def _stored(conn: sqlite3.Connection, prefix: str) -> dict[str, tuple[int, int]]:
    rows = conn.execute(
        "SELECT path, mtime_ns, size FROM files WHERE substr(path, 1, length(?1)) = ?1",
        (prefix,),
    )
    return {path: (mtime, size) for path, mtime, size in rows}


@dataclass(frozen=True)
class _Document:
    path: str
    version: tuple[int, int]
    title: str
    sections: list[markdown.Section]


def _read(tree: Tree, path: str, version: tuple[int, int]) -> _Document:
    try:
        with (tree.root / path).open("rb") as handle:
            text = handle.read(FILE_BYTES_MAX).decode("utf-8", errors="replace")
    except OSError:
        text = ""
    cut = markdown if Path(path).suffix.lower() in MARKDOWN else restructuredtext
    parts = cut.sections(text)
    return _Document(path, version, markdown.title(parts, Path(path).name), parts)


def sync(tree: Tree, prefix: str = "") -> Synced:
    """Bring the index of the documents under ``prefix`` up to date with the disk."""
    return _with_cache(tree, lambda conn: _sync(conn, tree, prefix))


def _sync(conn: sqlite3.Connection, tree: Tree, prefix: str) -> Synced:
    disk = on_disk(tree, prefix)
    stored = _stored(conn, prefix)
    changed = [path for path, version in disk.items() if stored.get(path) != version]
    gone = [path for path in stored if path not in disk]
    done = Synced()
    if not changed and not gone:
        return done
    documents = [_read(tree, path, disk[path]) for path in changed]
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if _is_busy(exc):
            raise _busy() from exc
        raise
    try:
        now = _stored(conn, prefix)  # another process may have done part of it
        for doc in documents:
            if now.get(doc.path) != doc.version:
                _replace(conn, doc)
                done.read.append(doc.path)
        for path in gone:
            if path in now:
                _drop(conn, path)
                done.dropped.append(path)
        conn.execute("COMMIT")
    except BaseException:
        with suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise
    return done


def _drop(conn: sqlite3.Connection, path: str) -> None:
    conn.execute(
        "DELETE FROM sections_fts WHERE rowid IN (SELECT id FROM sections WHERE path = ?)",
        (path,),
    )
    conn.execute("DELETE FROM sections WHERE path = ?", (path,))
    conn.execute("DELETE FROM files WHERE path = ?", (path,))


def _replace(conn: sqlite3.Connection, doc: _Document) -> None:
    _drop(conn, doc.path)
    conn.execute(
        "INSERT INTO files (path, mtime_ns, size, title) VALUES (?, ?, ?, ?)",
        (doc.path, *doc.version, doc.title),
    )
    for part in doc.sections:
        section_id = conn.execute(
            "INSERT INTO sections (path, line, text_line) VALUES (?, ?, ?)",
            (doc.path, part.line, part.text_line),
        ).lastrowid
        conn.execute(
            "INSERT INTO sections_fts (rowid, heading, body) VALUES (?, ?, ?)",
            (section_id, part.heading, part.text),
        )


def _expression(terms: list[str]) -> str:
    # Each word quoted, so FTS5's syntax in user text means nothing; any word may match
    # (bm25 ranks the sections holding more of them, and rarer ones, first). Words of
    # three letters or more match as prefixes.
    return " OR ".join(f'"{t}"*' if len(t) >= 3 else f'"{t}"' for t in terms)


_HITS = (
    "SELECT sections_fts.rowid, s.path, sections_fts.rank FROM sections_fts"
    " JOIN sections AS s ON s.id = sections_fts.rowid"
    " WHERE sections_fts MATCH ?1 AND substr(s.path, 1, length(?2)) = ?2"
    " ORDER BY sections_fts.rank"
)
_DETAIL = (
    "SELECT s.path, s.line, s.text_line, sections_fts.heading, sections_fts.body, f.title"
    " FROM sections AS s JOIN sections_fts ON sections_fts.rowid = s.id"
    " JOIN files AS f ON f.path = s.path WHERE s.id = ?"
)


def search(start: Path, query: str, scope: str, cache_dir: Path) -> DocResults:
    """The best :data:`RESULTS` documents for ``query`` under ``scope``, one hit each (its
    best section). ``relevance_score`` is the hit's bm25 relative to the best hit of the
    same query: 1.0 for the first, lower for the rest, rounded to 3 decimals but never
    to 0 (every hit matched)."""
    terms = words(query)
    prefix = scope_prefix(scope)
    tree = locate(start, cache_dir)
    expression = _expression(terms)

    def work(conn: sqlite3.Connection) -> DocResults:
        _sync(conn, tree, prefix)
        best: list[tuple[int, float]] = []
        seen: set[str] = set()
        for rowid, path, rank in conn.execute(_HITS, (expression, prefix)):
            if path not in seen:
                seen.add(path)
                best.append((rowid, rank))
                if len(best) == RESULTS:
                    break
        top = best[0][1] if best else 0.0
        return DocResults(results=[_hit(conn, rowid, rank, top, terms) for rowid, rank in best])

    return _with_cache(tree, work)


def _hit(conn: sqlite3.Connection, rowid: int, rank: float, top: float, terms: list[str]) -> DocHit:
    path, line, text_line, heading, body, title = conn.execute(_DETAIL, (rowid,)).fetchone()
    snippet, offset = excerpt(body, terms)
    return DocHit(
        file_path=path,
        title=title,
        snippet=snippet or heading,
        relevance_score=max(round(rank / top, 3), 0.001) if top < 0 else 1.0,
        line_number=line if offset is None else text_line + body.count("\n", 0, offset),
    )


def excerpt(text: str, terms: list[str]) -> tuple[str, int | None]:
    """About :data:`SNIPPET_CHARS` characters of ``text`` around the first word that
    matches a term (as the index matched it), and that word's offset; the start of the
    text and None when only the heading matched."""
    pattern = "|".join(
        re.escape(t) + ("" if len(t) >= 3 else r"(?!\w)") for t in sorted(terms, key=len)[::-1]
    )
    found = re.search(rf"(?<!\w)(?:{pattern})", text, re.IGNORECASE)
    if found is None:
        return _clip(" ".join(text[: SNIPPET_CHARS * 2].split()), tail=True), None
    before = " ".join(text[max(0, found.start() - SNIPPET_CHARS) : found.start()].split())
    after = " ".join(text[found.start() : found.start() + SNIPPET_CHARS * 2].split())
    lead = before[-(SNIPPET_CHARS // 3) :]
    if len(lead) < len(before):
        lead = "…" + lead.split(" ", 1)[-1] if " " in lead else "…" + lead
    joined = f"{lead} {after}" if lead and text[found.start() - 1].isspace() else lead + after
    return _clip(joined, tail=True), found.start()


def _clip(text: str, *, tail: bool) -> str:
    if len(text) <= SNIPPET_CHARS:
        return text
    cut = text[: SNIPPET_CHARS - 1]
    if tail and " " in cut[SNIPPET_CHARS // 2 :]:
        cut = cut.rsplit(" ", 1)[0]
    return cut + "…"


def text(found: DocResults, query: str) -> str:
    """The hits as an agent or a person reads them (both faces print this)."""
    if not found.results:
        return f"No documentation matches {query!r}"
    return "\n".join(
        f"{h.file_path}:{h.line_number} {h.title} ({h.relevance_score:.2f})\n  {h.snippet}"
        for h in found.results
    )
