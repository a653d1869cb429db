"""Progress of the long admin commands, drawn on stderr only when stderr is a terminal:
never into a pipe or a file, where it would be noise in a log."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from workq.cli import output

Advance = Callable[[int], None]


def _ignore(_: int) -> None:
    pass


@contextmanager
def counting(what: str, *, total: int | None = None, in_bytes: bool = False) -> Iterator[Advance]:
    """A function to call with how much more is done (rows, or bytes with ``in_bytes``);
    a bar when ``total`` is known, a running count when not."""
    if not output.errors().is_terminal:
        yield _ignore
        return
    columns: list[ProgressColumn] = [SpinnerColumn(), TextColumn(what)]
    if total is not None:
        columns.append(BarColumn())
    columns.append(DownloadColumn() if in_bytes else MofNCompleteColumn())
    columns.append(TimeElapsedColumn())
    with Progress(*columns, console=output.errors(), transient=True) as bar:
        task = bar.add_task(what, total=total)
        yield lambda done: bar.advance(task, done)
