"""Printing results: readable tables for people, JSON for scripts."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel
from rich.console import Console
from rich.table import Table


class StdoutClosed(Exception):
    """The reader of stdout left (`workq export | head -1`): not an error of ours."""


class _Console(Console):
    def on_broken_pipe(self) -> None:  # rich exits 1 here
        raise StdoutClosed()


console = _Console(highlight=False, soft_wrap=True)
errors = Console(stderr=True, highlight=False, soft_wrap=True)


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
    return value.strftime("%Y-%m-%d %H:%M:%SZ") if value else "-"


def table(
    columns: Sequence[str], rows: Sequence[Sequence[Any]], *, title: str | None = None
) -> None:
    grid = Table(title=title, show_edge=False, header_style="bold")
    for column in columns:
        grid.add_column(column)
    for row in rows:
        grid.add_row(*("-" if v is None else str(v) for v in row))
    console.print(grid)


def counts(found: dict[str, int]) -> str:
    """Rows per table, e.g. "issues: 3, events: 7"."""
    return ", ".join(f"{table}: {n}" for table, n in found.items()) or "nothing"


def line(text: str) -> None:
    console.print(text, markup=False)


def fields(pairs: Sequence[tuple[str, Any]]) -> None:
    width = max(len(k) for k, _ in pairs)
    for key, value in pairs:
        shown = when(value) if isinstance(value, datetime) else ("-" if value is None else value)
        console.print(f"[bold]{key.ljust(width)}[/bold]  ", end="")
        console.print(str(shown), markup=False)
