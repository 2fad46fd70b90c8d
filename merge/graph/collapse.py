"""What is drawn: the neighbourhood of an event (``around``, ``depth``), the runs and groups drawn as
one node, the lanes, ghosts and edges between them, and the chains left out to fit ``max_nodes``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, Final

import msgspec

from .model import Collapse, EdgeKind, EventGroup, GhostGroup, GraphEdge, GraphNode, _Drawn, _Log

# The shortest run of applied events drawn as one node: a run of two saves a single node.
_MIN_RUN: Final = {"runs": 3, "groups": 2}


def _neighbourhood(log: _Log, focus: str, depth: int) -> set[str]:
    """The events at most ``depth`` links (prev_event, supersedes; either way) from ``focus``,
    and every fork one of them is in, whole (half a fork would not show it)."""
    adjacent: dict[str, set[str]] = {}
    for link in log.links:
        if link.kind != "missing_prev":
            adjacent.setdefault(link.tail, set()).add(link.head)
            adjacent.setdefault(link.head, set()).add(link.tail)
    seen, frontier = {focus}, {focus}
    for _ in range(depth):
        frontier = {other for event_id in frontier for other in adjacent.get(event_id, ())} - seen
        if not frontier:
            break
        seen |= frontier
    for fork in log.forks:
        if seen.intersection(fork.event_ids):
            seen.update(fork.event_ids)
    return seen


def _size(drawn: _Drawn) -> int:
    return len(drawn.nodes) + len(drawn.ghosts)


def _groups(nodes: Sequence[GraphNode], level: Collapse, focus: str | None) -> list[list[str]]:
    """The events drawn together at ``level``, each group in drawing order.

    ``runs``: linear runs of applied events none of which is invalid or the prev of an invalid
    event (a fork's members are invalid, so the event a fork branches from stays apart too);
    ``groups``: runs broken only by forks and what they branch from, and the other invalid
    events of one lane and reason.
    """
    if level == "none":
        return []
    by_id = {node.event_id: node for node in nodes}
    apart = [node for node in nodes if (node.fork if level == "groups" else node.reason) is not None]
    kept = {node.event_id for node in apart} | {node.prev_event for node in apart if node.prev_event}
    if focus is not None:
        kept.add(focus)
    # Applied events join their applied prev: a valid event's children of its own chain are
    # one at most (two would be a fork, §7), so every group is a line.
    parent = {
        node.event_id: node.event_id for node in nodes if node.fate != "invalid" and node.event_id not in kept
    }

    def root(event_id: str) -> str:
        while parent[event_id] != event_id:
            parent[event_id] = parent[parent[event_id]]
            event_id = parent[event_id]
        return event_id

    for node in nodes:
        prev = node.prev_event
        if node.event_id in parent and prev in parent and by_id[prev].lane == node.lane:
            parent[root(node.event_id)] = root(prev)
    together: dict[tuple[Any, ...], list[str]] = {}
    for node in nodes:
        if node.event_id in parent:
            together.setdefault(("run", root(node.event_id)), []).append(node.event_id)
        elif level == "groups" and node.fate == "invalid" and node.event_id not in kept:
            together.setdefault(("invalid", node.lane, node.reason), []).append(node.event_id)
    return [
        members
        for (kind, *_), members in together.items()
        if len(members) >= (_MIN_RUN[level] if kind == "run" else 2)
    ]


def _draw(log: _Log, chosen: set[str], level: Collapse, focus: str | None) -> _Drawn:
    """The picture of the ``chosen`` events at ``level``: lanes, nodes, ghosts, edges, forks."""
    old_nodes = [node for node in log.nodes if node.event_id in chosen]
    lane_index = {old: new for new, old in enumerate(sorted({node.lane for node in old_nodes}))}
    forks = [fork for fork in log.forks if fork.event_ids[0] in chosen]
    new_fork = {event_id: index for index, fork in enumerate(forks) for event_id in fork.event_ids}
    nodes = [
        msgspec.structs.replace(node, lane=lane_index[node.lane], fork=new_fork.get(node.event_id))
        for node in old_nodes
    ]
    by_id = {node.event_id: node for node in nodes}
    group_of = {event_id: members for members in _groups(nodes, level, focus) for event_id in members}

    drawn: list[GraphNode | EventGroup] = []
    name_of: dict[str, str] = {}
    for node in nodes:
        members = group_of.get(node.event_id)
        if members is None:
            drawn.append(node)
            name_of[node.event_id] = node.name
        elif members[0] == node.event_id:
            group = _group([by_id[event_id] for event_id in members])
            drawn.append(group)
            name_of.update(dict.fromkeys(members, group.name))

    missing: dict[int, list[GraphEdge]] = {}
    for link in log.links:
        if link.kind == "missing_prev" and link.head in by_id:
            missing.setdefault(by_id[link.head].lane, []).append(link)
    ghosts = [
        GhostGroup(f"missing:{lane}", lane, tuple(sorted({link.tail for link in links})), len(links))
        for lane, links in sorted(missing.items())
    ]
    kinds: dict[tuple[str, str], set[EdgeKind]] = {}
    for link in log.links:
        if link.head not in by_id or (link.kind != "missing_prev" and link.tail not in by_id):
            continue
        tail = f"missing:{by_id[link.head].lane}" if link.kind == "missing_prev" else name_of[link.tail]
        if tail != name_of[link.head]:  # a link inside a group is the group
            kinds.setdefault((tail, name_of[link.head]), set()).add(link.kind)
    for (tail, head), found in kinds.items():
        back = kinds.get((head, tail), set())
        if "prev" in found and "supersedes" in back:
            # A prev link whose child superseded its prev: one arrow says both (§7).
            found.discard("prev")
            found.add("prev_supersedes")
            back.discard("supersedes")
    position = {
        name: index for index, name in enumerate([*(n.name for n in drawn), *(g.name for g in ghosts)])
    }
    order: tuple[EdgeKind, ...] = ("prev", "prev_supersedes", "missing_prev", "supersedes")
    edges = sorted(
        (GraphEdge(tail, head, kind) for (tail, head), found in kinds.items() for kind in found),
        key=lambda edge: (order.index(edge.kind), position[edge.head], position[edge.tail]),
    )
    lanes = tuple(log.lanes[old] for old in sorted(lane_index))
    drawn_forks = tuple(msgspec.structs.replace(fork, lane=lane_index[fork.lane]) for fork in forks)
    return _Drawn(lanes, tuple(drawn), tuple(ghosts), tuple(edges), drawn_forks)


def _group(members: Sequence[GraphNode]) -> EventGroup:
    first, last = members[0], members[-1]
    return EventGroup(
        name=f"events:{first.event_id}",
        lane=first.lane,
        fate="invalid" if first.fate == "invalid" else "applied",
        reason=first.reason,
        event_ids=tuple(node.event_id for node in members),
        superseded=sum(node.fate == "superseded" for node in members),
        first_created_at=first.created_at,
        last_created_at=last.created_at,
    )


def _fit(drawn: _Drawn, chosen: set[str], focus: str | None, max_nodes: int) -> set[str]:
    """The ``chosen`` events of the lanes that fit in ``max_nodes`` as ``drawn`` draws them (each
    lane's nodes are its own): the focus's lane first, then lanes with forks, with invalid
    events, in lane order."""
    cost = Counter(node.lane for node in drawn.nodes)
    cost.update(ghost.lane for ghost in drawn.ghosts)
    forked = {fork.lane for fork in drawn.forks}
    invalid = {node.lane for node in drawn.nodes if node.fate == "invalid"}
    focused = {node.lane for node in drawn.nodes if focus in _events_of(node)}
    taken: set[int] = set()
    room = max_nodes
    for lane in sorted(
        cost, key=lambda lane: (lane not in focused, lane not in forked, lane not in invalid, lane)
    ):
        if cost[lane] <= room:
            taken.add(lane)
            room -= cost[lane]
    return {event_id for node in drawn.nodes if node.lane in taken for event_id in _events_of(node)} & chosen


def _events_of(node: GraphNode | EventGroup) -> tuple[str, ...]:
    return node.event_ids if isinstance(node, EventGroup) else (node.event_id,)
