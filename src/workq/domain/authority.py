"""Who may act on a claimed issue: the one value every service that changes a claimed
issue takes (docs/coordination.md, "Who may act on a claim").

A caller acts for the run ids it holds claims under (an MCP server: its run id and the
agent ids it claimed for; the CLI: ``--run-id``, ``WORKQ_RUN_ID`` or ``--as``), optionally
presenting the fencing token of one claim, with the run ids whose plan mode must refuse
the change. Or it acts by an **override** that says why anyone's claim may be acted on (an
admin's ``--force``, the board, the GitHub worker); the event records the reason. There is
no value that silently means "anyone". Who acted is the caller's to name (``actor``), as
before.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Authority:
    """The run ids a call acts for, the fence it presents, its plan-mode runs; or an
    override with its reason. Build it with :meth:`of` or :meth:`overriding`."""

    run_ids: frozenset[str] = frozenset()
    fence: int | None = None
    plan_runs: frozenset[str] = frozenset()
    override: str | None = None

    @classmethod
    def of(
        cls,
        run_ids: Iterable[str],
        *,
        fence: int | None = None,
        plan_runs: Iterable[str] | None = None,
    ) -> Authority:
        """Acting as the holder: one of ``run_ids`` must hold the claim (that very claim,
        with ``fence``). Plan mode of ``plan_runs`` (default: the run ids) refuses."""
        ids = frozenset(run_ids)  # none: a caller that holds nothing, refused everywhere
        runs = ids if plan_runs is None else frozenset(plan_runs)
        return cls(run_ids=ids, fence=fence, plan_runs=runs)

    @classmethod
    def overriding(
        cls,
        reason: str,
        *,
        fence: int | None = None,
        plan_runs: Iterable[str] = (),
    ) -> Authority:
        """Acting on whoever's claim it is, for ``reason`` (recorded with the change);
        with ``fence``, only on that claim."""
        if not reason.strip():
            raise ValueError("an override names its reason")
        return cls(fence=fence, plan_runs=frozenset(plan_runs), override=reason)

    def allows(self, holder: str | None) -> bool:
        """Whether this authority may change a claim held by ``holder``."""
        return self.override is not None or (holder is not None and holder in self.run_ids)

    def shown(self) -> str:
        """The run ids as a refusal names them."""
        return ", ".join(sorted(self.run_ids)) or "no run id"


def as_authority(value: Authority | Iterable[str]) -> Authority:
    """An authority from a service's argument: one already built, or the run ids a caller
    holds claims under."""
    return value if isinstance(value, Authority) else Authority.of(value)
