"""A picture of a subject's log: the ``prev_event`` DAG as Graphviz DOT or Mermaid text.

:func:`log_graph` describes the picture from what the fold decided (:class:`merge.FoldResult`:
who applied, who was superseded and by whom, each invalid event's reason, the forks, the
rejected inputs) and what each admitted event says about itself (type, chain, ``created_at``,
``prev_event``; see :func:`event_values`). :func:`to_dot` and :func:`to_mermaid` draw that
description:

- one lane per chain (§7: ``(target, signer.key_id)``, the record chain for ``record_created``);
- applied events filled; superseded ones (applied, then removed from ``current``, §7) filled
  pale with their label struck through, and a dotted ``supersedes`` arrow from who removed them
  (one arrow, ``superseded by``, when that is the event's own child);
- invalid events outlined in the colour of their rule (:data:`REASON_COLOURS`, §6, §7) and
  labelled with their reason code;
- forks (``equivocations``, §7) boxed in vermillion;
- the ``prev_event`` ids that name no admitted event: one dashed ghost node per lane.

So that a real log stays readable, a linear run of applied events of one chain is one stacked
node ("412 applied events, 2026-07-05 … 2026-07-09"); forks, invalid events and their neighbours
stay expanded. ``around`` draws the neighbourhood of one event instead, every event expanded.
When the picture would have more than ``max_nodes`` nodes, it collapses harder (invalid events of
one chain and reason become one node; only forks and the events they branch from stay apart),
and if that is not enough it leaves out whole chains, forks' chains last. The title counts the
events and the rejected inputs (§5) and says what was left out; the key explains every mark the
picture uses, in the colour-blind-safe Okabe–Ito palette (:data:`OKABE_ITO`).

Pure: no files, no clock, no subprocess (:mod:`merge.graph_render` runs Graphviz). The output is
deterministic: everything is sorted (lanes by chain, events by ``created_at``, apply order, then
``event_id``), so the same state gives the same bytes, whatever the order or repeats of the inputs.
"""

from __future__ import annotations

import html
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Literal, NamedTuple

import msgspec

from .admission import Admitted, RejectCode, Rejection, admit
from .errors import InputError
from .identifiers import EVENT_ID_PATTERN
from .inspection import resolve_event_id
from .reasons import Reason
from .state import FoldResult
from .timestamps import parse_timestamp

__all__ = [
    "DEFAULT_DEPTH",
    "DEFAULT_MAX_NODES",
    "OKABE_ITO",
    "REASON_COLOURS",
    "Collapse",
    "EdgeKind",
    "EventGroup",
    "Fate",
    "ForkBox",
    "GhostGroup",
    "GraphEdge",
    "GraphNode",
    "Lane",
    "LogGraph",
    "Summary",
    "event_values",
    "log_graph",
    "to_dot",
    "to_mermaid",
]

#: What became of an admitted event: applied and in ``current``, applied then superseded, invalid.
Fate = Literal["applied", "superseded", "invalid"]
#: What an arrow says (see :class:`GraphEdge`).
EdgeKind = Literal["prev", "missing_prev", "supersedes", "prev_supersedes"]
#: How hard the picture collapses: ``none`` (every event its own node, only with ``around``),
#: ``runs`` (runs of applied events away from invalid events and forks), ``groups`` (also the
#: invalid events of one chain and reason; only forks and what they branch from stay apart).
Collapse = Literal["none", "runs", "groups"]

#: The most nodes :func:`log_graph` draws unless told otherwise: a 4,000-event log fits in it.
DEFAULT_MAX_NODES: Final = 100
#: How many links out from the ``around`` event :func:`log_graph` goes unless told otherwise.
DEFAULT_DEPTH: Final = 2

