"""Chains, forks and apply order (spec §7): every rule of the section, in one place.

:func:`classify` decides a whole graph at once (the fold); :class:`ChainIndex` keeps the same
decision up to date as events arrive (the incremental :class:`merge.Merger`). Both take what a
valid event's ``prev_event`` makes of it from :func:`child_reason`, and :func:`supersessions`
applies the supersedes rule. They see only what §7 needs of each valid event (id, prev,
chain, instant), so they can be tested on synthetic graphs, cycles included, without signing
anything.
"""

from __future__ import annotations

import itertools
from bisect import bisect_left, insort
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from operator import itemgetter
from typing import Final, NamedTuple, Protocol

from ._compat import OldMethodName
from .checks import ValidEvent
from .reasons import Reason

__all__ = [
    "ChainIndex",
    "Classification",
    "Fork",
    "Node",
    "SortedKeys",
    "Superseding",
    "child_reason",
    "classify",
    "may_supersede",
    "supersessions",
]

ChainKey = tuple[str, str | None]  # (target, key_id): the record chain has key_id None
Status = int | Reason  # an applied event's depth in its chain, or why a valid event did not apply
SortKey = tuple[int, int, str]  # (created_at instant, depth, event_id): the §7 apply order
_EVENT_ID: Final = itemgetter(2)  # a SortKey's event_id


class Node(NamedTuple):
    """A valid event as §7 sees it."""

    event_id: str
    prev_event: str | None
    chain: ChainKey
    created_us: int

    @classmethod
    def of(cls, event: ValidEvent) -> Node:
        """What §7 sees of a valid event."""
        return cls(event.event_id, event.prev_event, event.chain, event.created_us)


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


def child_reason(
    child: Node, prev: Node | None, *, prev_admitted: bool, prev_applied: bool, on_cycle: bool = False
) -> Reason | None:
    """What its ``prev_event`` makes of a valid event (§7): a reason, or ``None`` when eligible.

    ``prev``: the prev's :class:`Node` when it is valid, else ``None``; ``prev_admitted``: an
    event of that id was admitted (valid or not); ``prev_applied``: the prev applied;
    ``on_cycle``: following ``prev_event`` from the child leads back to it. An eligible event
    applies alone in its (chain, prev) group and is a fork otherwise. A root (no
    ``prev_event``) is always eligible and never asked.
    """
    if on_cycle:
        # §7 Decision (docs/merge-v1.md, Cycles): no root leads to an event on a prev cycle, so
        # it is missing_prev; an event hanging below one has a valid prev that did not apply,
        # and the rule below makes it invalid_prev.
        return Reason.MISSING_PREV
    if prev is None:
        # Not valid: it failed §6 (invalid_prev), or no event of that id was admitted.
        return Reason.INVALID_PREV if prev_admitted else Reason.MISSING_PREV
    if not prev_applied:
        return Reason.INVALID_PREV
    if child.chain != prev.chain:
        return Reason.PREV_WRONG_CHAIN
    if child.created_us < prev.created_us:
        return Reason.CREATED_BEFORE_PREV
    return None


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
        else:
            reason = child_reason(node, None, prev_admitted=prev in admitted, prev_applied=False)
            assert reason is not None
            reasons[node.event_id] = reason
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
            reason = child_reason(child, parent, prev_admitted=True, prev_applied=True)
            if reason is None:
                eligible.append(child)
            else:
                reasons[child.event_id] = reason
                not_applied.append(child.event_id)
        if eligible:
            settle(eligible, parent.event_id, level + 1)

    # Every descendant of an event that did not apply gets invalid_prev.
    _mark_descendants(not_applied, nodes, children, reasons)

    # What is left was reached from no root: a prev_event cycle (impossible without a SHA-256
    # collision) and whatever hangs off one; child_reason says what each of them gets.
    left = [event_id for event_id in nodes if event_id not in reasons and event_id not in depth]
    if left:
        on_cycle = _cycle_members(left, nodes)
        for event_id in on_cycle:
            node = nodes[event_id]
            assert node.prev_event is not None  # a member's prev is the next member
            member_prev = nodes[node.prev_event]
            reason = child_reason(node, member_prev, prev_admitted=True, prev_applied=False, on_cycle=True)
            assert reason is not None
            reasons[event_id] = reason
        _mark_descendants(sorted(on_cycle), nodes, children, reasons)

    order.sort()
    applied = [event_id for _, _, event_id in order]
    return Classification(applied, depth, reasons, forks)


