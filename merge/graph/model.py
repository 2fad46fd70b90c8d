"""The picture of a log as typed values (:class:`LogGraph` and its parts), what the renderers draw."""

from __future__ import annotations

from typing import Final, Literal, NamedTuple

import msgspec

from ..admission import RejectCode
from ..reasons import Reason
from .text import _shown

#: What became of an admitted event: applied and in ``current``, applied then superseded, invalid.
Fate = Literal["applied", "superseded", "invalid"]
#: What an arrow says (see :class:`GraphEdge`).
EdgeKind = Literal["prev", "missing_prev", "supersedes", "prev_supersedes"]
#: How hard the picture collapses: ``none`` (every event its own node, only with ``around``),
#: ``runs`` (runs of applied events away from invalid events and forks), ``groups`` (also the
#: invalid events of one chain and reason; only forks and what they branch from stay apart).
Collapse = Literal["none", "runs", "groups"]

#: The most nodes :func:`merge.graph.log_graph` draws unless told otherwise: a 4,000-event log fits in it.
DEFAULT_MAX_NODES: Final = 100
#: How many links out from the ``around`` event :func:`merge.graph.log_graph` goes unless told otherwise.
DEFAULT_DEPTH: Final = 2


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
    """The picture of one subject's log, sorted, ready to draw (:func:`merge.graph.to_dot`,
    :func:`merge.graph.to_mermaid`).

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


class _Log(NamedTuple):
    """The whole log before drawing: every event a node, every link an edge between events
    (``missing_prev`` links have the missing id as their tail)."""

    lanes: list[Lane]
    nodes: list[GraphNode]
    links: list[GraphEdge]
    forks: list[ForkBox]


class _Drawn(NamedTuple):
    lanes: tuple[Lane, ...]
    nodes: tuple[GraphNode | EventGroup, ...]
    ghosts: tuple[GhostGroup, ...]
    edges: tuple[GraphEdge, ...]
    forks: tuple[ForkBox, ...]
