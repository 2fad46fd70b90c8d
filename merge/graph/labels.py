"""The words of a picture: its title, and the label and tooltip of each node."""

from __future__ import annotations

from .model import EventGroup, GhostGroup, GraphNode, LogGraph
from .text import _MAX_SUBJECT, _plural, _short, _shown


def _heading(graph: LogGraph) -> list[str]:
    """The title's lines: the counts of the log, the rejected inputs, what the picture leaves out."""
    s = graph.summary
    counts = [
        f"{_plural(s.events, 'event')}: {s.applied:,} applied",
        f"{s.superseded:,} superseded",
        f"{s.invalid:,} invalid",
    ]
    if s.forks:
        counts.append(_plural(s.forks, "fork"))
    if s.missing_prevs:
        counts.append(_plural(s.missing_prevs, "missing prev"))
    lines = [f"{_shown(graph.subject, _MAX_SUBJECT)}: " + ", ".join(counts)]
    if s.rejected:
        total = sum(count for _, count in s.rejected)
        by_code = ", ".join(f"{code} {count:,}" for code, count in s.rejected)
        lines.append(f"{_plural(total, 'input')} rejected: {by_code}")
    notes = []
    if s.around is not None:
        notes.append(
            f"around {_short(s.around)}, {_plural(s.depth or 0, 'link')} out: "
            f"{s.drawn_events:,} of {s.events:,} events"
        )
    if s.collapse == "groups":
        notes.append(f"to fit {s.max_nodes:,} nodes, invalid events of one chain and reason are one node too")
    if s.lanes_left_out:
        notes.append(
            f"left out to fit {s.max_nodes:,} nodes: {_plural(s.lanes_left_out, 'chain')} "
            f"({_plural(s.events_left_out, 'event')}, {_plural(s.forks_left_out, 'fork')})"
        )
    if notes:
        lines.append("; ".join(notes))
    return lines


def _node_lines(node: GraphNode) -> list[str]:
    """The lines of a node's label: short id, event type, and the reason or ``superseded``."""
    lines = [_short(node.event_id), _shown(node.event_type)]
    if node.reason is not None:
        lines.append(str(node.reason))
    elif node.fate == "superseded":
        lines.append("superseded")
    return lines


def _days(group: EventGroup) -> str:
    """``2026-07-05 … 2026-07-09``: the dates (as written) of a group's first and last events."""
    first, last = (_shown((text or "?")[:10]) for text in (group.first_created_at, group.last_created_at))
    return first if first == last else f"{first} \u2026 {last}"


def _group_lines(group: EventGroup) -> list[str]:
    """``412 applied events``, the dates, then ``37 superseded`` or the reason code."""
    what = "applied event" if group.fate == "applied" else "invalid event"
    lines = [_plural(len(group.event_ids), what), _days(group)]
    if group.reason is not None:
        lines.append(str(group.reason))
    elif group.superseded:
        lines.append(f"{group.superseded:,} superseded")
    return lines


def _ghost_lines(ghost: GhostGroup) -> list[str]:
    if len(ghost.prev_events) == 1:
        return ["missing", _short(ghost.prev_events[0])]
    return ["missing", _plural(len(ghost.prev_events), "prev")]


def _tooltip(node: GraphNode) -> str:
    fate = f"invalid: {node.reason}" if node.reason is not None else node.fate
    return f"{node.event_id} {_shown(node.event_type)} {_shown(node.created_at)} ({fate})"


def _group_tooltip(group: EventGroup) -> str:
    return f"{' '.join(_group_lines(group))}: {group.event_ids[0]} \u2026 {group.event_ids[-1]}"
