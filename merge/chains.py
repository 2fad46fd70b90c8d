"""Chains, forks and apply order (spec §7), as a pure function over a small graph.

:func:`classify` sees only what §7 needs of each valid event (id, prev, chain, instant), so
it can be tested on synthetic graphs, cycles included, without signing anything.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import NamedTuple

from .checks import ValidEvent
from .reasons import Reason

__all__ = ["Classification", "Fork", "Node", "classify", "may_supersede", "supersessions"]

ChainKey = tuple[str, str | None]


class Node(NamedTuple):
    """A valid event as §7 sees it."""

    event_id: str
    prev_event: str | None
    chain: ChainKey
    created_us: int


class Fork(NamedTuple):
    """One entry of ``equivocations``: the chain, the shared ``prev_event`` and the sorted ids."""

    chain: ChainKey
    prev_event: str | None
    event_ids: tuple[str, ...]


class Classification(NamedTuple):
    """The verdict of §7 on the valid events."""

    #: Applied event ids in apply order: (created_at instant, depth, event_id).
    applied: list[str]
    #: Depth in its chain of every applied event (root 0).
    depth: dict[str, int]
    #: Reason of every valid event that did not apply.
    reasons: dict[str, Reason]
    #: Forks in the order found; the state sorts them by canonical JSON (§9).
    forks: list[Fork]


def classify(nodes: Mapping[str, Node], admitted: Collection[str]) -> Classification:
    """Classify the events that passed §6 (``nodes``), top-down from the roots (§7).

    ``admitted`` holds every admitted ``event_id``, valid or not. Terminates on any graph,
    ``prev_event`` cycles included (their events are ``missing_prev``).
    """
    children: dict[str | None, list[Node]] = defaultdict(list)
    reasons: dict[str, Reason] = {}
    depth: dict[str, int] = {}
    forks: list[Fork] = []
    not_applied: list[str] = []

    for node in nodes.values():
        prev = node.prev_event
        if prev is None or prev in nodes:
            children[prev].append(node)
        elif prev in admitted:
            reasons[node.event_id] = Reason.INVALID_PREV  # its prev failed §6
            not_applied.append(node.event_id)
        else:
            reasons[node.event_id] = Reason.MISSING_PREV
            not_applied.append(node.event_id)

    # (created_at instant, depth, event_id) of every applied event: sorted, the apply order.
    order: list[tuple[int, int, str]] = []
    queue: list[tuple[Node, int]] = []  # applied events whose children are still to be seen

    def settle(group: list[Node], prev: str | None, level: int) -> None:
        # One (chain, prev_event) group of eligible events: alone it applies, else a fork.
        if len(group) == 1:
            node = group[0]
            depth[node.event_id] = level
            order.append((node.created_us, level, node.event_id))
            queue.append((node, level))
            return
        ids = tuple(sorted(node.event_id for node in group))
        forks.append(Fork(group[0].chain, prev, ids))
        for event_id in ids:
            reasons[event_id] = Reason.EQUIVOCATION
            not_applied.append(event_id)

    for group in _group_by(children.get(None, ()), lambda node: node.chain).values():
        settle(group, None, 0)
    while queue:
        parent, level = queue.pop()
        kids = children.get(parent.event_id)
        if kids is None:
            continue
        eligible: list[Node] = []
        for child in kids:
            if child.chain != parent.chain:
                reasons[child.event_id] = Reason.PREV_WRONG_CHAIN
                not_applied.append(child.event_id)
            elif child.created_us < parent.created_us:
                reasons[child.event_id] = Reason.CREATED_BEFORE_PREV
                not_applied.append(child.event_id)
            else:
                eligible.append(child)
        if eligible:
            settle(eligible, parent.event_id, level + 1)

    # Every descendant of an event that did not apply gets invalid_prev.
    _mark_descendants(not_applied, children, reasons)

    # What is left was reached from no root: a prev_event cycle (impossible without a SHA-256
    # collision) and whatever hangs off one. Cycle members are missing_prev, the rest invalid_prev.
    left = [event_id for event_id in nodes if event_id not in reasons and event_id not in depth]
    if left:
        on_cycle = _cycle_members(left, nodes)
        for event_id in on_cycle:
            reasons[event_id] = Reason.MISSING_PREV
        _mark_descendants(sorted(on_cycle), children, reasons)

    order.sort()
    applied = [event_id for _, _, event_id in order]
    return Classification(applied, depth, reasons, forks)


def _group_by(nodes: Iterable[Node], key: Callable[[Node], ChainKey]) -> dict[ChainKey, list[Node]]:
    groups: dict[ChainKey, list[Node]] = defaultdict(list)
    for node in nodes:
        groups[key(node)].append(node)
    return groups


def _mark_descendants(
    starts: Iterable[str], children: Mapping[str | None, list[Node]], reasons: dict[str, Reason]
) -> None:
    stack = list(starts)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child.event_id not in reasons:
                reasons[child.event_id] = Reason.INVALID_PREV
                stack.append(child.event_id)


def _cycle_members(left: list[str], nodes: Mapping[str, Node]) -> set[str]:
    # Within `left` every node's prev is also in `left` (else it would have been classified),
    # so following prev pointers from any node must enter a cycle: a functional graph walk.
    members: set[str] = set()
    done: set[str] = set()
    for start in left:
        path: dict[str, int] = {}
        current: str | None = start
        while current is not None and current not in done and current not in path:
            path[current] = len(path)
            current = nodes[current].prev_event
        if current is not None and current in path:
            order = list(path)
            members.update(order[path[current] :])
        done.update(path)
    return members


def supersessions(applied: Sequence[str], valid: Mapping[str, ValidEvent]) -> dict[str, tuple[str, ...]]:
    """The supersedes rule of §7: each applied event removed from ``current``, and by whom.

    ``applied``: the applied event ids in apply order; ``valid``: their :class:`ValidEvent`.
    Returns ``removed id → ids of the applied events that remove it`` (in apply order).
    Entries of ``supersedes`` that meet none of the rule are ignored, as §7 says; the
    removed events stay applied.
    """
    applied_set = set(applied)
    removed: dict[str, list[str]] = {}
    for event_id in applied:
        event = valid[event_id]
        for target_id in event.supersedes:
            if target_id in applied_set and target_id != event_id and may_supersede(event, valid[target_id]):
                removed.setdefault(target_id, []).append(event_id)
    return {target_id: tuple(by) for target_id, by in removed.items()}


def may_supersede(event: ValidEvent, target: ValidEvent) -> bool:
    """§7: same signer (whole object), and the same type or a correction of a non-record."""
    if target.signer != event.signer:
        return False
    if target.event_type == event.event_type:
        return True
    return event.event_type == "correction" and target.event_type != "record_created"
