"""The picture as Graphviz DOT text (:func:`to_dot`): clusters per lane and fork, the title and key
as one HTML table, invisible arrows that lay the lanes out in rows."""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from .key import _key_text, _marks
from .labels import _ghost_lines, _group_lines, _group_tooltip, _heading, _node_lines, _tooltip
from .model import EdgeKind, EventGroup, GraphNode, LogGraph
from .palette import (
    _APPLIED_FILL,
    _APPLIED_LINE,
    _EDGE,
    _FAMILY_MARKS,
    _FORK_LINE,
    _GHOST_LINE,
    _LANE_LINE,
    _MUTED,
    _SUPERSEDED_FILL,
    _SUPERSEDED_LINE,
    _TEXT,
    REASON_COLOURS,
)


def _dot_html(text: str) -> str:
    return html.escape(text, quote=True)


def _dot_quoted(text: str) -> str:
    """A DOT quoted string whose escString reading (``\\N``, ``\\n``, …) is the text itself."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _dot_attrs(attrs: Mapping[str, str]) -> str:
    return ", ".join(f"{name}={value}" for name, value in attrs.items())


# The look of each arrow kind; a supersedes arrow never moves the nodes (constraint=false).
_DOT_EDGES: Final[Mapping[EdgeKind, Mapping[str, str]]] = {
    "prev": {},
    "prev_supersedes": {"label": '"superseded by"', "fontsize": "8", "fontcolor": f'"{_MUTED}"'},
    "missing_prev": {"style": "dashed", "color": f'"{_GHOST_LINE}"'},
    "supersedes": {
        "style": "dotted",
        "color": f'"{_MUTED}"',
        "fontcolor": f'"{_MUTED}"',
        "fontsize": "8",
        "label": '"supersedes"',
        "constraint": "false",
    },
}
# The largest picture, in inches: 4,000 pixels at Graphviz's 96 dots per inch. A larger one is
# drawn smaller (dot's `size`), never cut or refused.
_MAX_INCHES: Final = 41.6
# The sample of each mark in the key: a table cell drawn as the mark is.
_DOT_SAMPLES: Final[Mapping[str, str]] = {
    "lane": f'<TD BORDER="1" COLOR="{_LANE_LINE}" STYLE="rounded"><FONT COLOR="{_MUTED}">lane</FONT></TD>',
    "applied": f'<TD BORDER="1" COLOR="{_APPLIED_LINE}" BGCOLOR="{_APPLIED_FILL}" STYLE="rounded">event</TD>',
    "superseded": (
        f'<TD BORDER="1" COLOR="{_SUPERSEDED_LINE}" BGCOLOR="{_SUPERSEDED_FILL}" STYLE="rounded">'
        f'<FONT COLOR="{_MUTED}"><S>event</S></FONT></TD>'
    ),
    "run": f'<TD BORDER="1" COLOR="{_APPLIED_LINE}" BGCOLOR="{_APPLIED_FILL}">N applied events</TD>',
    "focus": (
        '<TD BORDER="1" STYLE="rounded" CELLPADDING="1"><TABLE BORDER="1" STYLE="rounded" CELLBORDER="0" '
        'CELLPADDING="1"><TR><TD>event</TD></TR></TABLE></TD>'
    ),
    "group": f'<TD BORDER="1" COLOR="{_TEXT}">N invalid events</TD>',
    "fork": f'<TD BORDER="2" COLOR="{_FORK_LINE}"><FONT COLOR="{_FORK_LINE}">fork</FONT></TD>',
    "ghost": f'<TD BORDER="1" COLOR="{_GHOST_LINE}" STYLE="dashed">missing</TD>',
    "prev": f'<TD><FONT COLOR="{_EDGE}">\u2500\u2500\u2500\u25b6</FONT></TD>',
    "prev_supersedes": (
        f'<TD><FONT COLOR="{_EDGE}">\u2500\u2500\u2500\u25b6</FONT><BR/>'
        f'<FONT POINT-SIZE="8" COLOR="{_MUTED}">superseded by</FONT></TD>'
    ),
    "missing_prev": f'<TD><FONT COLOR="{_GHOST_LINE}">\u254c\u254c\u254c\u25b6</FONT></TD>',
    "supersedes": (
        f'<TD><FONT COLOR="{_MUTED}">\u00b7\u00b7\u00b7\u00b7\u25b8</FONT><BR/>'
        f'<FONT POINT-SIZE="8" COLOR="{_MUTED}">supersedes</FONT></TD>'
    ),
}
_KEY_COLUMNS: Final = 2
_DOT_TABLE: Final = 'BORDER="0" CELLBORDER="0" CELLSPACING="3" CELLPADDING="2"'


def _dot_sample(mark: str) -> str:
    if mark.startswith("invalid:"):
        family = _FAMILY_MARKS[mark]
        return f'<TD BORDER="2" COLOR="{family.colour}" STYLE="rounded"><B>reason</B></TD>'
    return _DOT_SAMPLES[mark]


def _dot_heading(graph: LogGraph) -> str:
    """The title and the key, as one Graphviz HTML table (the graph's label)."""
    title, *more = (_dot_html(line) for line in _heading(graph))
    rows = [f'<TR><TD ALIGN="LEFT"><B>{title}</B></TD></TR>']
    rows += [f'<TR><TD ALIGN="LEFT">{line}</TD></TR>' for line in more]
    cells = [
        _dot_sample(mark).replace("<TD", f'<TD ID="key_{mark.replace(":", "_")}"', 1)
        + f'<TD ALIGN="LEFT"><FONT POINT-SIZE="9">{_dot_html(_key_text(graph, mark))}</FONT></TD>'
        for mark in _marks(graph)
    ]
    key = "".join(
        "<TR>" + "".join(cells[start : start + _KEY_COLUMNS]) + "</TR>"
        for start in range(0, len(cells), _KEY_COLUMNS)
    )
    if key:
        rows.append(f'<TR><TD ALIGN="LEFT"><TABLE {_DOT_TABLE}>{key}</TABLE></TD></TR>')
    return f"<TABLE {_DOT_TABLE}>{''.join(rows)}</TABLE>"


def _dot_node(node: GraphNode, focus: str | None) -> str:
    short, event_type, *more = (_dot_html(line) for line in _node_lines(node))
    label = f"<B>{short}</B><BR/>{event_type}"
    attrs = {"tooltip": _dot_quoted(_tooltip(node))}
    if node.reason is not None:
        label += f"<BR/><B>{more[0]}</B>"
        attrs.update(style='"rounded"', color=f'"{REASON_COLOURS[node.reason]}"', penwidth="2.5")
    elif node.fate == "superseded":
        label = f"<S>{label}<BR/>{more[0]}</S>"
        attrs.update(
            style='"rounded,filled"',
            fillcolor=f'"{_SUPERSEDED_FILL}"',
            color=f'"{_SUPERSEDED_LINE}"',
            fontcolor=f'"{_MUTED}"',
        )
    else:
        attrs.update(style='"rounded,filled"', fillcolor=f'"{_APPLIED_FILL}"', color=f'"{_APPLIED_LINE}"')
    if node.event_id == focus:
        attrs["peripheries"] = "2"
    return f'"{node.event_id}" [label=<{label}>, {_dot_attrs(attrs)}];'


def _dot_group(group: EventGroup) -> str:
    count, days, *more = (_dot_html(line) for line in _group_lines(group))
    label = f"<B>{count}</B><BR/>{days}"
    attrs = {"shape": "box3d", "tooltip": _dot_quoted(_group_tooltip(group))}
    if group.reason is not None:
        label += f"<BR/><B>{more[0]}</B>"
        attrs.update(color=f'"{REASON_COLOURS[group.reason]}"', penwidth="2.5")
    else:
        label += f'<BR/><FONT POINT-SIZE="9">{more[0]}</FONT>' if more else ""
        attrs.update(style='"filled"', fillcolor=f'"{_APPLIED_FILL}"', color=f'"{_APPLIED_LINE}"')
    return f'"{group.name}" [label=<{label}>, {_dot_attrs(attrs)}];'


def _dot_drawn(node: GraphNode | EventGroup, focus: str | None) -> str:
    return _dot_group(node) if isinstance(node, EventGroup) else _dot_node(node, focus)


def _dot_rows(graph: LogGraph) -> tuple[list[tuple[str, str]], set[tuple[str, str]]]:
    """Invisible arrows that lay the lanes out in rows, and the arrows that join two lanes.

    dot ranks nodes left to right along the arrows and stacks what shares a rank: one lane per
    row and its unlinked events in one column would make a picture tall and thin. So a lane's
    unlinked events are laid out in a square, and consecutive lanes share a row (an arrow from
    the last rank of one to the first of the next) while the row is no wider than the widest
    lane, or the square root of all the lanes' widths. Arrows between lanes do not rank.
    """
    lane_of = {node.name: node.lane for node in graph.nodes}
    lane_of.update((ghost.name, ghost.lane) for ghost in graph.ghosts)
    members: dict[int, list[str]] = {}
    for name, lane in lane_of.items():
        members.setdefault(lane, []).append(name)
    across = {(e.tail, e.head) for e in graph.edges if lane_of[e.tail] != lane_of[e.head]}
    ranked = [
        (e.tail, e.head) for e in graph.edges if e.kind != "supersedes" and (e.tail, e.head) not in across
    ]
    linked = {name for pair in ranked for name in pair}
    spacers: list[tuple[str, str]] = []
    for names in members.values():
        alone = [name for name in names if name not in linked]
        side = math.isqrt(len(alone) - 1) + 1 if alone else 0
        spacers += [(alone[index - 1], alone[index]) for index in range(1, len(alone)) if index % side]
    rank = _ranks([*ranked, *spacers], lane_of)
    widths = {lane: 1 + max(rank[name] for name in names) for lane, names in members.items()}
    row_width = max([*widths.values(), math.isqrt(sum(widths.values()) - 1) + 1] if widths else [0])
    row: list[int] = []
    for lane in sorted(members):
        if row and sum(widths[other] for other in row) + widths[lane] > row_width:
            row = []
        if row:
            last = members[row[-1]]
            anchor = next(name for name in last if rank[name] == widths[row[-1]] - 1)
            spacers += [(anchor, name) for name in members[lane] if rank[name] == 0]
        row.append(lane)
    return spacers, across


def _ranks(arrows: Sequence[tuple[str, str]], names: Iterable[str]) -> dict[str, int]:
    """Each name's rank along the arrows: 0 without one in, else one past its furthest tail
    (an arrow that would close a cycle, possible between groups, does not count)."""
    heads: dict[str, list[str]] = {}
    ins = dict.fromkeys(names, 0)
    for tail, head in arrows:
        heads.setdefault(tail, []).append(head)
        ins[head] += 1
    rank = dict.fromkeys(ins, 0)
    ready = [name for name, count in ins.items() if count == 0]
    while ready:
        name = ready.pop()
        for head in heads.get(name, ()):
            rank[head] = max(rank[head], rank[name] + 1)
            ins[head] -= 1
            if ins[head] == 0:
                ready.append(head)
    return rank


def to_dot(graph: LogGraph) -> str:
    """The picture as Graphviz DOT text (``dot -Tsvg`` draws it), one statement per line."""
    focus = graph.summary.around
    out = [
        "digraph pith_merge_log {",
        f'  graph [rankdir=LR, newrank=true, fontname="Helvetica", fontsize=12, labelloc=t, '
        f'labeljust=l, nodesep=0.25, ranksep=0.35, size="{_MAX_INCHES},{_MAX_INCHES}", '
        f"label=<{_dot_heading(graph)}>];",
        f'  node [shape=box, fontname="Helvetica", fontsize=10, fontcolor="{_TEXT}"];',
        f'  edge [color="{_EDGE}", arrowsize=0.7, fontname="Helvetica"];',
    ]
    # rankdir=LR turns dot's left-to-right order of clusters and of nodes in a rank into
    # bottom-to-top: they are written last first, so the picture reads top-down in order.
    for index, lane in reversed(list(enumerate(graph.lanes))):
        out += [
            f"  subgraph cluster_lane_{index} {{",
            f'    label=<{_dot_html(lane.label)}>; style="rounded"; color="{_LANE_LINE}"; '
            f'fontcolor="{_MUTED}";',
        ]
        for fork_index, fork in reversed(list(enumerate(graph.forks))):
            if fork.lane == index:
                out += [
                    f"    subgraph cluster_fork_{fork_index} {{",
                    f'      label=<fork: equivocation>; style="rounded,bold"; color="{_FORK_LINE}"; '
                    f'fontcolor="{_FORK_LINE}"; penwidth=2.5;',
                ]
                out += [
                    f"      {_dot_drawn(node, focus)}"
                    for node in reversed(graph.nodes)
                    if isinstance(node, GraphNode) and node.fork == fork_index
                ]
                out.append("    }")
        out += [
            f"    {_dot_drawn(node, focus)}"
            for node in reversed(graph.nodes)
            if node.lane == index and (isinstance(node, EventGroup) or node.fork is None)
        ]
        out.append("  }")
    for ghost in graph.ghosts:
        label = "<BR/>".join(_dot_html(line) for line in _ghost_lines(ghost))
        tooltip = f"{' '.join(ghost.prev_events)} (no admitted event)"
        out.append(
            f'  "{ghost.name}" [label=<{label}>, style="rounded,dashed", color="{_GHOST_LINE}", '
            f'penwidth=1.5, fontcolor="{_MUTED}", tooltip={_dot_quoted(tooltip)}];'
        )
    spacers, across = _dot_rows(graph)
    for edge in graph.edges:
        attrs = dict(_DOT_EDGES[edge.kind])
        if (edge.tail, edge.head) in across:
            attrs["constraint"] = "false"
        out.append(f'  "{edge.tail}" -> "{edge.head}"' + (f" [{_dot_attrs(attrs)}]" if attrs else "") + ";")
    out += [f'  "{tail}" -> "{head}" [style=invis];' for tail, head in spacers]
    out.append("}")
    return "\n".join(out) + "\n"
