"""Toolsets and profiles: the named groups of tools that ``--toolsets`` / ``--profile``
(``WORKQ_TOOLSETS`` / ``WORKQ_PROFILE``) turn on.

A toolset is workq's own, named after what an agent does with it; ``all`` means every
toolset. A profile serves another system's contract under that system's names and shapes
(docs/contracts.md), for the clients written against it; profiles are turned on by name
only, never by ``all``. Every tool schema costs an agent context, so the default is the
queue and planning: contract A's tools plus claim_next, release and heartbeat.

To add a group, write a module with a ``register(reg: Registry)`` function and add a row
to ``TOOLSETS`` or ``PROFILES``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable

from workq.errors import InvalidInput
from workq.server.registry import Registry

Registrar = Callable[[Registry], None]

# Each group's registrars as "module:function" in workq.server, imported only when the
# group is served: a server with the defaults does not load the others' modules (and the
# services and schemas they import) at start.
TOOLSETS: dict[str, tuple[str, ...]] = {
    "queue": ("tools.issues:register", "tools.claims:register_core"),
    "planning": ("tools.planning:register",),
    "recovery": ("tools.claims:register_recovery",),
    "deps": ("tools.deps:register",),
    "notes": ("tools.notes:register",),
    "insight": ("tools.insight:register",),
    "coordination": ("tools.coordination:register",),
    "workspaces": ("tools.workspaces:register",),
    "coding": ("tools.coding:register",),
}
PROFILES: dict[str, tuple[str, ...]] = {
    # Contract B: the GitHub issue-priority server's seven tools.
    "issue-priority": ("profiles.issue_workflow:register", "profiles.issue_priority:register"),
    # Contract C: the GitHub tools of an agent framework, and contract E's submit_pr.
    "github-tools": ("profiles.github_tools:register",),
    # Contract D: agit's repositories, worktrees, tasks and agents.
    "agit": ("profiles.agit:register",),
    # Contract E: the workflow server's context, docs search, quality gates and git steps.
    "workflow-server": (
        "profiles.workflow_context:register",
        "profiles.workflow_gates:register",
        "profiles.workflow_git:register",
    ),
}
GROUPS: dict[str, tuple[str, ...]] = TOOLSETS | PROFILES
DEFAULT_TOOLSETS: tuple[str, ...] = ("queue", "planning")
# The names of earlier releases, so that a client's configuration keeps working.
ALIASES: dict[str, tuple[str, ...]] = {
    "core": DEFAULT_TOOLSETS,
    "reserve": ("coordination",),
    "workflow": ("issue-priority",),
    "priority": ("issue-priority",),
    "github": ("github-tools",),
    "context": ("workflow-server",),
    "quality": ("workflow-server",),
    "git": ("workflow-server",),
}


def select(spec: str | None, profiles: str | None = None) -> list[str]:
    """Group names from the flag values: comma-separated toolset or profile names,
    ``default`` or ``all`` (every toolset, no profile)."""
    chosen: list[str] = []
    words = [*_words(spec or "default"), *_words(profiles or "")]
    for name in words:
        expanded = {"default": DEFAULT_TOOLSETS, "all": tuple(TOOLSETS), **ALIASES}.get(
            name, (name,)
        )
        for item in expanded:
            if item not in GROUPS:
                raise InvalidInput(
                    f"unknown toolset or profile {item!r}",
                    hint=f"toolsets: {', '.join(TOOLSETS)}, default or all; "
                    f"profiles: {', '.join(PROFILES)}",
                    field="toolsets",
                )
            if item not in chosen:
                chosen.append(item)
    return chosen or list(DEFAULT_TOOLSETS)


def _words(spec: str) -> Iterable[str]:
    for word in spec.replace(" ", ",").split(","):
        if word.strip():
            yield word.strip().lower()


def kind(name: str) -> str:
    """``profile`` or ``toolset``: how to speak of a group."""
    return "profile" if name in PROFILES else "toolset"


# The groups whose agents work in repositories: the issue tools then take and answer their
# workspace fields too.
WITH_WORKSPACES = frozenset({"workspaces", "agit"})


def register(reg: Registry, names: list[str]) -> None:
    reg.workspaces = not WITH_WORKSPACES.isdisjoint(names)
    for name in names:
        reg.toolset = name
        for registrar in GROUPS[name]:
            _registrar(registrar)(reg)
    reg.toolset = ""


def _registrar(spec: str) -> Registrar:
    module, function = spec.split(":")
    found: Registrar = getattr(importlib.import_module(f"workq.server.{module}"), function)
    return found