def _group_by(nodes: Iterable[Node], key: Callable[[Node], ChainKey]) -> dict[ChainKey, list[Node]]:
    groups: dict[ChainKey, list[Node]] = defaultdict(list)
    for node in nodes:
        groups[key(node)].append(node)
    return groups


def _mark_descendants(
    starts: Iterable[str],
    nodes: Mapping[str, Node],
    children: Mapping[str | None, list[Node]],
    reasons: dict[str, Reason],
) -> None:
    # Below a valid event that did not apply, child_reason gives every descendant its reason.
    stack = list(starts)
    while stack:
        prev_id = stack.pop()
        for child in children.get(prev_id, ()):
            if child.event_id not in reasons:
                reason = child_reason(child, nodes[prev_id], prev_admitted=True, prev_applied=False)
                assert reason is not None
                reasons[child.event_id] = reason
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


class Superseding(Protocol):
    """What the supersedes rule (§7) reads of a valid event: a :class:`merge.checks.ValidEvent`,
    or the incremental engine's own record of one (its signer as canonical bytes: equal
    objects, equal bytes)."""

    @property
    def event_type(self) -> str: ...
    @property
    def supersedes(self) -> tuple[str, ...]: ...
    @property
    def signer(self) -> object: ...


def supersessions(applied: Sequence[str], valid: Mapping[str, Superseding]) -> dict[str, tuple[str, ...]]:
    """The supersedes rule of §7: each applied event removed from ``current``, and by whom.

    ``applied``: the applied event ids in apply order; ``valid``: their :class:`merge.checks.ValidEvent`.
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


def may_supersede(event: Superseding, target: Superseding) -> bool:
    """§7: same signer (whole object), and the same type or a correction of a non-record."""
    if target.signer != event.signer:
        return False
    if target.event_type == event.event_type:
        return True
    return event.event_type == "correction" and target.event_type != "record_created"


class ChainIndex:
    """Spec §7 kept up to date as events arrive; always equal to :func:`classify`.

    :meth:`add` a valid event (§6 passed) as a :class:`Node`, :meth:`add_invalid` the id of an
    event that failed §6; :meth:`classification` then equals ``classify(nodes, admitted)`` (forks in
    a different order: the state sorts them). Each call re-decides only what the new fact can
    change and returns the ids whose status changed.

    The status of a valid event follows from its prev alone, top-down (§7, :func:`child_reason`,
    as for :func:`classify`): a root, or an event whose prev is not valid, is decided at once;
    under an applied prev it is decided within its (chain, prev) group of eligible events, which
    applies alone and is a fork otherwise; under a valid prev that did not apply it is
    ``invalid_prev``. So a change propagates only downwards, and only while the applied set
    changes. Extending a chain costs one dictionary update and one insertion in the apply
    order, O(log n).

    Cycles of ``prev_event`` (impossible without a SHA-256 collision, but §7 says what they give:
    ``missing_prev`` on the cycle, ``invalid_prev`` below it) are detected in near-constant time
    with a disjoint-set forest of the weakly connected components of the prev graph: a node adds
    a cycle exactly when its prev already lies in its own component (whose only sink it is).
    """

    __slots__ = (
        "_children",
        "_components",
        "_dirty",
        "_forked",
        "_groups",
        "_on_cycle",
        "_order",
        "admitted",
        "depth",
        "nodes",
        "reasons",
    )

    def __init__(self) -> None:
        #: The valid events.
        self.nodes: dict[str, Node] = {}
        #: Every admitted event id, valid or not.
        self.admitted: set[str] = set()
        #: Depth in its chain of every applied event (root 0).
        self.depth: dict[str, int] = {}
        #: §7 reason of every valid event that did not apply.
        self.reasons: dict[str, Reason] = {}
        # prev_event → the valid events naming it (whatever the prev is, even unknown).
        self._children: dict[str, list[str]] = {}
        # (prev_event or None, chain) → eligible events of that group, in arrival order.
        self._groups: dict[tuple[str | None, ChainKey], list[str]] = {}
        self._forked: set[tuple[str | None, ChainKey]] = set()
        self._order = SortedKeys()
        self._on_cycle: set[str] = set()
        self._components = _DisjointSets()
        self._dirty: list[str] = []

    def add_invalid(self, event_id: str) -> list[str]:
        """Record an admitted event that failed §6: its children go from missing to invalid prev."""
        if event_id in self.admitted:
            return []
        self.admitted.add(event_id)
        changed: list[str] = []
        self._settle_children(event_id, changed)
        return changed

    def add(self, node: Node) -> list[str]:
        """Add a valid event (new, or admitted before as invalid); return every id whose status changed."""
        event_id = node.event_id
        if event_id in self.nodes:
            return []
        self.nodes[event_id] = node
        self.admitted.add(event_id)
        components = self._components
        components.add(event_id)
        for child in self._children.get(event_id, ()):
            components.union(child, event_id)
        changed: list[str] = []
        prev = node.prev_event
        if prev is None:
            self._join((None, node.chain), event_id, 0, changed)
        else:
            self._children.setdefault(prev, []).append(event_id)
            if prev in self.nodes and components.find(prev) == components.find(event_id):
                self._close_cycle(node, changed)
            else:
                if prev in self.nodes:
                    components.union(event_id, prev)
                self._attach(node, changed)
        # Propagate downwards while the applied set changes (and always below a new event).
        dirty = self._dirty
        while dirty:
            self._settle_children(dirty.pop(), changed)
        return changed

    # Its name until 0.2: merge.admission.admit is another thing, the admission of an input (§5).
    admit = OldMethodName("add_invalid")

    def classification(self) -> Classification:
        """A snapshot equal to ``classify(nodes, admitted)`` (forks in another order)."""
        live = self.live_classification()
        return Classification(live.applied, dict(self.depth), dict(self.reasons), live.forks)

    def live_classification(self) -> Classification:
        """As :meth:`classification`, sharing this index's dictionaries (read them, do not keep them)."""
        applied = list(map(_EVENT_ID, self._order))
        forks = [
            Fork(chain, prev, tuple(sorted(self._groups[(prev, chain)]))) for prev, chain in self._forked
        ]
        return Classification(applied, self.depth, self.reasons, forks)

    # -- internals ------------------------------------------------------------------------

    def _attach(self, node: Node, changed: list[str]) -> None:
        """Decide an event under its prev (not None), as that prev stands now (§7)."""
        prev = node.prev_event
        assert prev is not None
        depth = self.depth.get(prev)
        reason = child_reason(
            node,
            self.nodes.get(prev),
            prev_admitted=prev in self.admitted,
            prev_applied=depth is not None,
            on_cycle=node.event_id in self._on_cycle,
        )
        if reason is None:
            assert depth is not None
            self._join((prev, node.chain), node.event_id, depth + 1, changed)
        else:
            self._set(node.event_id, reason, changed)

    def _join(
        self, group_key: tuple[str | None, ChainKey], event_id: str, depth: int, changed: list[str]
    ) -> None:
        """An eligible event joins its (prev, chain) group: alone it applies, else a fork (§7.4)."""
        group = self._groups.setdefault(group_key, [])
        group.append(event_id)
        if len(group) == 1:
            self._set(event_id, depth, changed)
            return
        if len(group) == 2:  # the late second successor: the first one stops applying
            self._forked.add(group_key)
            self._set(group[0], Reason.EQUIVOCATION, changed)
        self._set(event_id, Reason.EQUIVOCATION, changed)

    def _settle_children(self, parent_id: str, changed: list[str]) -> None:
        """Re-decide every valid event naming ``parent_id`` after the parent's status changed."""
        children = self._children.get(parent_id)
        if not children:
            return
        parent = self.nodes.get(parent_id)
        if parent is not None:  # its children's fork group is decided afresh
            group_key = (parent_id, parent.chain)
            self._groups.pop(group_key, None)
            self._forked.discard(group_key)
        nodes = self.nodes
        for child in children:
            self._attach(nodes[child], changed)

    def _close_cycle(self, node: Node, changed: list[str]) -> None:
        """``node`` closes a prev cycle: its prev descends from it. Its members are re-decided."""
        members = _cycle_members([node.event_id], self.nodes)
        self._on_cycle.update(members)
        # Every member but the new one descends from an event that was not valid: none applied,
        # so their own children keep their status; only the members' reasons change.
        for member in sorted(members):
            self._attach(self.nodes[member], changed)

    def _set(self, event_id: str, status: Status, changed: list[str]) -> None:
        old_depth = self.depth.get(event_id)
        old_reason = self.reasons.get(event_id)
        created = self.nodes[event_id].created_us
        if isinstance(status, Reason):
            if old_reason == status:
                return
            if old_depth is not None:
                del self.depth[event_id]
                self._order.remove((created, old_depth, event_id))
            self.reasons[event_id] = status
            new_depth = None
        else:
            if old_depth == status:
                return
            if old_depth is not None:
                self._order.remove((created, old_depth, event_id))
            self.reasons.pop(event_id, None)
            self.depth[event_id] = status
            self._order.add((created, status, event_id))
            new_depth = status
        changed.append(event_id)
        if new_depth != old_depth or old_reason is None:
            # The children's status follows from whether (and how deep) this one applies; a
            # new event's children may have waited for it (missing_prev until now).
            self._dirty.append(event_id)


