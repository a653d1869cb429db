"""Delivering the notice outbox to a real HTTP receiver on 127.0.0.1 and to a real command:
signed, at least once, retried with backoff, failed after the retries, never twice at once."""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Connection, update

from tests.conftest import FakeClock
from tests.services.notices.notices import blocked_issue, blocked_unclaimed, rows
from tests.services.notices.receiver import SECRET, SECRET_VAR, receiver
from workq.db.tables import notices
from workq.services import handle
from workq.services.handle import Queue
from workq.services.notices import delivery, senders, sinks
from workq.services.queue import issues

ME = "host-a:1:aaaa"


@pytest.fixture(autouse=True)
def _secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_VAR, SECRET)


def test_a_notice_is_signed_delivered_once_and_says_what_happened(queue: Queue) -> None:
    with receiver() as r:
        sinks.add(queue, "hook", url=r.url, events="blocked", secret_env=SECRET_VAR)
        number = blocked_issue(queue, title="Fix the <login> page & more @channel")
        [row] = rows(queue)
        assert row["state"] == "pending" and row["event"] == "blocked"
        report = delivery.deliver_due(queue, ME)
        assert report == delivery.DeliveryReport(taken=1, delivered=1)
        assert delivery.deliver_due(queue, ME).taken == 0  # delivered: never again
    [got] = r.received
    assert got.signed_ok is True
    assert got.delivery == row["delivery_id"] == got.body["delivery"]
    assert got.event == "blocked" and got.headers["Content-Type"] == "application/json"
    assert got.headers["User-Agent"].startswith("workq/")
    body = got.body
    assert body["event"] == "blocked" and body["kind"] == "blocked"
    assert body["issue"] == {
        "number": number,
        "title": "Fix the <login> page & more @channel",
        "status": "open",
        "blocked": True,
    }
    assert body["holder"] == "run-a"
    assert body["reason"] == "needs a decision on the API"
    assert body["next_step"] == f"workq show {number}, then: workq unblock {number}"
    assert body["detail"] == {"blocked_reason": "needs a decision on the API"}
    assert body["at"].startswith("2026-01-01T12:00:00")
    text = body["text"]
    assert "\n" not in text
    assert f"#{number}" in text and "held by run-a" in text
    assert "needs a decision on the API" in text and f"Next: workq show {number}" in text
    # Escaped as Slack asks: a title makes no link and no channel-wide mention.
    assert "&lt;login&gt;" in text and "&amp; more" in text and "<" not in text
    assert "@channel" not in text
    [after] = rows(queue)
    assert after["state"] == "delivered" and after["attempts"] == 1
    assert after["holder"] is None and after["delivered_at"] is not None


def test_an_unsigned_sink_gets_no_signature_and_a_notice_without_holder(queue: Queue) -> None:
    with receiver() as r:
        sinks.add(queue, "plain", url=r.url, events="all")
        number = blocked_unclaimed(queue)
        delivery.deliver_due(queue, ME)
    [got] = r.received
    assert got.signed_ok is None and "X-Workq-Signature-256" not in got.headers
    assert got.body["holder"] is None and got.body["issue"]["number"] == number
    assert "held by" not in got.body["text"]


def test_a_500_is_retried_with_backoff_then_failed(queue: Queue, clock: FakeClock) -> None:
    with receiver(status=500) as r:
        sinks.add(queue, "down", url=r.url, events="blocked")
        blocked_issue(queue)
        waits = []
        for attempt in range(1, delivery.MAX_ATTEMPTS + 1):
            report = delivery.deliver_due(queue, ME)
            assert report.taken == 1, attempt
            [row] = rows(queue)
            assert row["attempts"] == attempt
            assert row["last_error"].startswith("HTTP 500")
            if attempt < delivery.MAX_ATTEMPTS:
                assert row["state"] == "pending" and report.retrying == 1
                assert delivery.deliver_due(queue, ME).taken == 0  # not due yet
                wait = (row["next_attempt_at"] - clock.now).total_seconds()
                waits.append(wait)
                clock.advance(wait)
        assert row["state"] == "failed" and report.failed == 1
        clock.advance(10 * 24 * 3600)
        assert delivery.deliver_due(queue, ME).taken == 0  # failed: left alone
    assert len(r.received) == delivery.MAX_ATTEMPTS
    assert len(set(r.ids())) == 1  # one delivery id for every attempt
    assert waits[0] >= delivery.BACKOFF_BASE * 0.8 and waits[1] > waits[0]
    assert max(waits) <= delivery.BACKOFF_CAP * 1.2
    [failed] = delivery.recent(queue, 10, state="failed")
    assert failed.sink == "down" and failed.last_error and failed.next_attempt_at is None
    assert delivery.counts(queue) == delivery.DeliveryCounts(failed=1)


