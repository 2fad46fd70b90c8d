"""A picture of a subject's log: the ``prev_event`` DAG as Graphviz DOT or Mermaid text.

:func:`log_graph` describes the picture from what the fold decided (:class:`merge.FoldResult`:
who applied, who was superseded and by whom, each invalid event's reason, the forks) and what
each admitted event says about itself (type, chain, ``created_at``, ``prev_event``; see
:func:`event_values`). :func:`to_dot` and :func:`to_mermaid` draw that description:

- one lane per chain (§7: ``(target, signer.key_id)``, the record chain for ``record_created``);
- applied events filled; superseded ones (applied, then removed from ``current``, §7) filled
  pale with their label struck through, and a dotted ``supersedes`` arrow from who removed them;
- invalid events outlined in the colour of their reason (:data:`REASON_COLOURS`) and labelled
  with its code (§6, §7);
- forks (``equivocations``, §7) boxed in red;
- a ``prev_event`` that names no admitted event drawn as a dashed ghost node.

Pure: no files, no clock, no subprocess (the CLI runs Graphviz). The output is deterministic:
everything is sorted (lanes by chain, events by apply order, then ``created_at``, then
``event_id``), so the same state gives the same bytes, whatever the order or repeats of the inputs.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal

import msgspec

from .admission import Admitted, Rejection, admit
from .errors import InputError
from .identifiers import EVENT_ID_PATTERN
from .reasons import Reason
from .state import FoldResult
from .timestamps import parse_timestamp

__all__ = [
    "REASON_COLOURS",
    "EdgeKind",
    "Fate",
    "ForkBox",
    "GraphEdge",
    "GraphNode",
    "Lane",
    "LogGraph",
    "event_values",
    "log_graph",
    "to_dot",
    "to_mermaid",
]

#: What became of an admitted event: applied and in ``current``, applied then superseded, invalid.
Fate = Literal["applied", "superseded", "invalid"]
#: What an arrow says (see :class:`GraphEdge`).
EdgeKind = Literal["prev", "missing_prev", "supersedes"]

#: The colour of each reason code: families of hues by the rule that decided it (§6 encoding
#: and identity: browns; subject, type, target: olives; keys and signatures: wines; payloads:
#: purples; §7 chain rules: blues and teals; ``equivocation``: the red of the fork boxes).
REASON_COLOURS: Final[Mapping[Reason, str]] = {
    Reason.NON_CANONICAL_JSON: "#8c510a",
    Reason.UNSUPPORTED_SCHEMA_VERSION: "#bf812d",
    Reason.MALFORMED: "#e08214",
    Reason.EVENT_ID_MISMATCH: "#b35806",
    Reason.CONTENT_HASH_MISMATCH: "#d95f02",
    Reason.WRONG_SUBJECT: "#808000",
    Reason.UNKNOWN_EVENT_TYPE: "#6b8e23",
    Reason.TARGET_MISMATCH: "#556b2f",
    Reason.UNKNOWN_KEY: "#c2185b",
    Reason.KEY_MISMATCH: "#ad1457",
    Reason.UNSUPPORTED_SIGNATURE: "#e7298a",
    Reason.BAD_SIGNATURE: "#67001f",
    Reason.KEY_EXPIRED: "#d6604d",
    Reason.RECORD_NOT_GENESIS: "#6a3d9a",
    Reason.BAD_PAYLOAD: "#8e44ad",
    Reason.BAD_RECEIPT: "#9e6ebd",
    Reason.MISSING_PREV: "#1f78b4",
    Reason.INVALID_PREV: "#4393c3",
    Reason.PREV_WRONG_CHAIN: "#01665e",
    Reason.CREATED_BEFORE_PREV: "#35978f",
    Reason.EQUIVOCATION: "#e31a1c",
}

_APPLIED_FILL: Final = "#b7e4c7"
_APPLIED_LINE: Final = "#2d6a4f"
_SUPERSEDED_FILL: Final = "#e3f2e8"
_SUPERSEDED_LINE: Final = "#95b8a3"
_MUTED: Final = "#6c757d"
_GHOST: Final = "#868e96"
_LANE_LINE: Final = "#ced4da"
_FORK_LINE: Final = REASON_COLOURS[Reason.EQUIVOCATION]
_TEXT: Final = "#212529"

# Hex digits of an event id shown in a label (the full id is the node's name and tooltip).
_SHORT_HEX: Final = 12
#: Longest untrusted text (an event type, a target, a key id) shown in a label.
_MAX_TEXT: Final = 32
_MAX_SUBJECT: Final = 80


class Lane(msgspec.Struct, frozen=True):
    """One chain (§7): ``(target, key_id)``; the record chain is ``("record", None)``.

    ``None`` also stands for a value the event does not hold as a string (it failed §6).
    """

    target: str | None
    key_id: str | None

    @property
    def label(self) -> str:
        """``"record"``, or ``"target / key_id"`` (``?`` for what the event does not say)."""
        if (self.target, self.key_id) == ("record", None):
            return "record"
        return f"{_shown(self.target)} / {_shown(self.key_id)}"


class GraphNode(msgspec.Struct, frozen=True):
    """One admitted event: where it is drawn and what became of it.

    ``lane`` and ``fork`` index :attr:`LogGraph.lanes` and :attr:`LogGraph.forks`;
    ``prev_event`` is ``None`` when the event names none (or nothing shaped like an event id).
    """

    event_id: str
    lane: int
    fate: Fate
    reason: Reason | None
    event_type: str | None
    created_at: str | None
    prev_event: str | None
    fork: int | None


class GraphEdge(msgspec.Struct, frozen=True):
    """An arrow from ``tail`` to ``head``.

    ``prev``: ``tail`` is the admitted ``prev_event`` of ``head``; ``missing_prev``: ``tail`` is
    a ghost (a ``prev_event`` that names no admitted event); ``supersedes``: applied ``tail``
    removed applied ``head`` from ``current`` (§7, as the fold found it).
    """

    tail: str
    head: str
    kind: EdgeKind


class ForkBox(msgspec.Struct, frozen=True):
    """One entry of ``equivocations`` (§7): the lane, the shared ``prev_event``, the sorted ids."""

    lane: int
    prev_event: str | None
    event_ids: tuple[str, ...]


class LogGraph(msgspec.Struct, frozen=True):
    """The picture of one subject's log, sorted, ready to draw (:func:`to_dot`, :func:`to_mermaid`).

    ``nodes`` are in drawing order (by lane, then apply order, ``created_at``, ``event_id``);
    ``ghosts`` are the sorted ``prev_event`` ids that name no admitted event.
    """

    subject: str
    lanes: tuple[Lane, ...]
    nodes: tuple[GraphNode, ...]
    ghosts: tuple[str, ...]
    edges: tuple[GraphEdge, ...]
    forks: tuple[ForkBox, ...]


# --- the description ------------------------------------------------------------------------


def event_values(inputs: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """``event_id`` → what the event says about itself, for every admitted event (§5).

    Of several copies of one ``event_id``, a copy whose body hashes to that id speaks for it
    (such copies agree on every field the picture uses, §2); when no copy does, the copy with
    the smallest JSON text. So the choice never depends on the inputs' order or repeats.
    """
    best: dict[str, tuple[tuple[bool, bytes], Admitted]] = {}
    for index, item in enumerate(inputs):
        outcome = admit(item, index)
        if isinstance(outcome, Rejection):
            continue
        known = best.get(outcome.event_id)
        if known is not None and known[1].raw == outcome.raw:
            continue  # an identical copy (§5)
        rank = (not outcome.bound, outcome.raw)
        if known is None or rank < known[0]:
            best[outcome.event_id] = (rank, outcome)
    return {event_id: best[event_id][1].value for event_id in sorted(best)}


def log_graph(result: FoldResult, events: Mapping[str, Mapping[str, Any]]) -> LogGraph:
    """Describe the picture of the fold ``result`` of the admitted ``events`` (:func:`event_values`).

    Raises :class:`merge.InputError` when ``events`` are not exactly the result's events, or
    when the result does not say who superseded whom (one served from a store checkpoint).
    """
    state = result.state
    if result.superseded is None:
        raise InputError("the fold result does not say who superseded whom (a checkpoint): fold the events")
    reasons = result.reasons
    apply_index = {event_id: index for index, event_id in enumerate(state.applied_event_ids)}
    known = apply_index.keys() | reasons.keys()
    if known != events.keys():
        strays = sorted(events.keys() - known) or sorted(known - events.keys())
        raise InputError(
            f"the events are not the fold result's: {len(events)} events, the state has "
            f"{state.event_count}; e.g. {strays[0]}"
        )
    removed_by = {item.event_id: item.superseded_by for item in result.superseded}

    facts = {event_id: _facts(value) for event_id, value in events.items()}
    lanes = sorted({lane for lane, *_ in facts.values()}, key=_lane_order)
    lane_index = {lane: index for index, lane in enumerate(lanes)}

    def drawing_order(event_id: str) -> tuple[int, float, float, str]:
        instant = parse_timestamp(facts[event_id][2] or "")
        return (
            lane_index[facts[event_id][0]],
            float("inf") if instant is None else instant,
            apply_index.get(event_id, float("inf")),
            event_id,
        )

    forks = sorted(
        (
            ForkBox(lane_index[facts[fork.event_ids[0]][0]], fork.prev_event, fork.event_ids)
            for fork in state.equivocations
        ),
        key=lambda fork: (fork.lane, drawing_order(fork.event_ids[0]), fork.event_ids),
    )
    fork_of = {event_id: index for index, fork in enumerate(forks) for event_id in fork.event_ids}

    nodes: list[GraphNode] = []
    for event_id in sorted(events, key=drawing_order):
        lane, event_type, created_at, prev = facts[event_id]
        fate: Fate = "invalid" if event_id in reasons else "applied"
        if event_id in removed_by:
            fate = "superseded"
        nodes.append(
            GraphNode(
                event_id=event_id,
                lane=lane_index[lane],
                fate=fate,
                reason=reasons.get(event_id),
                event_type=event_type,
                created_at=created_at,
                prev_event=prev,
                fork=fork_of.get(event_id),
            )
        )

    position = {node.event_id: index for index, node in enumerate(nodes)}
    ghosts = sorted({node.prev_event for node in nodes if node.prev_event and node.prev_event not in events})
    edges = [
        GraphEdge(node.prev_event, node.event_id, "prev" if node.prev_event in events else "missing_prev")
        for node in nodes
        if node.prev_event is not None
    ]
    edges += [
        GraphEdge(by, event_id, "supersedes") for event_id, removers in removed_by.items() for by in removers
    ]
    kinds = ("prev", "missing_prev", "supersedes")
    edges.sort(key=lambda edge: (kinds.index(edge.kind), position[edge.head], edge.tail))
    return LogGraph(state.pith_number, tuple(lanes), tuple(nodes), tuple(ghosts), tuple(edges), tuple(forks))


def _facts(value: Mapping[str, Any]) -> tuple[Lane, str | None, str | None, str | None]:
    """(lane, event_type, created_at, prev_event) of an event, as far as it holds them (§4, §7)."""
    event_type = _string(value.get("event_type"))
    if event_type == "record_created":
        lane = Lane("record", None)
    else:
        signer = value.get("signer")
        key_id = _string(signer.get("key_id")) if isinstance(signer, dict) else None
        lane = Lane(_string(value.get("target")), key_id)
    prev = _string(value.get("prev_event"))
    # Only an event id names an event: a prev_event of another shape failed §4 (malformed).
    if prev is not None and EVENT_ID_PATTERN.fullmatch(prev) is None:
        prev = None
    return lane, event_type, _string(value.get("created_at")), prev


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _lane_order(lane: Lane) -> tuple[bool, bool, str, bool, str]:
    # The record chain first (it is where a subject starts), then by target and key id.
    return (
        lane.label != "record",
        lane.target is None,
        lane.target or "",
        lane.key_id is None,
        lane.key_id or "",
    )


# --- text of labels -------------------------------------------------------------------------


def _shown(text: str | None, limit: int = _MAX_TEXT) -> str:
    """Untrusted text as a label shows it: at most ``limit`` printable characters."""
    if text is None:
        return "?"
    clean = "".join(char if char.isprintable() else "\ufffd" for char in text)
    return clean if len(clean) <= limit else clean[: limit - 1] + "\u2026"


def _short(event_id: str) -> str:
    return event_id.removeprefix("sha256:")[:_SHORT_HEX]


def _title(graph: LogGraph) -> str:
    fates = [node.fate for node in graph.nodes]
    parts = [
        f"{len(graph.nodes)} events: {fates.count('applied')} applied",
        f"{fates.count('superseded')} superseded",
        f"{fates.count('invalid')} invalid",
    ]
    if graph.forks:
        parts.append(f"{len(graph.forks)} fork{'s' * (len(graph.forks) != 1)}")
    if graph.ghosts:
        parts.append(f"{len(graph.ghosts)} missing prev{'s' * (len(graph.ghosts) != 1)}")
    return f"{_shown(graph.subject, _MAX_SUBJECT)}: " + ", ".join(parts)


def _node_lines(node: GraphNode) -> list[str]:
    """The lines of a node's label: short id, event type, and the reason or ``superseded``."""
    lines = [_short(node.event_id), _shown(node.event_type)]
    if node.reason is not None:
        lines.append(str(node.reason))
    elif node.fate == "superseded":
        lines.append("superseded")
    return lines