class SortedKeys:
    """Apply-order keys kept sorted, in blocks of bounded size (as the ``sortedcontainers`` package).

    ``add``/``remove`` cost a binary search over the block maxima, one within a block of at
    most ``2 * LOAD`` keys, and (every ``LOAD`` insertions into one block) a split: O(log n)
    amortized for any practical n. Iteration is in order.
    """

    LOAD: Final = 256

    __slots__ = ("_blocks", "_len", "_maxes")

    def __init__(self) -> None:
        self._blocks: list[list[SortKey]] = []
        self._maxes: list[SortKey] = []
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[SortKey]:
        return itertools.chain.from_iterable(self._blocks)

    def add(self, key: SortKey) -> None:
        """Insert ``key`` (keys are unique by construction here; a repeat is kept twice)."""
        self._len += 1
        maxes, blocks = self._maxes, self._blocks
        if not blocks:
            blocks.append([key])
            maxes.append(key)
            return
        i = bisect_left(maxes, key)
        if i == len(maxes):  # beyond every key: the common case when events arrive in order
            i -= 1
            block = blocks[i]
            block.append(key)
            maxes[i] = key
        else:
            block = blocks[i]
            insort(block, key)
        if len(block) > 2 * self.LOAD:
            half = self.LOAD
            blocks[i : i + 1] = [block[:half], block[half:]]
            maxes[i : i + 1] = [block[half - 1], block[-1]]

    def remove(self, key: SortKey) -> None:
        """Remove one occurrence of ``key``; ``ValueError`` when absent."""
        maxes, blocks = self._maxes, self._blocks
        i = bisect_left(maxes, key)
        if i == len(maxes):
            raise ValueError(f"{key!r} not in list")
        block = blocks[i]
        j = bisect_left(block, key)
        if j == len(block) or block[j] != key:
            raise ValueError(f"{key!r} not in list")
        del block[j]
        self._len -= 1
        if not block:
            del blocks[i]
            del maxes[i]
        elif j == len(block):
            maxes[i] = block[-1]


class _DisjointSets:
    """Union-find with path halving and union by size: near-constant amortized operations."""

    __slots__ = ("_parent", "_size")

    def __init__(self) -> None:
        self._parent: dict[str, str] = {}
        self._size: dict[str, int] = {}

    def add(self, item: str) -> None:
        self._parent[item] = item
        self._size[item] = 1

    def find(self, item: str) -> str:
        parent = self._parent
        while parent[item] != item:
            parent[item] = parent[parent[item]]
            item = parent[item]
        return item

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        if self._size[ra] < self._size[rb]:
            ra, rb = rb, ra
        self._parent[rb] = ra
        self._size[ra] += self._size.pop(rb)
