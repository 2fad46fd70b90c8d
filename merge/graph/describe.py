"""Describing the picture from a fold: every event a node, every link an edge, then what is drawn
and the summary the title shows (:func:`log_graph`); what each event says (:func:`event_values`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from ..admission import Admitted, Rejection, admit
from ..errors import InputError
from ..identifiers import EVENT_ID_PATTERN
from ..inspection import resolve_event_id
from ..state import FoldResult
from ..timestamps import parse_timestamp
from .collapse import _draw, _fit, _neighbourhood, _size
from .model import (
    DEFAULT_DEPTH,
    DEFAULT_MAX_NODES,
    Collapse,
    Fate,
    ForkBox,
    GraphEdge,
    GraphNode,
    Lane,
    LogGraph,
    Summary,
    _Log,
)


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