#: The Okabe–Ito palette (Okabe & Ito, *Color Universal Design*, 2008): eight colours told apart
#: with every common colour-vision deficiency. Every mark of the picture is one of these, or a
#: tint of one (the fills).
OKABE_ITO: Final[Mapping[str, str]] = {
    "black": "#000000",
    "orange": "#e69f00",
    "sky_blue": "#56b4e9",
    "bluish_green": "#009e73",
    "yellow": "#f0e442",
    "blue": "#0072b2",
    "vermillion": "#d55e00",
    "reddish_purple": "#cc79a7",
}


class _Family(NamedTuple):
    """Reasons drawn in one colour: those of one group of rules (the key names the rule)."""

    name: str
    colour: str
    rule: str
    reasons: tuple[Reason, ...]


# Six families, six hues: a picture can tell the rule apart at a glance, the label gives the code.
# missing_prev (orange) and the other §7 order rules (blue) differ in hue and in lightness.
_FAMILIES: Final = (
    _Family(
        "identity",
        OKABE_ITO["black"],
        "§6 checks 1–5: encoding and identity",
        (
            Reason.NON_CANONICAL_JSON,
            Reason.UNSUPPORTED_SCHEMA_VERSION,
            Reason.MALFORMED,
            Reason.EVENT_ID_MISMATCH,
            Reason.CONTENT_HASH_MISMATCH,
        ),
    ),
    _Family(
        "content",
        OKABE_ITO["sky_blue"],
        "§6 checks 6–8, 14–16: subject, type, target, payload",
        (
            Reason.WRONG_SUBJECT,
            Reason.UNKNOWN_EVENT_TYPE,
            Reason.TARGET_MISMATCH,
            Reason.RECORD_NOT_GENESIS,
            Reason.BAD_PAYLOAD,
            Reason.BAD_RECEIPT,
        ),
    ),
    _Family(
        "signature",
        OKABE_ITO["reddish_purple"],
        "§6 checks 9–13: keys and signatures",
        (
            Reason.UNKNOWN_KEY,
            Reason.KEY_MISMATCH,
            Reason.UNSUPPORTED_SIGNATURE,
            Reason.BAD_SIGNATURE,
            Reason.KEY_EXPIRED,
        ),
    ),
    _Family(
        "missing", OKABE_ITO["orange"], "§7: its prev_event names no admitted event", (Reason.MISSING_PREV,)
    ),
    _Family(
        "order",
        OKABE_ITO["blue"],
        "§7: its prev is not applied, of another chain, or later",
        (Reason.INVALID_PREV, Reason.PREV_WRONG_CHAIN, Reason.CREATED_BEFORE_PREV),
    ),
    _Family("fork", OKABE_ITO["vermillion"], "§7: a fork (equivocation)", (Reason.EQUIVOCATION,)),
)
_FAMILY_OF: Final = {reason: family for family in _FAMILIES for reason in family.reasons}
# A family's mark in the key (see _marks).
_FAMILY_MARKS: Final = {f"invalid:{family.name}": family for family in _FAMILIES}

#: The colour of each reason code: the Okabe–Ito colour of its family of rules (see the key of a
#: picture): black §6 encoding and identity, sky blue subject, type, target and payload, reddish
#: purple keys and signatures, orange ``missing_prev``, blue the other §7 order rules, vermillion
#: ``equivocation`` (the colour of the fork boxes).
REASON_COLOURS: Final[Mapping[Reason, str]] = {reason: _FAMILY_OF[reason].colour for reason in Reason}

_APPLIED_FILL: Final = "#a6ddce"  # bluish green, 35 % on white
_APPLIED_LINE: Final = OKABE_ITO["bluish_green"]
_SUPERSEDED_FILL: Final = "#d9f0ea"  # bluish green, 15 % on white
_SUPERSEDED_LINE: Final = "#80cfb9"  # bluish green, 50 % on white
_GHOST_LINE: Final = OKABE_ITO["orange"]
_FORK_LINE: Final = OKABE_ITO["vermillion"]
_MUTED: Final = "#5f6368"
_LANE_LINE: Final = "#c8ccd0"
_EDGE: Final = "#3c4043"
_TEXT: Final = "#202124"

