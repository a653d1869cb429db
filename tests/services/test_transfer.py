"""Export and import of whole queues larger than one batch: streamed, lossless, all or nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from workq.db.migrate import HEAD
from workq.errors import InvalidInput
from workq.services import issues, transfer
from workq.services.context import Queue

# More rows than one batch, so an import has written batches before it meets a late line.
ISSUES = transfer.BATCH * 2 + 7
STAMP = "2026-01-02T03:04:05.123456+00:00"


def export_of(count: int) -> list[str]:
    """An export as `workq export` writes it, of ``count`` issues with a label, a comment and
    their created events."""

    def ident(n: int) -> str:
        return f"{n:032x}"

    tables: dict[str, Iterator[dict[str, object]]] = {
        "counters": iter([{"name": "issue_number", "value": count}]),
        "events": (
            {
                "id": n,
                "issue_id": ident(n),
                "number": n,
                "kind": "created",
                "actor": "test",
                "before": None,
                "after": json.dumps({"title": f"Issue {n}"}),
                "created_at": STAMP,
            }
            for n in range(1, count + 1)
        ),
        "issues": (
            {
                "id": ident(n),
                "number": n,
                "title": f"Issue {n}",
                "description": 'é, 中文 and \\ quotes "',
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
            }
            for n in range(1, count + 1)
        ),
        "labels": ({"issue_id": ident(n), "name": "bulk"} for n in range(1, count + 1)),
        "comments": (
            {
                "id": n,
                "issue_id": ident(n),
                "kind": "note",
                "body": f"note {n}",
                "author": "test",
                "created_at": STAMP,
            }
            for n in range(1, count + 1)
        ),
    }
    lines = [json.dumps({"type": "workq-export", "version": 1, "schema": HEAD})]
    for table in transfer._tables():
        lines.extend(
            json.dumps({"type": table.name, **row}, sort_keys=True)
            for row in tables.get(table.name, iter(()))
        )
    return lines


def test_a_large_round_trip_is_lossless(queue: Queue) -> None:
    lines = export_of(ISSUES)
    counts = transfer.import_lines(queue, iter(lines))  # a stream, read once
    assert counts == {
        "counters": 1,
        "events": ISSUES,
        "issues": ISSUES,
        "labels": ISSUES,
        "comments": ISSUES,
    }
    assert list(transfer.export_lines(queue)) == lines
    assert issues.create(queue, title="next").number == ISSUES + 1


@pytest.mark.parametrize("late", [1, 3])
def test_a_bad_line_near_the_end_of_a_large_file_changes_nothing(queue: Queue, late: int) -> None:
    before = list(transfer.export_lines(queue))
    lines = export_of(ISSUES)
    bad = len(lines) - late
    row = json.loads(lines[bad])
    column = {"comments": "body", "labels": "name", "issues": "title"}[row["type"]]
    row[column] = "bad\x00text"
    lines[bad] = json.dumps(row)
    with pytest.raises(InvalidInput) as refused:
        transfer.import_lines(queue, lines)
    assert refused.value.message.startswith(f"line {bad + 1}:"), refused.value.message
    assert list(transfer.export_lines(queue)) == before
    assert issues.create(queue, title="first").number == 1


def test_a_line_that_is_not_json_at_the_end_changes_nothing(queue: Queue) -> None:
    before = list(transfer.export_lines(queue))
    lines = [*export_of(ISSUES), '{"type": "issues", "id": ']
    with pytest.raises(InvalidInput, match=f"line {len(lines)} is not JSON"):
        transfer.import_lines(queue, lines)
    assert list(transfer.export_lines(queue)) == before


def test_rows_out_of_the_export_order_are_refused_with_the_line(queue: Queue) -> None:
    lines = export_of(3)
    comment = next(i for i, line in enumerate(lines) if '"type": "comments"' in line)
    moved = [*lines[:comment], *lines[comment + 1 :], lines[comment]]  # after the labels
    with pytest.raises(InvalidInput) as refused:
        transfer.import_lines(queue, moved)
    assert refused.value.message.startswith(f"line {len(moved)}: comments rows after labels")
    assert issues.list_issues(queue).items == []


def test_the_header_must_come_first(queue: Queue) -> None:
    lines = export_of(1)
    with pytest.raises(InvalidInput, match="header line is missing"):
        transfer.import_lines(queue, [*lines[1:], lines[0]])
    assert issues.list_issues(queue).items == []


def test_a_row_whose_issue_is_not_in_the_file_is_refused_with_its_lines(queue: Queue) -> None:
    lines = [
        line for line in export_of(3) if '"type": "issues"' not in line or '"number": 2' not in line
    ]
    with pytest.raises(InvalidInput) as refused:
        transfer.import_lines(queue, lines)
    assert "refers to a row" in refused.value.message
    assert issues.list_issues(queue).items == []
