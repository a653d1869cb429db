"""Printing results: readable tables for people, JSON for scripts."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from workq.domain import dates

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table


class StdoutClosed(Exception):
    """The reader of stdout left (`workq export | head -1`): not an error of ours."""


# Made on first use: importing rich's console costs a command that prints no table (and
# `workq serve`, which prints nothing on stdout) about 0.1 s.
@functools.cache
def console() -> Console:
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:  # rich exits 1 here
            raise StdoutClosed()

    return _Console(highlight=False, soft_wrap=True)


@functools.cache
def errors() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


def emit_json(value: Any) -> None:
    data: Any
    if isinstance(value, BaseModel):
        data = value.model_dump(mode="json")
    elif isinstance(value, list):
        data = [v.model_dump(mode="json") if isinstance(v, BaseModel) else v for v in value]
    else:
        data = value
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False) + "\n")


def when(value: datetime | None) -> str:
    return dates.stamp(value) if value else "-"


# Columns of free text (a title, a change); the others hold short values.
FREE_TEXT = frozenset({"title", "change", "first", "finding", "last error", "PR title"})
FREE_TEXT_MIN = 16


def table(
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    title: str | None = None,
    spare: Sequence[str] = (),
) -> None:
    """Print ``rows`` under ``columns``. On a terminal too narrow for all of them, the
    ``spare`` columns are left out, first ones first, until the free text (a title) keeps
    room to be read (--json has every field)."""
    shown = list(columns)
    for name in [*spare, None]:
        grid = _grid(columns, shown, rows, title)
        if name is None or _fits(grid):
            break
        shown.remove(name)
    console().print(grid)


def _fits(grid: Table) -> bool:
    """Whether ``grid`` drawn takes no more cells than the terminal is wide (measured on
    its segments: a captured string would count a colour terminal's escape codes)."""
    from rich.segment import Segment

    out = console()
    lines = Segment.split_lines(out.render(grid, out.options))
    return all(Segment.get_line_length(line) <= out.width for line in lines)


def _grid(
    columns: Sequence[str], shown: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None
) -> Table:
    from rich.table import Table

    grid = Table(title=title, show_edge=False, header_style="bold")
    for column in shown:
        if column in FREE_TEXT:  # keeps room to be read on a narrow terminal
            grid.add_column(column, min_width=FREE_TEXT_MIN, overflow="fold")
        else:
            grid.add_column(column)
    kept = [columns.index(name) for name in shown]
    for row in rows:
        grid.add_row(*("-" if row[i] is None else str(row[i]) for i in kept))
    return grid


def counts(found: dict[str, int]) -> str:
    """Rows per table, e.g. "issues: 3, events: 7"."""
    return ", ".join(f"{table}: {n}" for table, n in found.items()) or "nothing"


def line(text: str) -> None:
    console().print(text, markup=False)


def fields(pairs: Sequence[tuple[str, Any]]) -> None:
    width = max(len(k) for k, _ in pairs)
    for key, value in pairs:
        shown = when(value) if isinstance(value, datetime) else ("-" if value is None else value)
        console().print(f"[bold]{key.ljust(width)}[/bold]  ", end="")
        console().print(str(shown), markup=False)
