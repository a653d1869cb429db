"""The sync worker: pushes the outbox to GitHub, one request at a time.

For each due outbox row it reads the issue's current state and compares it with the
snapshot of what GitHub held after the last push; only fields that differ are sent, as
absolute values (the whole label set, ``state`` with ``state_reason``), so sending them
twice is harmless. Creating is the one step that could duplicate: the row is marked before
the POST, and while it is marked the issue is first looked for by its hidden marker in the
repository's issue list. The same holds for comments.

Failures never make the worker sleep inside a request: a rate limit or a 5xx moves the row's
``next_attempt_at`` and the worker goes on with other rows. A 401 or a 403 that is not a
rate limit stops the worker (retrying cannot help); a request GitHub rejects parks the row.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, NoReturn

from workq.domain import backoff, leases
from workq.errors import Conflict
from workq.github.client import GitHubClient
from workq.github.failures import (
    AuthFailed,
    GitHubCallError,
    GitHubRejected,
    MovedOnGitHub,
    NotFoundOnGitHub,
    RateLimited,
    Unclear,
)
from workq.github.labels import RepoLabels
from workq.github.models import GhComment, GhIssue
from workq.github.pacing import Pacer
from workq.github.render import (
    Snapshot,
    comment_marker,
    desired,
    is_managed_prefix,
    marker,
    merged_labels,
    remote_snapshot,
    render_body,
    render_comment,
    same_labels,
)
from workq.services.handle import Queue
from workq.services.queue import processes
from workq.services.sync import mirror, mirror_target, outbox_rows, sync_status, worker_lease
from workq.services.sync.mirror import LinkState, LocalComment, PushState

log = logging.getLogger("workq.github")

# (phase, done, total): "push" or "import"; total is None when unknown.
Progress = Callable[[str, int, int | None], None]


@dataclass(frozen=True)
class Options:
    write_interval: float = 1.0  # seconds between writes (GitHub: ~80 creations a minute)
    max_attempts: int = 10  # failed attempts before a row is parked as dead
    backoff_base: float = 5.0  # first wait after a 5xx or timeout, doubled per attempt
    backoff_max: float = 3600.0
    lookup_margin: float = 300.0  # how far before a create its marker is looked for
    import_overlap: float = 120.0  # how far the import's since cursor reaches back
    poll_interval: float = 1.0  # --watch: how often to look for due rows
    import_interval: float = 60.0  # --watch --import: how often to import
    lease_seconds: float = 60.0  # how long the worker's hold on the mirror lasts unrenewed
    batch: int = 100


@dataclass
class PushReport:
    rows: int = 0  # rows finished
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    comments: int = 0
    found: int = 0  # issues or comments found by their marker after an unclear create
    gone: int = 0  # issues deleted or moved on GitHub
    rescheduled: int = 0
    dead: int = 0
    writes: int = 0
    held_until: datetime | None = None  # a rate limit holds every request until then
    errors: list[str] = field(default_factory=list)


class WorkerBusy(Conflict):
    """Another worker is mirroring this repository."""

    code = "GITHUB_WORKER_BUSY"
    hint = "stop it first, or let it do the work"


class _Gone(Exception):
    """The GitHub issue was deleted or moved: stop pushing to it."""


class Worker:
    """Pushes one database's outbox to one repository. Not thread-safe: one per thread."""

    def __init__(
        self,
        q: Queue,
        client: GitHubClient,
        repo: str,
        login: str,
        *,
        options: Options | None = None,
        progress: Progress | None = None,
        stop: threading.Event | None = None,
        sleep: Callable[[float], object] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.q = q
        self.client = client
        self.repo = repo
        self.login = login
        self.options = options or Options()
        self.progress = progress
        self.stop = stop or threading.Event()
        self.pace = Pacer(self.options.write_interval, sleep or self.stop.wait, clock)
        self.labels = RepoLabels(client, repo, self.pace)
        self.name = processes.this_process()
        self.held_until: datetime | None = None
        self._secondary_streak = 0
        self._lease_renewed = float("-inf")

    # the lease --------------------------------------------------------------------------------

    def hold_lease(self) -> None:
        """Take (or renew) this worker's hold on the mirror.

        Raises:
            WorkerBusy: another live worker holds it.
        """
        until = leases.until(self.q.now(), self.options.lease_seconds)
        other = worker_lease.take(self.q, self.repo, self.name, until)
        if other is not None:
            raise WorkerBusy(
                f"another worker ({other}) is mirroring {self.repo}", worker=other, repo=self.repo
            )
        self._lease_renewed = time.monotonic()

    def renew_lease(self) -> None:
        if time.monotonic() - self._lease_renewed >= leases.renewal_period(
            self.options.lease_seconds
        ):
            self.hold_lease()

    def release_lease(self) -> None:
        worker_lease.release(self.q, self.repo, self.name)

    # passes -----------------------------------------------------------------------------------

    def push_pass(self) -> PushReport:
        """Push every due row once (rows rescheduled meanwhile wait for their time)."""
        report = PushReport()
        total: int | None = None
        done = 0
        seen: set[str] = set()
        writes_before = self.pace.writes
        while not self.stop.is_set():
            if self._held(report):
                break
            batch = [
                i
                for i in outbox_rows.due(self.q, limit=self.options.batch)
                if i.issue_id not in seen
            ]
            if not batch:
                break
            if total is None and self.progress is not None:
                total = sync_status.status(self.q, problems=0).due_now
            for item in batch:
                if self.stop.is_set() or self._held(report):
                    break
                self.renew_lease()
                seen.add(item.issue_id)
                self._push_row(item, report)
                done += 1
                if self.progress is not None:
                    self.progress("push", done, max(total or 0, done))
        report.writes = self.pace.writes - writes_before
        if report.rows:
            mirror_target.note_mirror(self.q, self.repo, last_push_at=self.q.now())
        return report

    def _held(self, report: PushReport) -> bool:
        if self.held_until is not None and self.q.now() < self.held_until:
            report.held_until = self.held_until
            return True
        self.held_until = None
        return False

    def _push_row(self, item: outbox_rows.OutboxItem, report: PushReport) -> None:
        try:
            self._push(item, report)
        except RateLimited as exc:
            log.warning("issue #%s: %s", item.number, exc.message)
            outbox_rows.reschedule(
                self.q,
                item.issue_id,
                exc.retry_at,
                exc.message,
                count_attempt=False,
                max_attempts=self.options.max_attempts,
            )
            report.rescheduled += 1
            self._rate_limited(exc)
        except AuthFailed as exc:
            mirror_target.note_mirror(self.q, self.repo, last_error=exc.message)
            outbox_rows.reschedule(
                self.q,
                item.issue_id,
                self.q.now(),
                exc.message,
                count_attempt=False,
                max_attempts=self.options.max_attempts,
            )
            raise
        except GitHubRejected as exc:
            log.error("issue #%s: %s (parked)", item.number, exc.message)
            outbox_rows.park(self.q, item.issue_id, exc.message)
            report.dead += 1
            report.errors.append(f"#{item.number}: {exc.message}")
        except GitHubCallError as exc:  # Unclear, or an unexpected 404/301 of the repository
            self._secondary_streak = 0
            retry_at = getattr(exc, "retry_at", None) or self._backoff(item.attempts)
            after = outbox_rows.reschedule(
                self.q,
                item.issue_id,
                retry_at,
                exc.message,
                count_attempt=True,
                max_attempts=self.options.max_attempts,
            )
            if after is not None and after.state == outbox_rows.DEAD:
                report.dead += 1
                report.errors.append(f"#{item.number}: {exc.message}")
            else:
                report.rescheduled += 1
            log.warning("issue #%s: %s; next attempt %s", item.number, exc.message, retry_at)
        else:
            self._secondary_streak = 0
            self.pace.calm()

    def _backoff(self, attempts: int) -> datetime:
        wait = backoff.delay(attempts, self.options.backoff_base, self.options.backoff_max)
        return self.q.now() + timedelta(seconds=wait)

    def _rate_limited(self, exc: RateLimited) -> None:
        """Decide whether the limit holds every request or only this row's."""
        if exc.secondary:
            # One secondary limit may be about one endpoint or a burst; two in a row mean
            # GitHub wants a pause, and requests made during it count against us.
            self.pace.slow_down()
            self._secondary_streak += 1
            if self._secondary_streak >= 2:
                self.held_until = exc.retry_at
            return
        try:
            core = self.client.get_rate_limit()  # costs no quota
        except GitHubCallError:
            self.held_until = exc.retry_at
            return
        if core.remaining == 0:
            self.held_until = max(core.reset, self.q.now())

    # one row ----------------------------------------------------------------------------------

    def _push(self, item: outbox_rows.OutboxItem, report: PushReport) -> None:
        state = mirror.push_state(self.q, item.issue_id)
        link = state.link
        if link is None and item.uncertain:
            link = self._find_created(state, item)
            if link is not None:
                report.found += 1
        if link is None:
            if state.issue is None:  # deleted before it ever reached GitHub
                outbox_rows.finish(self.q, item)
                report.rows += 1
                return
            link = self._create(state)
            report.created += 1
        if item.uncertain:
            outbox_rows.create_settled(self.q, item.issue_id)

        snap = Snapshot.from_json(link.snapshot)
        if snap.gone is None:
            try:
                if self._update(state, link, snap):
                    report.updated += 1
                elif not state.comments:
                    report.unchanged += 1
                for comment in state.comments:
                    if self._comment(state, link, comment):
                        report.found += 1
                    else:
                        report.comments += 1
            except _Gone:
                report.gone += 1
        outbox_rows.finish(self.q, item)
        report.rows += 1

    def _create(self, state: PushState) -> LinkState:
        issue = state.issue
        assert issue is not None
        want = desired(issue, None)
        self.labels.ensure(want.labels)
        outbox_rows.create_started(self.q, state.issue_id)
        self.pace()
        try:
            created = self.client.create_issue(
                self.repo,
                title=want.title,
                body=render_body(issue.id, issue.title, issue.description),
                labels=list(want.labels),
            )
        except Unclear as exc:
            if not exc.maybe_applied:
                outbox_rows.create_settled(self.q, state.issue_id)
            raise
        except GitHubCallError:
            outbox_rows.create_settled(self.q, state.issue_id)  # GitHub answered: not created
            raise
        # Created open: a done issue is closed by the update that follows.
        sent = Snapshot(want.title, want.body, True, want.labels, "open")
        return self._link(state, created, sent)

    def _link(self, state: PushState, gh: GhIssue, snap: Snapshot) -> LinkState:
        number = state.issue.number if state.issue else self._number_of(state)
        mirror.save_link(
            self.q,
            issue_id=state.issue_id,
            number=number,
            repo=self.repo,
            gh_number=gh.number,
            url=gh.html_url,
            snapshot=snap.to_json(),
            remote_updated_at=gh.updated_at,
        )
        link = mirror.link_of_issue(self.q, state.issue_id)
        assert link is not None
        return link

    def _number_of(self, state: PushState) -> int:
        item = outbox_rows.get(self.q, state.issue_id)
        return item.number if item else 0

    def _find_created(self, state: PushState, item: outbox_rows.OutboxItem) -> LinkState | None:
        """After an unclear create: look for the issue by its marker (the issue list, not
        the search API, whose index lags)."""
        assert item.create_started_at is not None
        since = item.create_started_at - timedelta(seconds=self.options.lookup_margin)
        found = self._find_issue(marker(item.issue_id), since)
        if found is None:
            outbox_rows.create_settled(self.q, item.issue_id)
            return None
        log.info(
            "issue #%s: found on GitHub as #%s after an unclear create", item.number, found.number
        )
        want = desired(state.issue, None) if state.issue else None
        owned = [n for n in found.label_names if is_managed_prefix(n)]
        if want is not None:
            owned += [n for n in found.label_names if n.lower() in {w.lower() for w in want.labels}]
        return self._link(state, found, remote_snapshot(found, owned))

    def _find_issue(self, text: str, since: datetime) -> GhIssue | None:
        page = self.client.list_issues(
            self.repo,
            state="all",
            creator=self.login,
            sort="created",
            direction="desc",
            since=since,
            per_page=100,
        )
        while True:
            for candidate in page.items:
                if text in (candidate.body or ""):
                    return candidate
                if candidate.created_at < since:
                    return None
            if page.next_url is None:
                return None
            page = self.client.list_issues(self.repo, page_url=page.next_url)

    def _update(self, state: PushState, link: LinkState, snap: Snapshot) -> bool:
        """PATCH what differs from the snapshot. True if a request was sent."""
        want = desired(state.issue, snap)
        payload: dict[str, Any] = {}
        if want.title != snap.title:
            payload["title"] = want.title
        if state.issue is not None and (want.body != snap.body or not snap.marker):
            payload["body"] = render_body(
                state.issue.id, state.issue.title, state.issue.description
            )
        if want.state != snap.state:
            payload["state"] = want.state
            payload["state_reason"] = want.state_reason if want.state == "closed" else "reopened"
        if not same_labels(want.labels, snap.labels):
            try:
                current = self.client.get_issue(self.repo, link.gh_number)
            except (NotFoundOnGitHub, MovedOnGitHub) as exc:
                self._mark_gone(link, snap, exc)
            labels = merged_labels(current.label_names, snap.labels, want.labels)
            if not same_labels(labels, current.label_names):
                self.labels.ensure(want.labels)
                payload["labels"] = labels
        if not payload:
            if not same_labels(want.labels, snap.labels):  # GitHub already had them
                mirror.save_snapshot(self.q, link.issue_id, want.to_json(), None)
            return False
        self.pace()
        try:
            updated = self.client.update_issue(self.repo, link.gh_number, **payload)
        except (NotFoundOnGitHub, MovedOnGitHub) as exc:
            self._mark_gone(link, snap, exc)
        mirror.save_snapshot(self.q, link.issue_id, want.to_json(), updated.updated_at)
        return True

    def _mark_gone(self, link: LinkState, snap: Snapshot, exc: GitHubCallError) -> NoReturn:
        why = f"moved to {exc.location}" if isinstance(exc, MovedOnGitHub) else "deleted on GitHub"
        log.warning("issue #%s: GitHub issue #%s was %s", link.number, link.gh_number, why)
        gone = Snapshot(
            snap.title, snap.body, snap.marker, snap.labels, snap.state, snap.state_reason, why
        )
        mirror.save_snapshot(self.q, link.issue_id, gone.to_json(), None)
        mirror.record_sync_event(
            self.q,
            link.issue_id,
            link.number,
            "github_gone",
            actor="github-sync",
            after={"github": link.url, "why": why},
            push=False,
        )
        raise _Gone(why) from exc

    def _comment(self, state: PushState, link: LinkState, comment: LocalComment) -> bool:
        """Post one comment; True if it turned out to be there already."""
        tag = comment_marker(state.issue_id, comment.id)
        if comment.in_flight_since is not None:
            since = comment.in_flight_since - timedelta(seconds=self.options.lookup_margin)
            found = self._find_comment(link, tag, since)
            if found is not None:
                mirror.comment_settled(self.q, comment.id, found.id)
                return True
        mirror.comment_started(self.q, comment.id)
        self.pace()
        body = render_comment(
            state.issue_id, comment.id, comment.kind, comment.author, comment.body
        )
        try:
            posted = self.client.create_comment(self.repo, link.gh_number, body)
        except Unclear as exc:
            if not exc.maybe_applied:
                mirror.comment_settled(self.q, comment.id, None)
            raise
        except (NotFoundOnGitHub, MovedOnGitHub) as exc:
            mirror.comment_settled(self.q, comment.id, None)
            self._mark_gone(link, Snapshot.from_json(link.snapshot), exc)
        except GitHubCallError:
            mirror.comment_settled(self.q, comment.id, None)
            raise
        mirror.comment_settled(self.q, comment.id, posted.id)
        return False

    def _find_comment(self, link: LinkState, tag: str, since: datetime) -> GhComment | None:
        page = self.client.list_comments(self.repo, link.gh_number, since=since)
        while True:
            for candidate in page.items:
                if tag in (candidate.body or ""):
                    return candidate
            if page.next_url is None:
                return None
            page = self.client.list_comments(self.repo, link.gh_number, page_url=page.next_url)
