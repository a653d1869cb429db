"""The kinds of task this server serves (kinds.py says what a kind is). A new kind is its
own module, defining a ``Kind``, and one line here."""

from __future__ import annotations

from workq.services.tasks import claim_next, gates, landing, merge
from workq.services.tasks.kinds import Kind

KINDS: dict[str, Kind] = {
    kind.name: kind for kind in (claim_next.KIND_OF, landing.KIND_OF, gates.KIND_OF, merge.KIND_OF)
}


def of(name: str) -> Kind | None:
    return KINDS.get(name)


def every() -> list[Kind]:
    return list(KINDS.values())
