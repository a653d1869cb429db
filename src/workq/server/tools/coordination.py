"""File reservations (the ``coordination`` toolset): reserve and release path globs while
holding a claim, and see who holds what. A claim reserves its issue's touches by itself."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from mcp.types import CallToolResult
from pydantic import Field

from workq.schemas import GLOB_MAX, Reservation, Reservations
from workq.server.params import Fence, Number, RunId
from workq.server.registry import READ_ONLY, Registry, writes
from workq.server.results import ok, worded

if TYPE_CHECKING:  # the server starts without the database code (tests/server/test_stdio.py)
    from workq.services.queue.reservations import Held

Glob = Annotated[
    str, Field(min_length=1, max_length=GLOB_MAX, description="Relative path glob (* ? **)")
]


def listed(held: list[Held]) -> Reservations:
    return Reservations(
        items=[
            Reservation(
                number=h.number,
                holder=h.holder,
                glob=h.glob,
                mode="shared" if h.mode == "shared" else "exclusive",
                lease_expires_at=h.until,
            )
            for h in held
        ]
    )


def _text(head: str, held: list[Held]) -> str:
    lines = [head]
    lines += [f"- {h.glob} ({h.mode}) #{h.number} {h.holder}" for h in held]
    return "\n".join(lines)


def register(reg: Registry) -> None:
    state = reg.state

    @reg.tool(writes(idempotent=True))
    def issue_reserve(
        number: Number,
        glob: Glob,
        mode: Literal["exclusive", "shared"] = "exclusive",
        run_id: RunId = None,
        fence: Fence = None,
    ) -> Annotated[CallToolResult, Reservations]:
        """Reserve paths for the claim you hold on an issue, until the claim ends.
        Refused (PATHS_RESERVED) if another holder's reservation overlaps."""
        from workq.services.queue import reservations

        with worded(f"Could not reserve paths for issue #{number}"):
            by = state.authority(run_id, fence=fence)
            held = reservations.reserve(state.queue(), number, by, glob, mode=mode)
        return ok(_text(f"Reserved {glob} ({mode}) for #{number}; now held:", held), listed(held))

    @reg.tool(writes(idempotent=False))
    def issue_unreserve(
        number: Number, glob: Glob, run_id: RunId = None, fence: Fence = None
    ) -> Annotated[CallToolResult, Reservations]:
        """Release a path you reserved with issue_reserve (touches go with the claim)."""
        from workq.services.queue import reservations

        with worded(f"Could not release paths of issue #{number}"):
            by = state.authority(run_id, fence=fence)
            held = reservations.unreserve(state.queue(), number, by, glob)
        return ok(_text(f"Released {glob} of #{number}; still held:", held), listed(held))

    @reg.tool(READ_ONLY)
    def issue_reservations() -> Annotated[CallToolResult, Reservations]:
        """Every live file reservation: glob, mode, issue, holder, until."""
        from workq.services.queue import reservations

        held = reservations.list_live(state.queue())
        return ok(_text(f"{len(held)} live reservation(s)", held), listed(held))
