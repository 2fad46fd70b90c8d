"""The picture as a Mermaid flowchart (:func:`to_mermaid`), its key as text."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import msgspec

from .key import _codes_used, _key_text, _marks
from .labels import _ghost_lines, _group_lines, _heading, _node_lines
from .model import EdgeKind, EventGroup, GraphNode, LogGraph
from .palette import (
    _APPLIED_FILL,
    _APPLIED_LINE,
    _FAMILY_MARKS,
    _FORK_LINE,
    _GHOST_LINE,
    _LANE_LINE,
    _MUTED,
    _SUPERSEDED_FILL,
    _SUPERSEDED_LINE,
    _TEXT,
    OKABE_ITO,
    REASON_COLOURS,
)

_MERMAID_SAFE: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _.,:/-")


def _mermaid_text(text: str) -> str:
    """Text for a quoted Mermaid label: every character that could mean markup as ``#code;``."""
    return "".join(char if char in _MERMAID_SAFE else f"#{ord(char)};" for char in text)


def _mermaid_id(name: str) -> str:
    """A node's Mermaid id: ``e`` + the full hex of an event (a short prefix can be made to
    collide, and ids must be unique), ``r`` + the first event's of a group, ``g`` + a ghost's lane."""
    if name.startswith("missing:"):
        return "g" + name.removeprefix("missing:")
    if name.startswith("events:"):
        return "r" + name.removeprefix("events:sha256:")
    return "e" + name.removeprefix("sha256:")


def _mermaid_class(node: GraphNode | EventGroup) -> str:
    if node.reason is not None:
        return f"invalid_{node.reason}"
    return "run" if isinstance(node, EventGroup) else node.fate


_MERMAID_EDGES: Final[Mapping[EdgeKind, str]] = {
    "prev": "-->",
    "prev_supersedes": "-- superseded by -->",
    "missing_prev": "-.->",
    "supersedes": "-. supersedes .->",
}


def to_mermaid(graph: LogGraph) -> str:
    """The picture as a Mermaid flowchart (for a Markdown ```` ```mermaid ```` block)."""
    out = [
        "---",
        f"title: {msgspec.json.encode(' / '.join(_heading(graph))).decode('utf-8')}",
        "---",
        "flowchart LR",
    ]

    def node_line(node: GraphNode | EventGroup, indent: str) -> str:
        if isinstance(node, EventGroup):
            label = "<br/>".join(_mermaid_text(line) for line in _group_lines(node))
            return f'{indent}{_mermaid_id(node.name)}[["{label}"]]'
        label = "<br/>".join(_mermaid_text(line) for line in _node_lines(node))
        return f'{indent}{_mermaid_id(node.name)}["{label}"]'

    for index, lane in enumerate(graph.lanes):
        out += [f'  subgraph lane{index}["{_mermaid_text(lane.label)}"]', "    direction LR"]
        for fork_index, fork in enumerate(graph.forks):
            if fork.lane == index:
                out.append(f'    subgraph fork{fork_index}["fork: equivocation"]')
                out += [
                    node_line(node, "      ")
                    for node in graph.nodes
                    if isinstance(node, GraphNode) and node.fork == fork_index
                ]
                out.append("    end")
        out += [
            node_line(node, "    ")
            for node in graph.nodes
            if node.lane == index and (isinstance(node, EventGroup) or node.fork is None)
        ]
        out.append("  end")
    for ghost in graph.ghosts:
        label = "<br/>".join(_mermaid_text(line) for line in _ghost_lines(ghost))
        out.append(f'  {_mermaid_id(ghost.name)}["{label}"]')
    out += [
        f"  {_mermaid_id(edge.tail)} {_MERMAID_EDGES[edge.kind]} {_mermaid_id(edge.head)}"
        for edge in graph.edges
    ]
    marks = _marks(graph)
    if marks:
        out += ['  subgraph key["key"]', "    direction TB"]
        out += [
            f'    key_{index}["{_mermaid_text(_mermaid_key_sample(mark) + _key_text(graph, mark))}"]'
            for index, mark in enumerate(marks)
        ]
        out.append("  end")

    styles = {
        "applied": f"fill:{_APPLIED_FILL},stroke:{_APPLIED_LINE},color:{_TEXT}",
        "superseded": (
            f"fill:{_SUPERSEDED_FILL},stroke:{_SUPERSEDED_LINE},color:{_MUTED},text-decoration:line-through"
        ),
        "run": f"fill:{_APPLIED_FILL},stroke:{_APPLIED_LINE},stroke-width:2px,color:{_TEXT}",
    }
    for reason in sorted({node.reason for node in graph.nodes if node.reason is not None}):
        styles[f"invalid_{reason}"] = (
            f"fill:#ffffff,stroke:{REASON_COLOURS[reason]},stroke-width:3px,color:{_TEXT}"
        )
    styles["ghost"] = f"fill:#ffffff,stroke:{_GHOST_LINE},stroke-dasharray:5 5,color:{_MUTED}"
    styles["key"] = f"fill:#ffffff,stroke:{_LANE_LINE},color:{_TEXT}"
    members: dict[str, list[str]] = {}
    for node in graph.nodes:
        members.setdefault(_mermaid_class(node), []).append(_mermaid_id(node.name))
    members["ghost"] = [_mermaid_id(ghost.name) for ghost in graph.ghosts]
    # Each entry of the key wears the class of its mark, where the mark is a node's look.
    for index, mark in enumerate(marks):
        members.setdefault(_mermaid_key_class(graph, mark), []).append(f"key_{index}")
    for name, style in styles.items():
        if members.get(name):
            out.append(f"  classDef {name} {style}")
            out.append(f"  class {','.join(members[name])} {name}")
    for fork_index in range(len(graph.forks)):
        out.append(f"  style fork{fork_index} fill:none,stroke:{_FORK_LINE},stroke-width:3px")
    if graph.summary.around is not None and "focus" in marks:
        out.append(f"  style {_mermaid_id(graph.summary.around)} stroke-width:5px")
    return "\n".join(out) + "\n"


# The key of a Mermaid flowchart is text: each entry starts with a word for its mark.
_MERMAID_SAMPLES: Final[Mapping[str, str]] = {
    "lane": "box",
    "applied": "green",
    "superseded": "pale, struck",
    "run": "double-sided green",
    "focus": "thick line",
    "group": "double-sided",
    "fork": "vermillion box",
    "ghost": "dashed orange",
    "prev": "arrow",
    "prev_supersedes": "arrow, superseded by",
    "missing_prev": "dashed arrow",
    "supersedes": "dotted arrow, supersedes",
}


def _mermaid_key_class(graph: LogGraph, mark: str) -> str:
    if mark.startswith("invalid:"):
        family = _FAMILY_MARKS[mark]
        return f"invalid_{_codes_used(graph, family)[0]}"
    return mark if mark in ("applied", "superseded", "run", "ghost") else "key"


def _mermaid_key_sample(mark: str) -> str:
    if mark.startswith("invalid:"):
        family = _FAMILY_MARKS[mark]
        name = next(name for name, colour in OKABE_ITO.items() if colour == family.colour)
        return f"{name.replace('_', ' ')} line: "
    return f"{_MERMAID_SAMPLES[mark]}: "
