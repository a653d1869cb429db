"""The dependency drawing: every arrow points right, whatever the graph."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from workq.board.graph import layers, layout
from workq.schemas import GraphNode, Status

edges_strategy = st.lists(
    st.tuples(st.integers(1, 300), st.integers(1, 300)).filter(lambda e: e[0] < e[1]),
    max_size=600,
)


def _nodes(edges: list[tuple[int, int]]) -> list[GraphNode]:
    numbers = sorted({n for e in edges for n in e})
    return [
        GraphNode(number=n, title=f"#{n}", status=Status.OPEN, is_blocked=False) for n in numbers
    ]


@given(edges_strategy)
def test_every_arrow_points_right(edges: list[tuple[int, int]]) -> None:
    drawing = layout(_nodes(edges), edges)
    assert len(drawing.arrows) == len(edges)
    assert all(a.x2 > a.x1 for a in drawing.arrows)
    places = {(b.x, b.y) for b in drawing.boxes}
    assert len(places) == len(drawing.boxes)  # no two issues on one spot
    assert all(b.x < drawing.width and b.y < drawing.height for b in drawing.boxes)


def test_a_node_stands_right_of_its_deepest_blocker() -> None:
    assert layers([1, 2, 3, 4], [(1, 2), (2, 3), (1, 3), (4, 3)]) == {1: 0, 2: 1, 3: 2, 4: 0}


def test_a_leftover_cycle_does_not_hang() -> None:
    depth = layers([1, 2], [(1, 2), (2, 1)])
    assert set(depth) == {1, 2}