def _tooltip(node: GraphNode) -> str:
    fate = f"invalid: {node.reason}" if node.reason is not None else node.fate
    return f"{node.event_id} {_shown(node.event_type)} {_shown(node.created_at)} ({fate})"


# --- DOT ------------------------------------------------------------------------------------


def _dot_html(text: str) -> str:
    return html.escape(text, quote=True)


def _dot_quoted(text: str) -> str:
    """A DOT quoted string whose escString reading (``\\N``, ``\\n``, …) is the text itself."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _dot_attrs(attrs: Mapping[str, str]) -> str:
    return ", ".join(f"{name}={value}" for name, value in attrs.items())


def _dot_node(node: GraphNode) -> str:
    short, event_type, *more = (_dot_html(line) for line in _node_lines(node))
    label = f"<B>{short}</B><BR/>{event_type}"
    attrs = {"tooltip": _dot_quoted(_tooltip(node))}
    if node.reason is not None:
        colour = REASON_COLOURS[node.reason]
        label += f'<BR/><FONT COLOR="{colour}"><B>{more[0]}</B></FONT>'
        attrs.update(style='"rounded"', color=f'"{colour}"', penwidth="2")
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
    return f'"{node.event_id}" [label=<{label}>, {_dot_attrs(attrs)}];'


def to_dot(graph: LogGraph) -> str:
    """The picture as Graphviz DOT text (``dot -Tsvg`` draws it), one statement per line."""
    out = [
        "digraph pith_merge_log {",
        f'  graph [rankdir=LR, newrank=true, fontname="Helvetica", fontsize=12, labelloc=t, '
        f"labeljust=l, nodesep=0.25, ranksep=0.35, label=<<B>{_dot_html(_title(graph))}</B><BR/>"
        f'<FONT POINT-SIZE="9">filled: applied; struck: superseded; outlined: invalid, coloured by '
        f"reason; red box: fork; dashed: missing prev</FONT>>];",
        f'  node [shape=box, fontname="Helvetica", fontsize=10, fontcolor="{_TEXT}"];',
        '  edge [color="#495057", arrowsize=0.7, fontname="Helvetica"];',
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
                    f'fontcolor="{_FORK_LINE}"; penwidth=2;',
                ]
                members = [node for node in reversed(graph.nodes) if node.fork == fork_index]
                out += [f"      {_dot_node(node)}" for node in members]
                out.append("    }")
        out += [
            f"    {_dot_node(node)}"
            for node in reversed(graph.nodes)
            if node.lane == index and node.fork is None
        ]
        out.append("  }")
    for ghost in graph.ghosts:
        out.append(
            f'  "{ghost}" [label=<missing<BR/>{_short(ghost)}>, style="rounded,dashed", '
            f'color="{_GHOST}", fontcolor="{_GHOST}", tooltip="{ghost} (no admitted event)"];'
        )
    for edge in graph.edges:
        if edge.kind == "prev":
            attrs = ""
        elif edge.kind == "missing_prev":
            attrs = f' [style=dashed, color="{_GHOST}"]'
        else:
            attrs = (
                f' [style=dotted, color="{_MUTED}", fontcolor="{_MUTED}", fontsize=8, '
                f'label="supersedes", constraint=false]'
            )
        out.append(f'  "{edge.tail}" -> "{edge.head}"{attrs};')
    out.append("}")
    return "\n".join(out) + "\n"


# --- Mermaid --------------------------------------------------------------------------------

_MERMAID_SAFE: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _.,:/-")


def _mermaid_text(text: str) -> str:
    """Text for a quoted Mermaid label: every character that could mean markup as ``#code;``."""
    return "".join(char if char in _MERMAID_SAFE else f"#{ord(char)};" for char in text)


