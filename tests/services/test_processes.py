"""Names of workq processes (services/queue/processes.py): one form built, host:pid:nonce;
the older host:pid of the GitHub sync worker still read."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from workq.services.queue import processes

HOST = socket.gethostname()


def _dead_pid() -> int:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    return dead.pid


def test_a_name_is_host_pid_nonce() -> None:
    host, pid, nonce = processes.token().split(":")
    assert (host, int(pid)) == (HOST[: processes.HOST_MAX], os.getpid())
    assert len(nonce) == 8 and processes.token() != processes.token()


def test_this_process_has_one_name() -> None:
    assert processes.this_process() == processes.this_process()
    assert processes.parse(processes.this_process()) == (HOST[: processes.HOST_MAX], os.getpid())


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        ("box:42:abcd1234", ("box", 42)),
        ("box:42", ("box", 42)),  # the sync worker's name before
        ("box", None),
        ("box:x:abcd", None),
        ("not-a-token", None),
        ("", None),
    ],
)
def test_both_forms_are_read(name: str, parsed: tuple[str, int] | None) -> None:
    assert processes.parse(name) == parsed


def test_a_dead_process_of_this_host_is_gone_in_either_form() -> None:
    pid = _dead_pid()
    assert processes.gone(f"{HOST[: processes.HOST_MAX]}:{pid}:abcd1234")
    assert processes.gone(f"{HOST}:{pid}")  # the whole host name, as the worker wrote it


def test_a_live_process_or_another_host_is_never_gone() -> None:
    assert not processes.gone(processes.this_process())
    assert not processes.gone(f"{HOST}:{os.getpid()}")
    assert not processes.gone(f"elsewhere.example:{_dead_pid()}")
