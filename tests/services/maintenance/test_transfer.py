"""Export and import of whole queues larger than one batch: streamed, lossless, all or nothing."""

from __future__ import annotations

import json

import pytest

from tests.services.maintenance.export_rows import export_lines
from workq.errors import InvalidInput
from workq.services.handle import Queue
from workq.services.maintenance import transfer
from workq.services.queue import issues, listing

# More rows than one batch, so an import has written batches before it meets a late line.
ISSUES = transfer.BATCH * 2 + 7


def export_of(count: int) -> list[str]:
    return list(export_lines(count, description='é, 中文 and \\ quotes "'))


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
    assert listing.list_issues(queue).items == []


def test_the_header_must_come_first(queue: Queue) -> None:
    lines = export_of(1)
    with pytest.raises(InvalidInput, match="header line is missing"):
        transfer.import_lines(queue, [*lines[1:], lines[0]])
    assert listing.list_issues(queue).items == []


def test_a_row_whose_issue_is_not_in_the_file_is_refused_with_its_lines(queue: Queue) -> None:
    lines = [
        line for line in export_of(3) if '"type": "issues"' not in line or '"number": 2' not in line
    ]
    with pytest.raises(InvalidInput) as refused:
        transfer.import_lines(queue, lines)
    assert "refers to a row" in refused.value.message
    assert listing.list_issues(queue).items == []
