"""The toolsets: named groups of tools that ``--toolsets`` / ``WORKQ_TOOLSETS`` turn on.

Every tool schema costs an agent context, so the default set is small: seed 002's tools
plus claim_next, release and heartbeat. To add a toolset, write a module with a
``register(reg: Registry)`` function and add a row here (and, if every agent needs it,
its name to ``DEFAULT_TOOLSETS``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from workq.errors import InvalidInput
from workq.server.registry import Registry

Registrar = Callable[[Registry], None]

# Each toolset's registrars as "module:function" in workq.server, imported only when the
# toolset is served: a server with the default toolsets does not load the others' modules
# (and the services and schemas they import) at start.
TOOLSETS: dict[str, tuple[str, ...]] = {
    "core": ("tools_issues:register", "tools_claims:register_core", "tools_plan:register"),
    "recovery": ("tools_claims:register_recovery",),
    "notes": ("tools_notes:register",),
    "deps": ("tools_deps:register",),
    "insight": ("tools_insight:register",),
    "workflow": ("tools_workflow:register", "tools_priority:register"),
    "github": ("tools_github:register",),
    "agit": ("tools_agit:register",),
    "reserve": ("tools_reserve:register",),
    "context": ("tools_context:register",),
    "quality": ("tools_quality:register",),
    "git": ("tools_git:register",),
}
DEFAULT_TOOLSETS: tuple[str, ...] = ("core",)
# Other names a toolset answers to: seed 000 calls its seven tools the priority server.
ALIASES: dict[str, tuple[str, ...]] = {"priority": ("workflow",)}


def select(spec: str | None) -> list[str]:
    """Toolset names from a flag value: comma-separated names, ``default`` or ``all``."""
    chosen: list[str] = []
    for word in (spec or "default").replace(" ", ",").split(","):
        name = word.strip().lower()
        if not name:
            continue
        expanded = {"default": DEFAULT_TOOLSETS, "all": tuple(TOOLSETS), **ALIASES}.get(
            name, (name,)
        )
        for item in expanded:
            if item not in TOOLSETS:
                raise InvalidInput(
                    f"unknown toolset {item!r}",
                    hint=f"choose from {', '.join(TOOLSETS)}, default or all",
                    field="toolsets",
                )
            if item not in chosen:
                chosen.append(item)
    return chosen or list(DEFAULT_TOOLSETS)


def named(spec: str | None) -> set[str]:
    """The toolsets a flag value names itself (not through ``default`` or ``all``)."""
    words = {word.strip().lower() for word in (spec or "").replace(" ", ",").split(",")}
    return {item for word in words for item in ALIASES.get(word, (word,)) if item in TOOLSETS}


def register(reg: Registry, names: list[str]) -> None:
    reg.workspaces = "agit" in names
    for name in names:
        reg.toolset = name
        for registrar in TOOLSETS[name]:
            _registrar(registrar)(reg)
    reg.toolset = ""


def _registrar(spec: str) -> Registrar:
    module, function = spec.split(":")
    found: Registrar = getattr(importlib.import_module(f"workq.server.{module}"), function)
    return found
