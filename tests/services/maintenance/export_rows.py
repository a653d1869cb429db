"""A synthetic export, line by line as `workq export` writes it: N issues, each with a label,
a comment and its created event. Shared by the transfer tests and scripts/bench_transfer.py."""

from __future__ import annotations

import json
from collections.abc import Iterator

from workq.db.migrate import HEAD
from workq.db.models import metadata

STAMP = "2026-01-02T03:04:05.123456+00:00"


def ident(n: int) -> str:
    return f"{n:032x}"


def export_lines(
    count: int, *, description: str = "", actor: str = "test", label: str = "bulk"
) -> Iterator[str]:
    def rows(table: str) -> Iterator[dict[str, object]]:
        if table == "counters":
            yield {"name": "issue_number", "value": count}
            return
        for n in range(1, count + 1):
            if table == "events":
                after = {"title": f"Issue {n}", "labels": [label]}
                yield {
                    "id": n,
                    "issue_id": ident(n),
                    "number": n,
                    "kind": "created",
                    "actor": actor,
                    "before": None,
                    "after": json.dumps(after, sort_keys=True),
                    "created_at": STAMP,
                }
            elif table == "issues":
                yield {
                    "id": ident(n),
                    "number": n,
                    "title": f"Issue {n}",
                    "description": description,
                    "status": "open",
                    "priority": 2,
                    "issue_type": "task",
                    "agent": "claude",
                    "is_blocked": False,
                    "blocked_reason": None,
                    "open_blockers": 0,
                    "claimed_by": None,
                    "claimed_at": None,
                    "lease_expires_at": None,
                    "created_at": STAMP,
                    "updated_at": STAMP,
                    "closed_at": None,
                    "fence": 0,
                    "repository": None,
                }
            elif table == "labels":
                yield {"issue_id": ident(n), "name": label}
            elif table == "comments":
                yield {
                    "id": n,
                    "issue_id": ident(n),
                    "kind": "note",
                    "body": f"A note on issue {n}.",
                    "author": actor,
                    "created_at": STAMP,
                }

    yield json.dumps({"type": "workq-export", "version": 1, "schema": HEAD})
    for table in metadata.sorted_tables:  # the export's order: parents first
        yield from (
            json.dumps({"type": table.name, **row}, sort_keys=True) for row in rows(table.name)
        )