@pytest.mark.parametrize(("status", "state"), [(404, "failed"), (410, "failed"), (429, "pending")])
def test_a_4xx_fails_at_once_but_408_and_429_are_retried(
    queue: Queue, status: int, state: str
) -> None:
    with receiver(status=status) as r:
        sinks.add(queue, "h", url=r.url, events="blocked")
        blocked_issue(queue)
        delivery.deliver_due(queue, ME)
    [row] = rows(queue)
    assert row["state"] == state and row["attempts"] == 1
    assert row["last_error"].startswith(f"HTTP {status}")


def test_a_redirect_is_not_followed(queue: Queue) -> None:
    with receiver(status=302) as r:
        sinks.add(queue, "moved", url=r.url, events="blocked")
        blocked_issue(queue)
        delivery.deliver_due(queue, ME)
    [row] = rows(queue)
    assert row["state"] == "failed" and "redirects are not followed" in row["last_error"]
    assert len(r.received) == 1


def test_a_hanging_receiver_times_out_and_other_sinks_still_get_theirs(
    queue: Queue, clock: FakeClock
) -> None:
    with receiver(hold=True) as hung, receiver() as fine:
        sinks.add(queue, "hung", url=hung.url, events="blocked")
        sinks.add(queue, "fine", url=fine.url, events="blocked")
        blocked_issue(queue)
        blocked_unclaimed(queue)
        started = time.monotonic()
        report = delivery.deliver_due(queue, ME)
        took = time.monotonic() - started
        # The good sink's two went out; the hung one's first timed out, its second waits.
        assert len(fine.received) == 2
        assert report.delivered == 2 and report.retrying == 1 and report.taken == 3
        assert senders.WEBHOOK_SECONDS <= took < senders.WEBHOOK_SECONDS + 10
        by_sink = {(r["sink_id"], r["number"]): r for r in rows(queue)}
        waiting = [r for r in by_sink.values() if r["state"] == "pending"]
        assert len(waiting) == 2
        timed_out = [r for r in waiting if r["attempts"] == 1]
        assert [r["last_error"] for r in timed_out] == ["no answer in 5 s"]
        hung.hold = False  # it answers again
        hung.release.set()
        clock.advance(delivery.BACKOFF_CAP)
        assert delivery.deliver_due(queue, ME).delivered == 2
    assert {r["state"] for r in rows(queue)} == {"delivered"}
    assert len(hung.seen_once()) == 2


