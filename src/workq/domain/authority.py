"""Who is asking: the one value every service that changes claimed work takes
(domain/decisions.py decides what it may do; docs/coordination.md, "Who may act").

A caller acts for the run ids it holds claims under (an MCP server: its run id and the
agent ids it bound; an HTTP session: its own; the CLI: ``--run-id`` or ``--as``), claims
under one of them (``acts_as``), and may present the fencing token of one claim. Or it
acts by an **override**, which names the reason and who made it (a person's ``--force``,
the board's user, the GitHub worker); the change's event records both. There is no value
that silently means "anyone".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class Authority:
    """The run ids a call acts for, the one it claims under, the fence it presents; or an
    override with its reason and who made it. Build it with :meth:`of` or
    :meth:`overriding`."""

    run_ids: frozenset[str] = frozenset()
    acts_as: str | None = None
    fence: int | None = None
    override: str | None = None
    who: str | None = None

    @classmethod
    def of(
        cls,
        run_ids: Iterable[str],
        *,
        acts_as: str | None = None,
        fence: int | None = None,
        who: str | None = None,
    ) -> Authority:
        """Acting as the holder: one of ``run_ids`` must hold the claim (that very claim,
        with ``fence``). Claims are made under ``acts_as`` (default: the only run id)."""
        ids = frozenset(run_ids)  # none: a caller that holds nothing, refused everywhere
        if acts_as is None and len(ids) == 1:
            (acts_as,) = ids
        if acts_as is not None:
            ids |= {acts_as}
        return cls(run_ids=ids, acts_as=acts_as, fence=fence, who=who)

    @classmethod
    def overriding(
        cls,
        reason: str,
        *,
        who: str,
        fence: int | None = None,
        acts_as: str | None = None,
        run_ids: Iterable[str] = (),
    ) -> Authority:
        """Acting on whoever's claim it is, for ``reason``, by ``who`` (both recorded with
        the change); with ``fence``, only on that claim; a force-claim claims under
        ``acts_as``."""
        if not reason.strip():
            raise ValueError("an override names its reason")
        if not who.strip():
            raise ValueError("an override names who makes it")
        ids = frozenset(run_ids) | ({acts_as} if acts_as else set())
        return cls(run_ids=ids, acts_as=acts_as, fence=fence, override=reason, who=who)

    def claiming_as(self, run_id: str) -> Authority:
        """The same caller, claiming under ``run_id`` (a force-claim for another run)."""
        return replace(self, acts_as=run_id, run_ids=self.run_ids | {run_id})

    def with_fence(self, fence: int | None) -> Authority:
        return self if fence is None else replace(self, fence=fence)

    def allows(self, holder: str | None) -> bool:
        """Whether this authority may change a claim held by ``holder``."""
        return self.override is not None or (holder is not None and holder in self.run_ids)

    def shown(self) -> str:
        """The run ids as a refusal names them."""
        return ", ".join(sorted(self.run_ids)) or "no run id"

    def recorded(self) -> dict[str, Any]:
        """What an event records of an override (nothing for a holder acting itself)."""
        if self.override is None:
            return {}
        return {"forced": True, "override": self.override, "by": self.who}
