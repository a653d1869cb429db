"""Processes and mounts for the torture tests: finding a process by a marker in its command
line, waiting for it to be gone, a shared fork server, and small tmpfs mounts."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.context import ForkServerContext
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# What the fork server imports once, so that a worker forked from it starts in milliseconds
# instead of the second that importing SQLAlchemy, pydantic and the MCP SDK costs.
PRELOAD = [
    "workq.services.queue.claims",
    "workq.services.queue.issues",
    "workq.services.queue.dependencies",
    "workq.services.queue.notes",
    "workq.services.maintenance.maintenance",
    "workq.services.runtime",
    "workq.db.migrate",
    "mcp",
    "mcp.client.stdio",
    "anyio.from_thread",
    "tests.torture.workload",
]

_context: ForkServerContext | None = None


def forkserver() -> ForkServerContext:
    """One fork server per test process, with workq and the MCP client preloaded."""
    global _context
    if _context is None:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(PRELOAD)
        _context = context
    return _context


def pids_with(*markers: bytes, excluding: bytes | None = None) -> list[int]:
    """Live processes whose command line holds every marker (zombies excluded), and not
    ``excluding``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if excluding is not None and excluding in cmdline:
            continue
        if state != "Z" and all(m in cmdline for m in markers):
            found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_gone(pids: list[int], timeout: float) -> list[int]:
    """Wait until none of ``pids`` runs; returns those still running at the deadline."""
    deadline = time.monotonic() + timeout
    left = [p for p in pids if alive(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.02)
        left = [p for p in left if alive(p)]
    return left


def can_mount() -> bool:
    return os.geteuid() == 0 and shutil.which("mount") is not None


@contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A fresh tmpfs of ``size`` mounted at ``where`` (root only), unmounted afterwards."""
    if not can_mount():
        pytest.skip("mounting a small filesystem needs root and mount(8)")
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"mount is not permitted here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def remount(where: Path, mode: str) -> None:
    """Remount with new options: "ro", "rw", "size=16m"."""
    subprocess.run(["mount", "-o", f"remount,{mode}", str(where)], check=True)


def can_chattr(probe_dir: Path) -> bool:
    if os.geteuid() != 0 or shutil.which("chattr") is None:
        return False
    probe = probe_dir / ".chattr-probe"
    probe.write_text("x")
    try:
        made = subprocess.run(["chattr", "+i", str(probe)], capture_output=True).returncode == 0
        if made:
            subprocess.run(["chattr", "-i", str(probe)], check=True)
        return made
    finally:
        probe.unlink()


@contextmanager
def immutable(path: Path) -> Iterator[None]:
    """``chattr +i``: even root cannot write the file, or create files in the folder."""
    subprocess.run(["chattr", "+i", str(path)], check=True)
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)