# Hex digits of an event id shown in a label (the full id is the node's name and tooltip).
_SHORT_HEX: Final = 12
#: Longest untrusted text (an event type, a target, a key id) shown in a label.
_MAX_TEXT: Final = 32
_MAX_SUBJECT: Final = 80
# The shortest run of applied events drawn as one node: a run of two saves a single node.
_MIN_RUN: Final = {"runs": 3, "groups": 2}


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


class GraphNode(msgspec.Struct, frozen=True, tag="event"):
    """One admitted event, drawn as its own node: where it is drawn and what became of it.

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

    @property
    def name(self) -> str:
        """The node's name in the picture (edges name it): the event id."""
        return self.event_id


class EventGroup(msgspec.Struct, frozen=True, tag="group"):
    """Several events of one lane drawn as one node.

    ``fate`` ``"applied"``: a linear run of applied events (``superseded`` of them were removed
    from ``current`` later); ``"invalid"``: invalid events of one ``reason``. ``event_ids`` are in
    drawing order; ``first_created_at`` and ``last_created_at`` are the first's and the last's.
    """

    name: str
    lane: int
    fate: Literal["applied", "invalid"]
    reason: Reason | None
    event_ids: tuple[str, ...]
    superseded: int
    first_created_at: str | None
    last_created_at: str | None


class GhostGroup(msgspec.Struct, frozen=True):
    """The ``prev_event`` ids that name no admitted event, as named by the events of one lane.

    ``prev_events`` are sorted; ``events`` is how many drawn events name one of them.
    """

    name: str
    lane: int
    prev_events: tuple[str, ...]
    events: int


class GraphEdge(msgspec.Struct, frozen=True):
    """An arrow from the node named ``tail`` to the node named ``head``.

    ``prev``: (an event of) ``tail`` is the ``prev_event`` of (an event of) ``head``;
    ``missing_prev``: ``tail`` is a :class:`GhostGroup`; ``supersedes``: applied ``tail`` removed
    applied ``head`` from ``current`` (§7, as the fold found it); ``prev_supersedes``: both at
    once the other way round, ``tail`` is the prev of ``head`` and ``head`` removed ``tail``
    (drawn as one arrow, ``superseded by``).
    """

    tail: str
    head: str
    kind: EdgeKind


class ForkBox(msgspec.Struct, frozen=True):
    """One entry of ``equivocations`` (§7): the lane, the shared ``prev_event``, the sorted ids."""

    lane: int
    prev_event: str | None
    event_ids: tuple[str, ...]


class Summary(msgspec.Struct, frozen=True):
    """What the whole log holds, and what the picture of it folds or leaves out (its title).

    The counts are of the whole log: ``applied`` are in ``current``, ``superseded`` applied and
    removed; ``missing_prevs`` the distinct ``prev_event`` ids that name no admitted event;
    ``rejected`` the inputs not admitted (§5) by code, most first. ``collapse``, ``max_nodes``,
    ``around`` (the full event id) and ``depth`` say how the picture was drawn; ``drawn_events``
    are the events it shows (one by one or in groups); ``lanes_left_out``, ``events_left_out``
    and ``forks_left_out`` what it leaves out to stay within ``max_nodes``.
    """

    events: int
    applied: int
    superseded: int
    invalid: int
    forks: int
    missing_prevs: int
    rejected: tuple[tuple[RejectCode, int], ...]
    collapse: Collapse
    max_nodes: int | None
    around: str | None
    depth: int | None
    drawn_events: int
    lanes_left_out: int
    events_left_out: int
    forks_left_out: int