def test_the_secret_missing_at_delivery_fails_the_attempt_unsent(
    queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    with receiver() as r:
        sinks.add(queue, "signed", url=r.url, events="blocked", secret_env=SECRET_VAR)
        blocked_issue(queue)
        monkeypatch.delenv(SECRET_VAR)
        delivery.deliver_due(queue, ME)
        assert r.received == []  # never unsigned
    [row] = rows(queue)
    assert row["state"] == "pending" and row["attempts"] == 1
    assert row["last_error"] == (
        f"the signing secret's variable {SECRET_VAR} is not set in the delivering process: "
        "not sent unsigned"
    )


def script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(body)
    return f"{sys.executable} {path}"


def test_a_command_gets_the_notice_on_stdin(queue: Queue, tmp_path: Path) -> None:
    out = tmp_path / "told.jsonl"
    told = script(
        tmp_path,
        "told.py",
        "import json, os, sys\n"
        "body = json.load(sys.stdin)\n"
        f"with open({str(out)!r}, 'a') as f:\n"
        "    f.write(json.dumps({'body': body, 'secret': os.environ.get("
        f"{SECRET_VAR!r})}}) + '\\n')\n",
    )
    sinks.add(queue, "desk", command=told, events="blocked")
    number = blocked_issue(queue)
    assert delivery.deliver_due(queue, ME).delivered == 1
    [line] = out.read_text().splitlines()
    seen = json.loads(line)
    assert seen["body"]["issue"]["number"] == number
    assert seen["body"]["delivery"] == rows(queue)[0]["delivery_id"]
    assert seen["secret"] is None  # the environment is allow-listed


def test_a_failing_command_leaves_its_last_stderr_line(queue: Queue, tmp_path: Path) -> None:
    failing = script(
        tmp_path,
        "fail.py",
        "import sys\nsys.stdin.read()\nprint('first', file=sys.stderr)\n"
        "print('pager refused: no route', file=sys.stderr)\nsys.exit(3)\n",
    )
    sinks.add(queue, "pager", command=failing, events="blocked")
    blocked_issue(queue)
    delivery.deliver_due(queue, ME)
    [row] = rows(queue)
    assert row["state"] == "pending"
    assert row["last_error"] == f"{Path(sys.executable).name} exited with status 3: " + (
        "pager refused: no route"
    )


def test_a_command_that_runs_too_long_is_killed(
    queue: Queue, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(senders, "COMMAND_SECONDS", 0.5)
    slow = script(tmp_path, "slow.py", "import time\ntime.sleep(30)\n")
    sinks.add(queue, "slow", command=slow, events="blocked")
    blocked_issue(queue)
    started = time.monotonic()
    delivery.deliver_due(queue, ME)
    assert time.monotonic() - started < 10
    [row] = rows(queue)
    assert row["state"] == "pending" and "did not finish in 0.5 s" in row["last_error"]


def test_two_deliverers_never_send_one_notice_at_once(queue: Queue) -> None:
    with receiver(delay=0.05) as r:
        sinks.add(queue, "a", url=r.url, events="blocked")
        sinks.add(queue, "b", url=r.url, events="blocked")
        for i in range(6):
            blocked_unclaimed(queue, title=f"issue {i}")
        start = threading.Barrier(2)
        reports: list[delivery.DeliveryReport] = []

        def deliverer(name: str) -> None:
            start.wait()
            while True:
                report = delivery.deliver_due(queue, name)
                reports.append(report)
                if report.taken == 0:
                    return

        threads = [threading.Thread(target=deliverer, args=(n,)) for n in (ME, "host-b:2:bbbb")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert r.overlaps == []
    assert sorted(r.ids()) == sorted(row["delivery_id"] for row in rows(queue))
    assert len(r.ids()) == 12 == len(set(r.ids()))  # each once: no lease lapsed
    assert sum(rep.delivered for rep in reports) == 12
    assert {row["state"] for row in rows(queue)} == {"delivered"}


def test_a_live_holder_keeps_its_row_and_a_lapsed_lease_is_taken(
    queue: Queue, clock: FakeClock
) -> None:
    with receiver() as r:
        sinks.add(queue, "h", url=r.url, events="blocked")
        blocked_issue(queue)
        other = "elsewhere.example:4242:cafe"  # another host's process: never known gone
        with queue.db.engine.begin() as conn:
            conn.execute(
                update(notices).values(holder=other, lease_until=clock.now + timedelta(seconds=60))
            )
        assert delivery.deliver_due(queue, ME).taken == 0
        clock.advance(61)
        assert delivery.deliver_due(queue, ME).delivered == 1
    assert len(r.received) == 1


def test_a_gone_holders_row_is_taken_before_its_lease_lapses(
    queue: Queue, clock: FakeClock
) -> None:
    with receiver() as r:
        sinks.add(queue, "h", url=r.url, events="blocked")
        blocked_issue(queue)
        dead = f"{socket.gethostname()}:{2**22 + 7}:dead"  # a pid no process has
        with queue.db.engine.begin() as conn:
            conn.execute(
                update(notices).values(holder=dead, lease_until=clock.now + timedelta(hours=1))
            )
        assert delivery.deliver_due(queue, ME).delivered == 1


def test_the_loop_delivers_until_stopped_and_survives_a_bad_receiver(queue: Queue) -> None:
    with receiver(status=lambda n: 500 if n == 1 else 204) as r:
        sinks.add(queue, "h", url=r.url, events="blocked")
        sinks.add(queue, "gone", url="http://127.0.0.1:1/", events="blocked", check=False)
        blocked_issue(queue)
        stop = threading.Event()
        loop = threading.Thread(target=delivery.run, args=(queue, stop, ME, 0.05))
        loop.start()
        r.wait_for(1)
        stop.set()
        loop.join(30)
        assert not loop.is_alive()
    states = {row["sink_id"]: (row["state"], row["last_error"]) for row in rows(queue)}
    assert sorted(s for s, _ in states.values()) == ["pending", "pending"]
    assert any("refused" in (e or "").lower() for _, e in states.values())


def test_a_removed_sinks_notices_go_with_it(queue: Queue) -> None:
    sinks.add(queue, "h", url="http://127.0.0.1:1/", events="blocked", check=False)
    blocked_issue(queue)
    assert sinks.remove(queue, "h") == 1
    assert rows(queue) == []


def test_send_test_reports_success_and_failure(queue: Queue) -> None:
    with receiver() as r:
        sinks.add(queue, "ok", url=r.url, events="all", secret_env=SECRET_VAR)
        result = delivery.send_test(queue, "ok")
    assert result.ok and result.status == 204 and result.error is None
    [got] = r.received
    assert got.event == "test" and got.signed_ok is True and got.body["issue"] is None
    assert "test notice" in got.body["text"]
    assert rows(queue) == []  # not through the outbox
    with receiver(status=403) as r:
        sinks.add(queue, "no", url=r.url, events="all")
        refused = delivery.send_test(queue, "no")
    assert not refused.ok and refused.status == 403 and refused.error
    assert refused.error.startswith("HTTP 403")


def test_a_deliverer_whose_lease_lapsed_marks_nothing(queue: Queue, clock: FakeClock) -> None:
    """A's send outlives its lease; B takes the row and delivers it; A's late answer (a
    failure) does not put the delivered row back to pending."""
    seen: list[delivery.DeliveryReport] = []

    def answer(count: int) -> int:
        if count == 1:  # A's request: its lease lapses, B delivers meanwhile
            clock.advance(delivery.LEASE_SECONDS + 1)
            seen.append(delivery.deliver_due(queue, "host-b:2:bbbb"))
            return 500
        return 204

    with receiver(status=answer) as r:
        sinks.add(queue, "h", url=r.url, events="blocked")
        blocked_issue(queue)
        report = delivery.deliver_due(queue, ME)
    assert seen == [delivery.DeliveryReport(taken=1, delivered=1)]
    assert report == delivery.DeliveryReport(taken=1, lost=1)
    [row] = rows(queue)
    assert row["state"] == "delivered" and row["attempts"] == 1 and row["last_error"] is None
    assert r.ids() == [row["delivery_id"]] * 2


def test_a_stall_and_a_drained_queue_say_who_for_how_long_and_what_next(queue: Queue) -> None:
    """The events the watch records (kind ``stalled`` with the holder, since when and for how
    long; ``queue_drained`` of no issue), written the way any event is."""
    with receiver() as r:
        sinks.add(queue, "h", url=r.url, events="stalled,drained")
        number = issues.create(queue, title="Slow work", actor="tester").number
        since = queue.now() - timedelta(minutes=50)

        def record(conn: Connection) -> None:
            handle.record(
                queue, conn, kind="stalled", issue_id=None, number=number, actor="workq",
                now=queue.now(), after={"holder": "run-b", "since": since},
            )  # fmt: skip
            handle.record(
                queue, conn, kind="queue_drained", issue_id=None, number=None, actor="workq",
                now=queue.now(), after={"open": 0},
            )  # fmt: skip

        queue.db.write(record)
        assert delivery.deliver_due(queue, ME).delivered == 2
    stalled, drained = sorted(r.received, key=lambda got: got.event != "stalled")
    body = stalled.body
    assert body["event"] == "stalled" and body["holder"] == "run-b"
    assert body["for_seconds"] == 3000 and body["since"].startswith("2026-01-01T11:10:00")
    assert body["text"] == (
        f'[workq] stalled: #{number} "Slow work", held by run-b for 50m: a claim made no '
        f"progress for stall_after. Next: workq show {number}, then ask its agent, or: "
        f"workq release {number} --force"
    )
    assert drained.body["issue"] is None and drained.body["kind"] == "queue_drained"
    assert drained.body["text"].startswith("[workq] drained: the queue drained")
    assert drained.body["detail"] == {"open": 0}
