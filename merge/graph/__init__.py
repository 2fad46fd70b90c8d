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

The package's rooms: :mod:`.model` the typed picture (:class:`LogGraph` and its parts),
:mod:`.describe` building it from a fold (:func:`log_graph`, :func:`event_values`),
:mod:`.collapse` what is drawn (the neighbourhood, runs and groups, the bound), :mod:`.palette`
the colours, :mod:`.text`, :mod:`.labels` and :mod:`.key` the words, :mod:`.dot` and
:mod:`.mermaid` the renderers. The names with a leading underscore are shared inside the package
only; ``__all__`` here is its public surface.
"""

from .describe import event_values, log_graph
from .dot import to_dot
from .mermaid import to_mermaid
from .model import (
    DEFAULT_DEPTH,
    DEFAULT_MAX_NODES,
    Collapse,
    EdgeKind,
    EventGroup,
    Fate,
    ForkBox,
    GhostGroup,
    GraphEdge,
    GraphNode,
    Lane,
    LogGraph,
    Summary,
)
from .palette import OKABE_ITO, REASON_COLOURS

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