class LogGraph(msgspec.Struct, frozen=True):
    """The picture of one subject's log, sorted, ready to draw (:func:`to_dot`, :func:`to_mermaid`).

    ``lanes`` are the drawn lanes; ``nodes`` are events and groups of events in drawing order (by
    lane, then ``created_at``, apply order, ``event_id`` of the first); ``ghosts`` one per lane
    whose events name missing prevs; ``edges`` join the nodes' names (:attr:`GraphNode.name`,
    :attr:`EventGroup.name`, :attr:`GhostGroup.name`).
    """

    subject: str
    lanes: tuple[Lane, ...]
    nodes: tuple[GraphNode | EventGroup, ...]
    ghosts: tuple[GhostGroup, ...]
    edges: tuple[GraphEdge, ...]
    forks: tuple[ForkBox, ...]
    summary: Summary


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


class _Log(NamedTuple):
    """The whole log before drawing: every event a node, every link an edge between events
    (``missing_prev`` links have the missing id as their tail)."""

    lanes: list[Lane]
    nodes: list[GraphNode]
    links: list[GraphEdge]
    forks: list[ForkBox]


def log_graph(
    result: FoldResult,
    events: Mapping[str, Mapping[str, Any]],
    *,
    around: str | None = None,
    depth: int = DEFAULT_DEPTH,
    max_nodes: int | None = DEFAULT_MAX_NODES,
) -> LogGraph:
    """Describe the picture of the fold ``result`` of the admitted ``events`` (:func:`event_values`).

    ``around`` (an event id, or a unique prefix of one) draws only the events at most ``depth``
    links away from it (``prev_event`` and ``supersedes``, either way; a fork whole), each one
    expanded while they fit. ``max_nodes`` bounds the nodes (events, groups, ghosts) of the
    picture (``None``: no bound): it collapses harder, then leaves out chains, to stay within it.

    Raises :class:`merge.InputError` when ``events`` are not exactly the result's events, when
    the result does not say who superseded whom (one served from a store checkpoint), when
    ``around`` names no event or several, or when ``depth`` or ``max_nodes`` is below 0 or 1.
    """
    if depth < 0:
        raise InputError(f"the depth must be 0 or more, not {depth}")
    if max_nodes is not None and max_nodes < 1:
        raise InputError(f"the most nodes to draw must be 1 or more, not {max_nodes}")
    log = _describe(result, events)
    focus = None if around is None else resolve_event_id(around, events)
    scope = set(events) if focus is None else _neighbourhood(log, focus, depth)
    chosen = scope
    levels: tuple[Collapse, ...] = ("none", "runs", "groups") if focus is not None else ("runs", "groups")
    for level in levels:
        drawn = _draw(log, chosen, level, focus)
        if max_nodes is None or _size(drawn) <= max_nodes:
            break
    else:
        assert max_nodes is not None  # without a bound, the first level fits
        chosen = _fit(drawn, chosen, focus, max_nodes)
        drawn = _draw(log, chosen, level, focus)

    fates = Counter(node.fate for node in log.nodes)
    rejected = Counter(item.code for item in result.rejected)
    summary = Summary(
        events=len(events),
        applied=fates["applied"],
        superseded=fates["superseded"],
        invalid=fates["invalid"],
        forks=len(log.forks),
        missing_prevs=len({link.tail for link in log.links if link.kind == "missing_prev"}),
        rejected=tuple(sorted(rejected.items(), key=lambda item: (-item[1], item[0]))),
        collapse=level,
        max_nodes=max_nodes,
        around=focus,
        depth=None if focus is None else depth,
        drawn_events=len(chosen),
        lanes_left_out=len({node.lane for node in log.nodes if node.event_id in scope}) - len(drawn.lanes),
        events_left_out=len(scope) - len(chosen),
        forks_left_out=sum(fork.event_ids[0] in scope for fork in log.forks) - len(drawn.forks),
    )
    return LogGraph(result.state.pith_number, *drawn, summary)


