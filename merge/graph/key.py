"""The key of a picture: one entry per mark it uses, what each mark means."""

from __future__ import annotations

from typing import Final

from .model import EventGroup, LogGraph
from .palette import _FAMILY_MARKS, _FAMILY_OF, _Family

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
