"""One live server per run id (services/queue/run_ids.py): a binding is a lease on the name; a
second server is refused while it lives, takes it when it lapsed, was given up, or belongs
to a process of this host that no longer runs."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from tests.conftest import FakeClock
from workq.errors import InvalidInput, RunIdInUse
from workq.services.handle import Queue
from workq.services.queue import processes, run_ids

HOST = socket.gethostname()[:60]
ALIVE = f"{HOST}:1:aaaa"  # pid 1 runs on every Linux host
OTHER_HOST = "elsewhere.example:4242:bbbb"


def test_a_second_server_is_refused_while_the_first_lives(queue: Queue) -> None:
    run_ids.bind(queue, "autopilot_main", ALIVE)
    run_ids.bind(queue, "autopilot_main", ALIVE)  # its own binding: renewed
    with pytest.raises(RunIdInUse) as refused:
        run_ids.bind(queue, "autopilot_main", OTHER_HOST)
    assert refused.value.facts["server"] == ALIVE
    assert "pid 1 on" in refused.value.message
    run_ids.bind(queue, "another", OTHER_HOST)  # other run ids are free


def test_a_lapsed_binding_is_taken_and_its_server_loses_it(queue: Queue, clock: FakeClock) -> None:
    run_ids.bind(queue, "r", OTHER_HOST)
    clock.advance(queue.lease_seconds - 1)
    assert set(run_ids.renew(queue, OTHER_HOST, {(OTHER_HOST, "r")})) == {
        (OTHER_HOST, "r")
    }  # renewed before it lapsed
    clock.advance(queue.lease_seconds - 1)
    with pytest.raises(RunIdInUse):
        run_ids.bind(queue, "r", ALIVE)
    clock.advance(2)  # no renewal for a whole lease: the other host's server is gone
    run_ids.bind(queue, "r", ALIVE)
    assert run_ids.renew(queue, OTHER_HOST, {(OTHER_HOST, "r")}) == {}
    with pytest.raises(RunIdInUse):
        run_ids.bind(queue, "r", OTHER_HOST)


def test_a_lapsed_binding_nobody_took_is_not_renewed_but_bound_again(
    queue: Queue, clock: FakeClock
) -> None:
    run_ids.bind(queue, "r", ALIVE)
    clock.advance(queue.lease_seconds + 1)
    assert run_ids.renew(queue, ALIVE, {(ALIVE, "r")}) == {}
    run_ids.bind(queue, "r", ALIVE)
    assert set(run_ids.renew(queue, ALIVE, {(ALIVE, "r")})) == {(ALIVE, "r")}


def test_a_killed_servers_binding_on_this_host_is_taken_at_once(queue: Queue) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    gone = f"{HOST}:{dead.stdout.strip()}:cccc"
    assert processes.gone(gone)
    run_ids.bind(queue, "r", gone)
    run_ids.bind(queue, "r", ALIVE)
    assert set(run_ids.renew(queue, ALIVE, {(ALIVE, "r")})) == {(ALIVE, "r")}


def test_an_exiting_server_gives_its_run_ids_up(queue: Queue) -> None:
    run_ids.bind(queue, "a", ALIVE)
    run_ids.bind(queue, "b", ALIVE)
    assert run_ids.unbind(queue, ALIVE) == 2
    run_ids.bind(queue, "a", OTHER_HOST)


def test_processes_of_other_hosts_or_other_forms_are_never_known_gone() -> None:
    assert not processes.gone(OTHER_HOST)
    assert not processes.gone("not-a-token")
    assert not processes.gone(processes.token())  # this very process


def test_a_bad_run_id_is_refused_and_binds_nothing(queue: Queue) -> None:
    with pytest.raises(InvalidInput):
        run_ids.bind(queue, "bad\nname", ALIVE)
    assert run_ids.unbind(queue, ALIVE) == 0


def test_sessions_of_one_server_bind_as_callers_of_their_own(queue: Queue) -> None:
    """An HTTP session binds as ``server:session-run-id``: another session of the same
    server naming its run id is refused; the server's renewal and exit cover its sessions."""
    one, two = f"{ALIVE}:run-aaaa", f"{ALIVE}:run-bbbb"
    run_ids.bind(queue, "run-aaaa", one)
    with pytest.raises(RunIdInUse):
        run_ids.bind(queue, "run-aaaa", two)
    with pytest.raises(RunIdInUse):
        run_ids.check(queue, "run-aaaa", two)
    run_ids.check(queue, "run-aaaa", one)  # its own
    run_ids.check(queue, "free-id", two)  # nobody's
    assert set(run_ids.renew(queue, ALIVE, {(one, "run-aaaa")})) == {(one, "run-aaaa")}
    assert run_ids.unbind(queue, ALIVE) == 1
    run_ids.bind(queue, "run-aaaa", two)