def _describe(result: FoldResult, events: Mapping[str, Mapping[str, Any]]) -> _Log:
    """Every admitted event as a node, in drawing order, and every link between them."""
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
    links = [
        GraphEdge(node.prev_event, node.event_id, "prev" if node.prev_event in events else "missing_prev")
        for node in nodes
        if node.prev_event is not None
    ]
    links += [
        GraphEdge(by, event_id, "supersedes") for event_id, removers in removed_by.items() for by in removers
    ]
    return _Log(lanes, nodes, links, forks)


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


# --- what is drawn: the neighbourhood, the groups, the bound --------------------------------


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


class _Drawn(NamedTuple):
    lanes: tuple[Lane, ...]
    nodes: tuple[GraphNode | EventGroup, ...]
    ghosts: tuple[GhostGroup, ...]
    edges: tuple[GraphEdge, ...]
    forks: tuple[ForkBox, ...]


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


# --- text of labels -------------------------------------------------------------------------


def _shown(text: str | None, limit: int = _MAX_TEXT) -> str:
    """Untrusted text as a label shows it: at most ``limit`` printable characters."""
    if text is None:
        return "?"
    clean = "".join(char if char.isprintable() else "\ufffd" for char in text)
    return clean if len(clean) <= limit else clean[: limit - 1] + "\u2026"


def _short(event_id: str) -> str:
    return event_id.removeprefix("sha256:")[:_SHORT_HEX]


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}{'s' * (count != 1)}"


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


# --- the key: one entry per mark the picture uses -------------------------------------------

# The marks of a picture, in the key's order; ``invalid:NAME`` is a family of reasons.
_MARKS: Final = (
    *("lane", "applied", "superseded", "run", "focus"),
    *_FAMILY_MARKS,
    *("group", "fork", "ghost", "prev", "prev_supersedes", "missing_prev", "supersedes"),
)


def _marks(graph: LogGraph) -> list[str]:
    """The marks ``graph`` uses (lanes, fates, families of reasons, groups, forks, ghosts, arrow kinds)."""
    used: set[str] = {"lane"} if graph.lanes else set()
    for node in graph.nodes:
        if node.reason is not None:  # an invalid event is drawn in the mark of its family
            used.add(f"invalid:{_FAMILY_OF[node.reason].name}")
        if isinstance(node, EventGroup):
            used.add("run" if node.fate == "applied" else "group")
        elif node.fate != "invalid":
            used.add(node.fate)
    used |= {"focus"} if any(graph.summary.around == node.name for node in graph.nodes) else set()
    used |= {"fork"} if graph.forks else set()
    used |= {"ghost"} if graph.ghosts else set()
    used |= {edge.kind for edge in graph.edges}
    return [mark for mark in _MARKS if mark in used]


def _codes_used(graph: LogGraph, family: _Family) -> list[str]:
    used = {node.reason for node in graph.nodes if node.reason is not None}
    return [str(reason) for reason in family.reasons if reason in used]


def _key_text(graph: LogGraph, mark: str) -> str:
    """What a mark means, in the key."""
    if mark.startswith("invalid:"):
        family = _FAMILY_MARKS[mark]
        return f"invalid, {family.rule}: {', '.join(_codes_used(graph, family))}"
    return {
        "lane": "a chain (§7): target / signer key id; the record chain first",
        "applied": "applied: in current (§7)",
        "superseded": "applied, then superseded: no longer in current (§7)",
        "run": "a run of applied events of one chain, drawn as one",
        "focus": "the event the picture is around",
        "group": "invalid events of one chain and reason, drawn as one",
        "fork": "a fork: events of one chain with the same prev_event (equivocation, §7)",
        "ghost": "missing prevs: prev_event ids that no admitted event has (one node per chain)",
        "prev": "from an event's prev_event to the event",
        "prev_supersedes": "from an event's prev_event to the event, which superseded it (§7)",
        "missing_prev": "from a missing prev to the event that names it",
        "supersedes": "from an event to one it superseded (§7)",
    }[mark]


# --- DOT ------------------------------------------------------------------------------------


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


# --- Mermaid --------------------------------------------------------------------------------

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
