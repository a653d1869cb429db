"""The change feed: it moves when another connection commits an event, and only then."""

from __future__ import annotations

from workq.config import Settings
from workq.services.queue import claims, issues
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
            assert claims.claim_next(watcher, "idle") is None  # a write that changed nothing
            assert not feed.wait_past(seen, QUIET)
            issues.create(writer, title="news")
            assert feed.wait_past(seen, LONG)
            seen = feed.version()
            assert not feed.wait_past(seen, QUIET)
    finally:
        writer.db.dispose()
        watcher.db.dispose()
