"""What every command shares: help that reads `workq show NUMBER` with flags shown without
a `<bool>` type, and a closed stdout (`| head`) that is not an error."""

from __future__ import annotations

import inspect
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

from workq.cli.output import StdoutClosed


def _restyle(params: list[Any]) -> None:
    for param in params:
        if param.param_type_name == "argument" and param.metavar is None:
            param.metavar = (param.name or "value").upper()
        elif getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""  # a flag takes no value: no type to show


class _Styled:
    """Arguments in capitals, flags with no value type, for the help option too."""

    params: list[Any]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _restyle(self.params)

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)  # type: ignore[misc]
        if option is not None:
            _restyle([option])
        return option


class Command(_Styled, TyperCommand):
    """A command whose usage line names arguments in capitals (Typer writes `{number}`)
    and whose flags show no value type."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            # Not left to click, which exits 1 on a closed pipe.
            raise StdoutClosed() from None

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = super().collect_usage_pieces(ctx)
        return [p[1:-1] if p.startswith("{") and p.endswith("}") else p for p in pieces]


class Group(_Styled, TyperGroup):
    """A group of commands, its options styled as a command's are."""


def summary(doc: str | None) -> str | None:
    """A command's line in the list of commands: the first paragraph of its help as one
    line, cut to its first sentence when long (the list kept the help's own line breaks,
    and showed half sentences)."""
    if not doc:
        return None
    first = " ".join(inspect.cleandoc(doc).split("\n\n")[0].split())
    if len(first) > SUMMARY_MAX and ". " in first:
        first = first.split(". ")[0] + "."
    return first


SUMMARY_MAX = 90


def apply(app: typer.Typer) -> None:
    """Give every command of ``app`` and its sub-apps this style."""
    for info in app.registered_commands:
        if info.cls in (None, TyperCommand):
            info.cls = Command
        if info.short_help is None:
            info.short_help = summary(info.help or getattr(info.callback, "__doc__", None))
    for group in app.registered_groups:
        if isinstance(group.typer_instance, typer.Typer):
            group.typer_instance.info.cls = Group
            apply(group.typer_instance)
