"""Import: GitHub issues (not pull requests) become or update local issues.

A probe of the most recently updated issue, sent with the ETag of the previous probe, says
whether anything changed at all (a 304 costs no quota). If so, the list is read with
``since`` (GitHub's own ``updated_at`` of the newest issue seen, minus an overlap, so an
issue updated in the same second as the cursor is not missed), sorted by update time,
following ``Link`` next URLs as given. Issues seen again in the overlap change nothing.

The rule for edits made on both sides (docs/github.md): each field (title, description,
priority, type, state) is compared three ways, with the snapshot of what GitHub held after
the last sync as the base. Changed only on GitHub: applied locally, by actor
``github:OWNER/NAME`` in the history. Changed only locally: left for the push. Changed on
both sides to different values: **the local value wins** (the queue is what agents work
from), the next push sends it, and a ``github_conflict`` event records both values. Plain
labels merge as sets (additions and removals from either side are kept), so they never
conflict. ``status:`` labels are not imported: status follows claims, which are local.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from workq.domain import fields
from workq.domain.authority import Authority
from workq.errors import WorkqError
from workq.github.models import GhIssue
from workq.github.render import (
    Snapshot,
    body_text,
    canonical_body,
    desired,
    is_managed_prefix,
    marker_id,
    read_labels,
    remote_snapshot,
)
from workq.github.worker import Worker
from workq.schemas import LABELS_PER_ISSUE_MAX, Issue, IssueType, Priority, Status
from workq.services.queue import claims, issues
from workq.services.sync import mirror, mirror_target
from workq.services.sync.mirror import LinkState

log = logging.getLogger("workq.github")


@dataclass
class ImportReport:
    pages: int = 0
    seen: int = 0
    pull_requests: int = 0
    created: int = 0
    updated: int = 0
    linked: int = 0  # our own issues whose create answer was lost, found here
    unchanged: int = 0
    conflicts: int = 0
    not_modified: bool = False
    errors: list[str] = field(default_factory=list)


def _importable(names: list[str] | tuple[str, ...]) -> list[str]:
    """Plain labels that are valid local label names (others stay GitHub-only)."""
    kept: list[str] = []
    for name in names:
        try:
            fields.name(name, "label", limit=64)
        except WorkqError:
            continue
        kept.append(name)
    return kept[:LABELS_PER_ISSUE_MAX]


class Importer:
    def __init__(self, worker: Worker) -> None:
        self.w = worker
        self.q = worker.q
        self.repo = worker.repo
        self.actor = f"github:{worker.repo}"

    def run(self) -> ImportReport:
        report = ImportReport()
        found = mirror_target.mirror(self.q)
        if found is None:
            raise WorkqError("no mirror is configured")
        overlap = timedelta(seconds=self.w.options.import_overlap)
        since = found.import_since - overlap if found.import_since else None
        client = self.w.client
        # The probe: the most recently updated issue, with the ETag of the last import's
        # probe. Any change on GitHub puts an issue at its top, so a 304 (free of quota)
        # means nothing changed; an ETag of a page of the since-list could not say that
        # for the pages after it.
        probe = client.list_issues(
            self.repo,
            state="all",
            sort="updated",
            direction="desc",
            per_page=1,
            etag=found.import_etag,
        )
        if probe.not_modified:
            report.not_modified = True
            mirror_target.note_mirror(self.q, self.repo, last_import_at=self.q.now())
            return report
        page = client.list_issues(
            self.repo, state="all", since=since, sort="updated", direction="asc", per_page=100
        )
        report.pages = 1
        newest = found.import_since
        while True:
            for item in page.items:
                if self.w.stop.is_set():
                    break
                report.seen += 1
                if item.is_pull_request:
                    report.pull_requests += 1
                    continue
                try:
                    self._apply(item, report)
                except WorkqError as exc:
                    if exc.code.startswith("GITHUB"):
                        raise
                    report.errors.append(f"GitHub #{item.number}: {exc.message}")
                    log.warning("GitHub #%s not imported: %s", item.number, exc.message)
                if newest is None or item.updated_at > newest:
                    newest = item.updated_at
                if self.w.progress is not None:
                    self.w.progress("import", report.seen, None)
            if page.next_url is None or self.w.stop.is_set():
                break
            page = client.list_issues(self.repo, page_url=page.next_url)
            report.pages += 1
        mirror_target.note_mirror(
            self.q,
            self.repo,
            import_since=newest,
            import_etag=probe.etag if not self.w.stop.is_set() else None,
            last_import_at=self.q.now(),
        )
        return report

    # one issue --------------------------------------------------------------------------------

    def _apply(self, gh: GhIssue, report: ImportReport) -> None:
        link = mirror.link_of_gh(self.q, self.repo, gh.number)
        if link is None:
            self._new(gh, report)
            return
        # GitHub's updated_at has whole seconds: an edit in the second of our own last
        # push has the same stamp, so only an older stamp proves there is nothing new.
        if link.remote_updated_at is not None and gh.updated_at < link.remote_updated_at:
            report.unchanged += 1
            return
        base = Snapshot.from_json(link.snapshot)
        local = mirror.issue_by_id(self.q, link.issue_id)
        if base.gone is not None or local is None:  # deleted here: the push closes it there
            report.unchanged += 1
            return
        if self._merge(gh, link, base, local):
            report.conflicts += 1
        if local != mirror.issue_by_id(self.q, link.issue_id):
            report.updated += 1
        else:
            report.unchanged += 1

    def _owned(self, gh: GhIssue) -> list[str]:
        names = gh.label_names
        return [n for n in names if is_managed_prefix(n)] + _importable(read_labels(names).plain)

    def _new(self, gh: GhIssue, report: ImportReport) -> None:
        local_id = marker_id(gh.body)
        if local_id is not None and mirror.link_of_issue(self.q, local_id) is not None:
            report.unchanged += 1  # a copy of an issue that is linked already
            return
        local = mirror.issue_by_id(self.q, local_id) if local_id else None
        owned = self._owned(gh)
        if local is not None:
            # Our own create, whose answer was lost: link it; the push settles the rest.
            mirror.save_link(
                self.q,
                issue_id=local.id,
                number=local.number,
                repo=self.repo,
                gh_number=gh.number,
                url=gh.html_url,
                snapshot=remote_snapshot(gh, owned).to_json(),
                remote_updated_at=gh.updated_at,
            )
            report.linked += 1
            return
        meaning = read_labels(gh.label_names)
        mirror.create_from_github(
            self.q,
            repo=self.repo,
            gh_number=gh.number,
            url=gh.html_url,
            title=gh.title,
            description=canonical_body(gh.body),
            priority=meaning.priority or Priority.MEDIUM,
            issue_type=meaning.issue_type or IssueType.TASK,
            label_names=_importable(meaning.plain),
            done=gh.state == "closed",
            snapshot=remote_snapshot(gh, owned).to_json(),
            remote_updated_at=gh.updated_at,
            actor=self.actor,
        )
        report.created += 1

    def _merge(self, gh: GhIssue, link: LinkState, base: Snapshot, local: Issue) -> bool:
        """Three-way merge of one linked issue. True if a conflict was recorded."""
        remote = remote_snapshot(gh, self._owned(gh))
        mine = desired(local, base)
        changes: dict[str, Any] = {}
        theirs: dict[str, Any] = {}
        ours: dict[str, Any] = {}

        def merge(name: str, b: Any, r: Any, m: Any, value: Any) -> None:
            if r in (b, m):
                return  # unchanged there, or the same change on both sides
            if m == b:
                changes[name] = value
            else:
                theirs[name], ours[name] = r, m

        merge("title", base.title, remote.title, mine.title, remote.title)
        # An empty description shows the title as its summary: that follows the title and
        # is no edit of the description.
        mine_body = mine.body
        if not local.description.strip() and base.body == body_text(base.title, ""):
            mine_body = base.body
        merge("description", base.body, remote.body, mine_body, remote.body)
        b, r = read_labels(base.labels), read_labels(gh.label_names)
        # A label GitHub lacks says nothing; a base without one counts as the local value.
        if r.priority is not None:
            was = b.priority or local.priority
            merge("priority", was, r.priority, local.priority, r.priority)
        if r.issue_type is not None:
            was_type = b.issue_type or local.issue_type
            merge("issue_type", was_type, r.issue_type, local.issue_type, r.issue_type)
        merge("state", base.state, remote.state, mine.state, remote.state)

        base_plain = {n.lower() for n in b.plain}
        remote_plain = {n.lower(): n for n in _importable(r.plain)}
        local_plain = {n.lower() for n in local.labels}
        add = [n for k, n in remote_plain.items() if k not in base_plain and k not in local_plain]
        remove = [
            n for n in local.labels if n.lower() in base_plain and n.lower() not in remote_plain
        ]

        state = changes.pop("state", None)
        if changes or add or remove:
            issues.update_issue(
                self.q,
                local.number,
                **changes,
                add_labels=add,
                remove_labels=remove,
                by=Authority.overriding("edited on GitHub", who=self.actor),
                actor=self.actor,
            )
        if state == "closed" and local.status != Status.DONE:
            closed = Authority.overriding("closed on GitHub", who=self.actor)
            claims.complete(self.q, local.number, closed, actor=self.actor)
        elif state == "open" and local.status == Status.DONE:
            issues.reopen(self.q, local.number, actor=self.actor)
        if theirs:
            mirror.record_sync_event(
                self.q,
                link.issue_id,
                link.number,
                "github_conflict",
                actor=self.actor,
                before={"github": _plain(theirs)},
                after={"local": _plain(ours), "kept": "local", "url": link.url},
            )
        # GitHub holds ``remote`` now; the push sends whatever local values differ from it.
        mirror.save_snapshot(self.q, link.issue_id, remote.to_json(), gh.updated_at)
        return bool(theirs)


def _plain(values: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.value if hasattr(v, "value") else v) for k, v in values.items()}
