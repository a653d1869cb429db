"""Storage faults, injected for real: a full disk (a small tmpfs), a read-only file, folder or
filesystem (``chattr +i`` or a read-only mount, since root ignores permissions; ``chmod``
for other users), a damaged or truncated file, a file that is not a database, and another
process holding a lock. Each gives one clear line with a stable code naming the cause, the
database stays intact, and workq works again once the cause is gone.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, closing, contextmanager
from pathlib import Path

import anyio
import pytest

from tests import storage
from tests.torture import procs
from tests.torture.conftest import record
from tests.torture.servers import code_of, command, stdio, text_of
from tests.workq_cli import workq, workq_process
from workq.config import Settings
from workq.db import sqlite
from workq.errors import CorruptDatabase, StorageFull
from workq.services.maintenance import maintenance
from workq.services.queue import issues, listing
from workq.services.runtime import open_queue

Run = Callable[..., subprocess.CompletedProcess[str]]
FAULTS: Counter[str] = Counter()
BUSY_MS = "300"


@pytest.fixture(scope="module", autouse=True)
def _figures() -> Iterator[None]:
    yield
    total = sum(FAULTS.values())
    lines = [f"faults injected: {total} ({dict(sorted(FAULTS.items()))})"]
    record("storage", lines, {"faults_injected": total, **FAULTS})


def cli(db: Path, *args: str, run: Run = workq) -> subprocess.CompletedProcess[str]:
    """``workq --db DB ARGS`` in DB's folder, with a short busy timeout: in this process, or
    with ``run=workq_process`` in a real one (beside another process's lock)."""
    return run("--db", db, *args, cwd=db.parent, env={"WORKQ_BUSY_TIMEOUT_MS": BUSY_MS})


def refused(done: subprocess.CompletedProcess[str], code: str, *words: str) -> str:
    """The command failed with one line ``error: CODE: ...`` naming the cause."""
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    line = done.stderr.strip()
    assert "\n" not in line and "Traceback" not in line, line
    assert line.startswith(f"error: {code}: "), line
    for word in words:
        assert word in line, line
    return line


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    return done.stdout


def ok_or_one(done: subprocess.CompletedProcess[str]) -> str:
    """The output of a check that exits 1 when it finds something."""
    assert done.returncode in (0, 1), done.stderr
    return done.stdout


def intact(db: Path) -> None:
    storage.assert_intact(db)
    queue = open_queue(Settings(db_path=db), migrate=False)
    try:
        report = maintenance.doctor(queue)
    finally:
        queue.db.dispose()
    assert not report.findings, report.findings


def seed(db: Path, count: int = 3, description: str = "") -> None:
    queue = open_queue(Settings(db_path=db))
    try:
        for n in range(count):
            issues.create(queue, title=f"issue {n}", description=description)
    finally:
        queue.db.dispose()


@contextmanager
def read_only(path: Path) -> Iterator[None]:
    """Make a file or folder genuinely unwritable: ``chattr +i`` as root (which ignores
    permission bits), ``chmod`` otherwise."""
    if os.geteuid() == 0:
        if not procs.can_chattr(path if path.is_dir() else path.parent):
            pytest.skip("root ignores permissions and chattr +i is not supported here")
        with procs.immutable(path):
            yield
        return
    mode = path.stat().st_mode
    path.chmod(0o555 if path.is_dir() else 0o444)
    try:
        yield
    finally:
        path.chmod(mode)


# -- disk full -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_full_disk_is_storage_full_changes_nothing_and_recovers(tmp_path: Path) -> None:
    mount = tmp_path / "small"
    with procs.tmpfs(mount, "1m"):
        db = mount / "queue.db"
        seed(db, 1)
        big = "x" * 60_000
        async with stdio(db) as client:
            queue = open_queue(Settings(db_path=db))
            kept: list[int] = []
            try:
                with pytest.raises(StorageFull) as full:
                    while len(kept) < 100:
                        created = issues.create(queue, title=f"big {len(kept)}", description=big)
                        kept.append(created.number)
                FAULTS["disk full"] += 1
                assert "disk holding the database is full" in full.value.describe()
                refused(cli(db, "create", "one more", "-d", big), "STORAGE_FULL", "full")
                result = await client.call_tool("issue_create", {"title": "t", "description": big})
                assert code_of(result) == "STORAGE_FULL", text_of(result)
                assert not (await client.call_tool("issue_list", {})).is_error  # still serving
                assert set(kept) <= {i.number for i in listing.list_issues(queue, limit=200).items}

                procs.remount(mount, "size=16m")  # the cause goes away
                after = issues.create(queue, title="after", description=big)  # same process
                assert after.number == max(kept) + 1
                assert "Created issue" in ok(cli(db, "create", "from the cli", "-d", big))
                result = await client.call_tool("issue_create", {"title": "t", "description": big})
                assert not result.is_error, text_of(result)
            finally:
                queue.db.dispose()
        intact(db)


# -- read-only -------------------------------------------------------------------------


def test_a_read_only_database_file_refuses_writes_by_name_and_recovers(tmp_path: Path) -> None:
    db = tmp_path / "queue.db"
    seed(db)
    before = storage.dump(db)
    with read_only(db):
        FAULTS["read-only file"] += 1
        assert "issue 2" in ok(cli(db, "list"))  # reading needs no write
        refused(cli(db, "claim-next", "--run-id", "a"), "READ_ONLY", str(db), "cannot be written")
    assert storage.dump(db) == before
    assert "Created issue #4" in ok(cli(db, "create", "x"))
    intact(db)


def test_a_read_only_folder_names_the_folder_and_recovers(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    db = folder / "queue.db"
    seed(db)
    before = storage.dump(db)
    with read_only(folder):
        FAULTS["read-only folder"] += 1
        # SQLite in WAL mode must create queue.db-wal and -shm beside the file, even to read.
        for args in (("list",), ("create", "x")):
            refused(cli(db, *args), "READ_ONLY", f"the folder {folder}", "queue.db-wal")
    assert storage.dump(db) == before
    assert "Created issue #4" in ok(cli(db, "create", "x"))
    intact(db)


def test_a_read_only_filesystem_is_read_only_and_recovers(tmp_path: Path) -> None:
    mount = tmp_path / "ro"
    with procs.tmpfs(mount, "8m"):
        db = mount / "queue.db"
        seed(db)
        before = storage.dump(db)
        procs.remount(mount, "ro")
        try:
            FAULTS["read-only filesystem"] += 1
            refused(cli(db, "create", "x"), "READ_ONLY", "cannot be written")
            refused(cli(db, "ready"), "READ_ONLY")
        finally:
            procs.remount(mount, "rw")
        assert storage.dump(db) == before
        assert "Created issue #4" in ok(cli(db, "create", "x"))
        intact(db)


# -- damage ----------------------------------------------------------------------------


def _damaged_copy(tmp_path: Path) -> tuple[Path, Path, list[str]]:
    """A database of 300 issues, a backup of it, and its rows."""
    db = tmp_path / "queue.db"
    seed(db, 300, description="lorem ipsum " * 200)
    backup = tmp_path / "backup.db"
    queue = open_queue(Settings(db_path=db))
    try:
        maintenance.backup(queue, backup)  # what 'workq backup' runs
    finally:
        queue.db.dispose()
    return db, backup, storage.dump(db)


def test_damaged_pages_are_found_reported_and_a_backup_restores(tmp_path: Path) -> None:
    db, backup, rows = _damaged_copy(tmp_path)
    size = db.stat().st_size
    with db.open("r+b") as handle:  # garbage over a run of pages in the middle
        handle.seek(size // 2 // 4096 * 4096)
        handle.write(os.urandom(16 * 4096))
    FAULTS["damaged pages"] += 1
    doctor = cli(db, "doctor")
    assert doctor.returncode == 1
    assert "integrity" in doctor.stdout and "--repair" not in doctor.stdout  # it cannot
    found = json.loads(ok_or_one(cli(db, "doctor", "--json")))
    assert [f["check"] for f in found["findings"]] == ["integrity"]
    assert "restore from a backup" in found["findings"][0]["detail"]
    refused(cli(db, "export"), "CORRUPT_DATABASE", "damaged")
    shutil.copyfile(backup, db)
    assert storage.dump(db) == rows
    intact(db)


def test_a_truncated_database_is_damaged_and_a_backup_restores(tmp_path: Path) -> None:
    db, backup, rows = _damaged_copy(tmp_path)
    with db.open("r+b") as handle:
        handle.truncate(db.stat().st_size // 3)
    FAULTS["truncated file"] += 1
    refused(cli(db, "export"), "CORRUPT_DATABASE", "damaged")
    doctor = cli(db, "doctor")  # too damaged to open, or opened and found damaged
    assert doctor.returncode == 1
    assert "CORRUPT_DATABASE" in doctor.stderr or "integrity" in doctor.stdout
    shutil.copyfile(backup, db)
    assert storage.dump(db) == rows
    intact(db)


NOT_DATABASES = {
    "text": b"This is a shopping list, not a database.\n" * 40,
    "random": os.urandom(8192),
    "png": b"\x89PNG\r\n\x1a\n" + os.urandom(4096),
    "sqlite header, garbage after": b"SQLite format 3\x00" + os.urandom(4080),
}


@pytest.mark.parametrize("kind", sorted(NOT_DATABASES))
def test_a_file_that_is_not_a_database_is_refused_and_left_alone(tmp_path: Path, kind: str) -> None:
    db = tmp_path / "queue.db"
    db.write_bytes(NOT_DATABASES[kind])
    FAULTS["not a database"] += 1
    with pytest.raises(CorruptDatabase) as refusal:
        open_queue(Settings(db_path=db))
    said = refusal.value.describe()
    assert "not a SQLite database" in said or "damaged" in said, said
    assert db.read_bytes() == NOT_DATABASES[kind]


def test_the_command_line_on_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    db = tmp_path / "queue.db"
    db.write_bytes(NOT_DATABASES["text"])
    FAULTS["not a database"] += 1
    refused(cli(db, "create", "x"), "CORRUPT_DATABASE", "not a SQLite database")
    assert db.read_bytes() == NOT_DATABASES["text"]
    db.unlink()
    for extra in ("-wal", "-shm"):
        Path(f"{db}{extra}").unlink(missing_ok=True)
    assert "Created issue #1" in ok(cli(db, "create", "x"))  # moved away: a new queue


def test_another_applications_database_is_refused_and_left_alone(tmp_path: Path) -> None:
    db = tmp_path / "queue.db"
    with closing(sqlite.connect(db)) as conn:
        conn.execute("CREATE TABLE recipes (name TEXT)")
        conn.execute("INSERT INTO recipes VALUES ('bread')")
        conn.commit()
    before = storage.dump(db)
    FAULTS["foreign database"] += 1
    refused(cli(db, "create", "x"), "SCHEMA_MISMATCH", "not workq's")
    assert storage.dump(db) == before


def test_a_server_on_a_file_that_is_not_a_database_refuses_to_start(tmp_path: Path) -> None:
    db = tmp_path / "queue.db"
    db.write_bytes(NOT_DATABASES["text"])
    FAULTS["not a database"] += 1
    done = subprocess.run(
        command(db), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("error: CORRUPT_DATABASE:"), done.stderr
    assert "not a SQLite database" in done.stderr and len(done.stderr.splitlines()) == 1
    assert db.read_bytes() == NOT_DATABASES["text"]


@pytest.mark.anyio
async def test_a_server_started_during_a_fault_serves_once_it_is_gone(tmp_path: Path) -> None:
    """A read-only folder may pass, so the server starts and retries (a file that is not
    a database cannot: the server refuses to start, see above)."""
    folder = tmp_path / "data"
    folder.mkdir()
    db = folder / "queue.db"
    seed(db)
    FAULTS["server started during a fault: read-only folder"] += 1
    with ExitStack() as fault_on, anyio.fail_after(120):
        fault_on.enter_context(read_only(folder))  # before the server opens anything
        async with stdio(db, log=tmp_path / "server.log") as client:
            for _ in range(2):
                assert code_of(await client.call_tool("issue_ready", {})) == "READ_ONLY"
            fault_on.close()  # the cause goes away
            result = await client.call_tool("issue_create", {"title": "after the fault"})
            assert not result.is_error, text_of(result)


# -- locks -----------------------------------------------------------------------------

HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
if sys.argv[2] == "exclusive":
    conn.execute("PRAGMA locking_mode = EXCLUSIVE")
conn.execute("BEGIN IMMEDIATE")
conn.execute("UPDATE issues SET title = 'held, never committed' WHERE number = 1")
print("holding", flush=True)
sys.stdin.readline()
conn.execute("ROLLBACK")
"""


@contextmanager
def lock_holder(db: Path, mode: str) -> Iterator[subprocess.Popen[str]]:
    """Another process inside BEGIN IMMEDIATE (with an uncommitted change) until told."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
        yield holder
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.communicate(timeout=30)


@pytest.mark.anyio
async def test_a_long_write_lock_is_database_busy_and_work_resumes_when_it_ends(
    tmp_path: Path,
) -> None:
    db = tmp_path / "queue.db"
    seed(db)
    async with stdio(db, WORKQ_BUSY_TIMEOUT_MS=BUSY_MS) as client:
        await client.call_tool("issue_list", {})  # opened before the lock is taken
        with lock_holder(db, "immediate") as holder:
            FAULTS["long write lock"] += 1
            # Bounded, never a hang: a command still waiting at workq_process's timeout fails.
            refused(
                cli(db, "create", "x", run=workq_process),
                "DATABASE_BUSY",
                "lock",
                "nothing was changed",
            )
            assert "issue 2" in ok(cli(db, "list", run=workq_process))  # WAL: readers go on
            result = await client.call_tool("issue_create", {"title": "x"})
            assert code_of(result) == "DATABASE_BUSY", text_of(result)
            assert not (await client.call_tool("issue_ready", {})).is_error
            assert holder.stdin is not None
            holder.stdin.write("\n")
            holder.stdin.flush()
            holder.wait(timeout=30)
        assert not (await client.call_tool("issue_create", {"title": "after"})).is_error
    intact(db)


def test_a_lock_holder_killed_mid_transaction_leaves_nothing_behind(tmp_path: Path) -> None:
    db = tmp_path / "queue.db"
    seed(db)
    before = storage.dump(db)
    with lock_holder(db, "immediate") as holder:
        holder.kill()
        holder.wait(timeout=30)
    FAULTS["lock holder killed"] += 1
    assert storage.dump(db) == before  # its uncommitted change is gone
    assert "Created issue #4" in ok(cli(db, "create", "x"))
    intact(db)


def test_an_exclusive_lock_makes_reads_busy_too_and_they_resume(tmp_path: Path) -> None:
    db = tmp_path / "queue.db"
    seed(db)
    with lock_holder(db, "exclusive") as holder:
        FAULTS["exclusive lock"] += 1
        refused(cli(db, "list", run=workq_process), "DATABASE_BUSY", "lock")
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.wait(timeout=30)
    assert "issue 2" in ok(cli(db, "list"))
    intact(db)
