"""The change feed: it moves when another connection commits an event, and only then."""

from __future__ import annotations

from workq.config import Settings
from workq.domain.authority import Authority
from workq.services.queue import claims, issues, notes
from workq.services.runtime import open_queue

QUIET = 1.5  # longer than the feed's retry pause: a failing source would show as a wake
LONG = 60.0


def test_the_feed_moves_on_a_commit_elsewhere_and_not_on_idle_writes(
    settings: Settings,
) -> None:
    watcher = open_queue(settings, migrate=True)
    writer = open_queue(settings)  # another Database: its writes reach the feed only
    try:  # through the database (poll or NOTIFY)
        feed = watcher.db.changes
        with feed.watching():
            seen = feed.version()
            assert (
                claims.claim_next(watcher, Authority.of({"idle"})) is None
            )  # a write that changed nothing
            assert not feed.wait_past(seen, QUIET)
            issues.create(writer, title="news")
            assert feed.wait_past(seen, LONG)
            seen = feed.version()
            assert not feed.wait_past(seen, QUIET)
    finally:
        writer.db.dispose()
        watcher.db.dispose()


def test_waiters_wake_for_work_not_for_a_claim_or_a_comment(settings: Settings) -> None:
    """``work`` moves on a change that may make an issue claimable (here, a creation), and
    not on a claim or a comment, which ``version`` (what the board follows) still shows."""
    watcher = open_queue(settings, migrate=True)
    writer = open_queue(settings)
    try:
        feed = watcher.db.changes
        issues.create(writer, title="first")
        with feed.watching():
            seen, work = feed.version(), feed.work()
            claims.claim_next(writer, Authority.of({"agent"}))
            notes.comment(writer, 1, "on it", author="agent")
            assert feed.wait_past(seen, LONG)
            assert not feed.wait_work_past(work, QUIET)
            issues.create(writer, title="second")
            assert feed.wait_work_past(work, LONG)
    finally:
        writer.db.dispose()
        watcher.db.dispose()
