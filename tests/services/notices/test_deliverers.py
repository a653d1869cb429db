"""`workq notify run` processes on one database: two never send one notice at once; kill -9
of one while the receiver holds its request open, and the notice is delivered after a
restart with the same delivery id, so a receiver that drops repeats by that id sees it
once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.services.notices.notices import blocked_issue, blocked_unclaimed, rows
from tests.services.notices.receiver import SECRET, SECRET_VAR, receiver
from workq.config import Settings
from workq.services.handle import Queue
from workq.services.notices import delivery, sinks
from workq.services.runtime import open_queue

pytestmark = pytest.mark.slow


@contextmanager
def notify_run(settings: Settings, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    where = (
        ["--db", str(settings.db_path)]
        if settings.database_url is None
        else ["--database-url", settings.database_url]
    )
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "workq.cli.main", *where, "notify", "run", "--interval", "0.2"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, SECRET_VAR: SECRET},
        )
        try:
            yield process
        finally:
            if process.poll() is None:
                process.terminate()
                process.wait(30)


def wait_until(check: object, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not callable(check) or not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_notice_in_flight_when_its_deliverer_is_killed_is_delivered_once(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_VAR, SECRET)
    q: Queue = open_queue(settings)  # the real clock: the processes share it
    log = tmp_path / "notify-run.log"
    try:
        with receiver(hold=True) as r:
            sinks.add(q, "hook", url=r.url, events="blocked", secret_env=SECRET_VAR)
            blocked_issue(q)
            [row] = rows(q)
            with notify_run(settings, log) as first:
                assert r.arrived.wait(60), log.read_text()
                os.kill(first.pid, signal.SIGKILL)  # the receiver still holds the request
                first.wait(30)
            [held] = rows(q)
            assert held["state"] == "pending" and held["holder"] is not None
            assert held["lease_until"] is not None  # the killed holder's lease is still live
            r.hold = False
            r.release.set()
            with notify_run(settings, log):
                wait_until(lambda: rows(q)[0]["state"] == "delivered")
            assert r.ids() == [row["delivery_id"]] * 2
            assert r.seen_once() == {row["delivery_id"]}
            assert all(got.signed_ok for got in r.received)
        assert delivery.counts(q) == delivery.DeliveryCounts(delivered=1)
        text = log.read_text()
        assert "Traceback" not in text, text
        assert "delivered" in text
    finally:
        q.db.dispose()


def test_two_deliverer_processes_never_send_one_notice_at_once(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_VAR, SECRET)
    q: Queue = open_queue(settings)
    log = tmp_path / "notify-run.log"
    try:
        with receiver(delay=0.05) as r:
            sinks.add(q, "a", url=r.url, events="blocked", secret_env=SECRET_VAR)
            sinks.add(q, "b", url=r.url, events="blocked")
            for i in range(10):
                blocked_unclaimed(q, title=f"issue {i}")
            with notify_run(settings, log), notify_run(settings, log):
                wait_until(lambda: {row["state"] for row in rows(q)} == {"delivered"})
        assert r.overlaps == []
        assert sorted(r.ids()) == sorted(row["delivery_id"] for row in rows(q))
        assert len(r.ids()) == 20 == len(set(r.ids()))
        assert "Traceback" not in log.read_text()
    finally:
        q.db.dispose()