def _mermaid_id(event_id: str, ghost: bool = False) -> str:
    # The full hex: a short prefix can be made to collide, and ids must be unique.
    return ("g" if ghost else "e") + event_id.removeprefix("sha256:")


def _mermaid_class(node: GraphNode) -> str:
    return node.fate if node.reason is None else f"invalid_{node.reason}"


def to_mermaid(graph: LogGraph) -> str:
    """The picture as a Mermaid flowchart (for a Markdown ```` ```mermaid ```` block)."""
    out = [
        "---",
        f"title: {msgspec.json.encode(_title(graph)).decode('utf-8')}",
        "---",
        "flowchart LR",
    ]

    def node_line(node: GraphNode, indent: str) -> str:
        label = "<br/>".join(_mermaid_text(line) for line in _node_lines(node))
        return f'{indent}{_mermaid_id(node.event_id)}["{label}"]'

    for index, lane in enumerate(graph.lanes):
        out += [f'  subgraph lane{index}["{_mermaid_text(lane.label)}"]', "    direction LR"]
        for fork_index, fork in enumerate(graph.forks):
            if fork.lane == index:
                out.append(f'    subgraph fork{fork_index}["fork: equivocation"]')
                out += [node_line(node, "      ") for node in graph.nodes if node.fork == fork_index]
                out.append("    end")
        out += [node_line(node, "    ") for node in graph.nodes if node.lane == index and node.fork is None]
        out.append("  end")
    for ghost in graph.ghosts:
        out.append(f'  {_mermaid_id(ghost, ghost=True)}["missing<br/>{_short(ghost)}"]')
    for edge in graph.edges:
        if edge.kind == "prev":
            out.append(f"  {_mermaid_id(edge.tail)} --> {_mermaid_id(edge.head)}")
        elif edge.kind == "missing_prev":
            out.append(f"  {_mermaid_id(edge.tail, ghost=True)} -.-> {_mermaid_id(edge.head)}")
        else:
            out.append(f"  {_mermaid_id(edge.tail)} -. supersedes .-> {_mermaid_id(edge.head)}")

    styles = {
        "applied": f"fill:{_APPLIED_FILL},stroke:{_APPLIED_LINE},color:{_TEXT}",
        "superseded": (
            f"fill:{_SUPERSEDED_FILL},stroke:{_SUPERSEDED_LINE},color:{_MUTED},text-decoration:line-through"
        ),
    }
    for reason in sorted({node.reason for node in graph.nodes if node.reason is not None}):
        colour = REASON_COLOURS[reason]
        styles[f"invalid_{reason}"] = f"fill:#ffffff,stroke:{colour},stroke-width:2px,color:{colour}"
    members: dict[str, list[str]] = {}
    for node in graph.nodes:
        members.setdefault(_mermaid_class(node), []).append(_mermaid_id(node.event_id))
    for name, style in styles.items():
        if name in members:
            out.append(f"  classDef {name} {style}")
            out.append(f"  class {','.join(members[name])} {name}")
    if graph.ghosts:
        out.append(f"  classDef ghost fill:#ffffff,stroke:{_GHOST},stroke-dasharray:5 5,color:{_GHOST}")
        out.append(f"  class {','.join(_mermaid_id(g, ghost=True) for g in graph.ghosts)} ghost")
    for fork_index in range(len(graph.forks)):
        out.append(f"  style fork{fork_index} fill:none,stroke:{_FORK_LINE},stroke-width:2px")
    return "\n".join(out) + "\n"
