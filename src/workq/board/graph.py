"""A layered drawing of the dependency graph, computed on the server: each issue sits one
column right of its furthest blocker, so every arrow points right. Pure: no I/O."""

from __future__ import annotations

from dataclasses import dataclass

from workq.schemas import GraphNode

COLUMN = 240
ROW = 34
BOX_W = 200
BOX_H = 24
MARGIN = 12


@dataclass(frozen=True)
class Box:
    node: GraphNode
    x: int
    y: int


@dataclass(frozen=True)
class Arrow:
    x1: int
    y1: int
    x2: int
    y2: int


@dataclass(frozen=True)
class Drawing:
    boxes: list[Box]
    arrows: list[Arrow]
    width: int
    height: int


def layers(numbers: list[int], edges: list[tuple[int, int]]) -> dict[int, int]:
    """The layer of each node: 0 for one with no blocker, else one more than its deepest
    blocker (longest path; the queue refuses cycles, a leftover one is cut)."""
    blockers: dict[int, list[int]] = {n: [] for n in numbers}
    for a, b in edges:
        blockers.setdefault(b, []).append(a)
        blockers.setdefault(a, [])
    depth: dict[int, int] = {}
    for start in sorted(blockers):
        stack = [(start, False)]
        visiting: set[int] = set()
        while stack:
            node, done = stack.pop()
            if node in depth:
                continue
            if done:
                visiting.discard(node)
                found = [depth[b] for b in blockers[node] if b in depth]
                depth[node] = 1 + max(found) if found else 0
                continue
            visiting.add(node)
            stack.append((node, True))
            stack.extend((b, False) for b in blockers[node] if b not in depth and b not in visiting)
    return depth


def layout(nodes: list[GraphNode], edges: list[tuple[int, int]]) -> Drawing:
    depth = layers([n.number for n in nodes], edges)
    by_layer: dict[int, list[GraphNode]] = {}
    for node in sorted(nodes, key=lambda n: n.number):
        by_layer.setdefault(depth.get(node.number, 0), []).append(node)
    place: dict[int, tuple[int, int]] = {}
    boxes = []
    for layer, members in sorted(by_layer.items()):
        for row, node in enumerate(members):
            x, y = MARGIN + layer * COLUMN, MARGIN + row * ROW
            place[node.number] = (x, y)
            boxes.append(Box(node, x, y))
    arrows = [
        Arrow(
            place[a][0] + BOX_W,
            place[a][1] + BOX_H // 2,
            place[b][0],
            place[b][1] + BOX_H // 2,
        )
        for a, b in edges
        if a in place and b in place
    ]
    width = MARGIN * 2 + (max(by_layer, default=0) + 1) * COLUMN
    height = MARGIN * 2 + max((len(m) for m in by_layer.values()), default=1) * ROW
    return Drawing(boxes, arrows, width, height)
