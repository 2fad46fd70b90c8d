"""The incremental engine: :class:`Merger` takes events one at a time and always knows the state.

After every :meth:`Merger.add`, ``merger.state`` is byte for byte ``fold(everything added so
far).state``, including the retroactive cases of §7 (a late second successor turns an applied
event into an equivocation and withholds its descendants; a late ``prev_event`` makes earlier
orphans applicable; a late valid copy makes an event valid). It gets there without re-folding:

* §5/§6: each input is admitted and judged on its own. An event already valid ignores later
  copies; an identical copy of an invalid event is not judged twice; signatures go through one
  :class:`~merge.signatures.SignatureVerifier` per engine, whose cache verifies each distinct
  (key, digest, signature) once however many copies arrive.
* §7: :class:`ChainIndex` keeps the classification of :func:`merge.chains.classify` up to date
  by re-deciding only what an event can change: its own status, its fork group, and the
  descendants whose status follows from a status that changed.
* §9: the state is assembled (by the code :func:`merge.fold.fold` uses) only when asked for,
  and cached as canonical bytes with its ``state_sha256`` until the next change. Each read of
  :attr:`Merger.state` decodes a new copy from those bytes: the engine keeps the payloads it
  folded, and a caller who edits a returned state (its payload dicts are plain dicts) can
  change nothing the engine, a later state, a checkpoint or another caller sees.

Pure: no clock, files, network or randomness; inputs are never mutated.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left, insort
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final

import msgspec

from .admission import Admitted, Rejection, admit, require_inputs
from .canonical import encode_canonical_unchecked
from .chains import ChainKey, Classification, Fork, Node, supersessions
from .checks import Candidate, ValidEvent, postcheck, precheck
from .fold import FoldResult, Supersession, assemble_state, copy_identity, supersession_list
from .identifiers import require_subject
from .keys import KeySet
from .reasons import Reason
from .signatures import SignatureVerifier
from .state import State, decode_state_unchecked

__all__ = ["AddResult", "ChainIndex", "EventStatus", "Merger"]


class EventStatus(msgspec.Struct, frozen=True):
    """What became of an admitted input: its event and the event's status now.

    ``index``: the input's position among everything added to the engine (as in ``fold``).
    ``reason``: ``None`` when the event is applied, else why not (§6/§7).
    ``duplicate``: an earlier input already carried this ``event_id``.
    ``changed``: other events whose status this input changed (retroactive §7 effects), sorted.
    """

    index: int
    event_id: str
    reason: Reason | None
    duplicate: bool
    changed: tuple[str, ...] = ()

    @property
    def applied(self) -> bool:
        """True when the event is applied (it is in ``applied_event_ids``)."""
        return self.reason is None


#: What :meth:`Merger.add` returns: an :class:`EventStatus`, or the :class:`Rejection` of an
#: input that was not admitted (§5).
AddResult = EventStatus | Rejection


class Merger:
    """An incremental fold of one subject: :meth:`add` inputs, read :attr:`state` at any time.

    ``keys``: a :class:`~merge.KeySet` or a list of key objects (§3); a broken set raises
    :class:`~merge.KeySetError`. ``threads``: signature verification threads used by
    :meth:`extend` on large batches (``1``: none, the default; ``None``: one per core).

    Costs: extending a chain is O(log n) amortized (no re-fold, no re-verification); the state
    is assembled on first read after a change, in O(n), and cached with its ``state_sha256``.
    A plain object without I/O; not thread-safe (one engine per thread, or a lock around it).
    """

    __slots__ = (
        "_chains",
        "_count",
        "_rejected",
        "_seen",
        "_snapshot",
        "_valid",
        "_verdicts",
        "_verifier",
        "keys",
        "subject",
    )

    def __init__(
        self,
        *,
        subject: str,
        keys: KeySet | Iterable[Mapping[str, Any]],
        threads: int | None = 1,
    ) -> None:
        self.subject: Final = require_subject(subject)
        self.keys: Final = KeySet.parse(keys)
        self._verifier = SignatureVerifier(threads)
        # §5 verdict of every admitted event id: its ValidEvent, or the furthest §6 reason.
        self._verdicts: dict[str, Reason | ValidEvent] = {}
        self._valid: dict[str, ValidEvent] = {}
        # SHA-256 of every copy already judged, for events that are not (yet) valid: an
        # identical copy gets an identical verdict (§5), so it is not judged again.
        self._seen: dict[str, set[bytes]] = {}
        self._chains = ChainIndex()
        self._rejected: list[Rejection] = []
        self._count = 0
        self._snapshot: _Snapshot | None = None

    # -- adding ---------------------------------------------------------------------------

    def add(self, item: Any) -> AddResult:
        """Add one input: a JSON text (``bytes``/``str``) or a parsed JSON value.

        Returns the :class:`Rejection` of an input that is not admitted (§5; it is kept in
        :attr:`rejected`), else the :class:`EventStatus` of its event. Never raises on bad input.
        """
        outcome = admit(item, self._count)
        self._count += 1
        if isinstance(outcome, Rejection):
            self._rejected.append(outcome)
            return outcome
        return self._judge(outcome, None)

    def extend(self, items: Iterable[Any]) -> list[AddResult]:
        """Add many inputs, in order; the same as :meth:`add` on each, but faster.

        Checks 1–11 run on the whole batch first so that the signatures can be verified
        together (in parallel when ``threads`` allows), as :func:`merge.fold` does.
        """
        admitted: list[Admitted | Rejection] = []
        for item in require_inputs(items):
            admitted.append(admit(item, self._count))
            self._count += 1
        prechecked: list[Reason | Candidate | None] = []
        for outcome in admitted:
            if isinstance(outcome, Rejection) or isinstance(self._verdicts.get(outcome.event_id), ValidEvent):
                prechecked.append(None)
            else:
                prechecked.append(precheck(outcome, self.subject, self.keys))
        self._verifier.prefetch(
            job for result in prechecked if isinstance(result, Candidate) and (job := result.signature_job)
        )
        results: list[AddResult] = []
        for outcome, result in zip(admitted, prechecked, strict=True):
            if isinstance(outcome, Rejection):
                self._rejected.append(outcome)
                results.append(outcome)
            else:
                results.append(self._judge(outcome, result))
        return results

    def _judge(self, copy: Admitted, prechecked: Reason | Candidate | None) -> EventStatus:
        event_id = copy.event_id
        before = self._verdicts.get(event_id)
        duplicate = before is not None
        if isinstance(before, ValidEvent):
            # §5: once a copy passed §6 the event is valid; other copies change nothing.
            return EventStatus(copy.index, event_id, self._chains.reasons.get(event_id), True)
        # The copy's identity, as fold() has it (copy_identity), kept as a digest: the engine
        # lives for days, so it remembers 33 bytes per distinct copy, not the whole text.
        raw, held_float = copy_identity(copy)
        digest = hashlib.sha256(raw).digest() + (b"F" if held_float else b"")
        seen = self._seen.setdefault(event_id, set())
        if digest in seen:
            return EventStatus(copy.index, event_id, self.reason(event_id), True)
        seen.add(digest)
        if prechecked is None:
            prechecked = precheck(copy, self.subject, self.keys)
        verdict = (
            postcheck(prechecked, self.keys, self._verifier)
            if isinstance(prechecked, Candidate)
            else prechecked
        )
        changed: list[str] = []
        if isinstance(verdict, ValidEvent):
            # A new event, or a late valid copy of an invalid one (§5): now it is valid.
            self._verdicts[event_id] = self._valid[event_id] = verdict
            del self._seen[event_id]
            changed = self._chains.add(Node(event_id, verdict.prev_event, verdict.chain, verdict.created_us))
        elif before is None:
            self._verdicts[event_id] = verdict
            changed = self._chains.admit(event_id)
        elif verdict.rank > before.rank:
            self._verdicts[event_id] = verdict  # §5: the copy that got furthest gives the reason
        else:
            return EventStatus(copy.index, event_id, before, True)
        self._snapshot = None
        others = tuple(sorted({eid for eid in changed if eid != event_id}))
        return EventStatus(copy.index, event_id, self.reason(event_id), duplicate, others)

    # -- reading --------------------------------------------------------------------------

    def _current(self) -> _Snapshot:
        snapshot = self._snapshot
        if snapshot is None:
            classification = self._chains.live_classification()
            removed = supersessions(classification.applied, self._valid)
            body = assemble_state(self.subject, self._verdicts, self._valid, classification, removed)
            encoded = encode_canonical_unchecked(body)
            snapshot = _Snapshot(encoded, hashlib.sha256(encoded).hexdigest(), supersession_list(removed))
            self._snapshot = snapshot
        return snapshot

    @property
    def state(self) -> State:
        """The §9 state of everything added so far (``state_sha256`` included).

        A new copy on every read, the caller's own (decoded from the cached canonical bytes,
        at C speed): editing it changes nothing else. For the hash alone, read
        :attr:`state_sha256`, which copies nothing.
        """
        snapshot = self._current()
        return msgspec.structs.replace(decode_state_unchecked(snapshot.body), state_sha256=snapshot.sha256)

    @property
    def state_sha256(self) -> str:
        """``state.state_sha256``, computed on first read after a change and cached."""
        return self._current().sha256

    @property
    def state_json(self) -> bytes:
        """``canonical_json(self.state)``: the state's canonical JSON, ``state_sha256`` included."""
        return encode_canonical_unchecked(self.state)

    @property
    def rejected(self) -> tuple[Rejection, ...]:
        """The inputs that were not admitted, in the order added."""
        return tuple(self._rejected)

    @property
    def result(self) -> FoldResult:
        """What ``fold(everything added so far)`` returns: the state, rejections and supersessions."""
        return FoldResult(self.state, self.rejected, self._current().superseded)

    @property
    def input_count(self) -> int:
        """How many inputs were added (admitted or not)."""
        return self._count

    @property
    def event_count(self) -> int:
        """Distinct admitted event ids (§5), ``state.event_count``."""
        return len(self._verdicts)

    def __contains__(self, event_id: object) -> bool:
        return event_id in self._verdicts

    def reason(self, event_id: str) -> Reason | None:
        """``None`` when ``event_id`` is applied, else its reason; ``KeyError`` if never admitted."""
        verdict = self._verdicts[event_id]
        if isinstance(verdict, Reason):
            return verdict
        return self._chains.reasons.get(event_id)


class _Snapshot(msgspec.Struct, frozen=True):
    """The cached state of a Merger: canonical bytes without ``state_sha256``, that hash, §7 supersessions."""

    body: bytes
    sha256: str
    superseded: tuple[Supersession, ...]


Status = int | Reason  # an applied event's depth in its chain, or why a valid event did not apply
SortKey = tuple[int, int, str]  # (created_at instant, depth, event_id): the §7 apply order


class ChainIndex:
    """Spec §7 kept up to date as events arrive; always equal to :func:`merge.chains.classify`.

    :meth:`add` a valid event (§6 passed) as a :class:`~merge.chains.Node`, :meth:`admit` the id
    of an event that failed §6; :meth:`classification` then equals ``classify(nodes, admitted)``
    (forks in a different order: the state sorts them). Each call re-decides only what the new
    fact can change and returns the ids whose status changed.

    The status of a valid event follows from its prev alone, top-down (§7): a root, or an event
    whose prev is not valid, is decided at once; under an applied prev it is decided within its
    (chain, prev) group of eligible events, which applies alone and is a fork otherwise; under a
    valid prev that did not apply it is ``invalid_prev``. So a change propagates only downwards,
    and only while the applied set changes. Extending a chain costs one dictionary update and one
    insertion in the apply order, O(log n).

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

    def admit(self, event_id: str) -> list[str]:
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

    def classification(self) -> Classification:
        """A snapshot equal to ``classify(nodes, admitted)`` (forks in another order)."""
        live = self.live_classification()
        return Classification(live.applied, dict(self.depth), dict(self.reasons), live.forks)

    def live_classification(self) -> Classification:
        """As :meth:`classification`, sharing this index's dictionaries (read them, do not keep them)."""
        applied = [key[2] for key in self._order]
        forks = [
            Fork(chain, prev, tuple(sorted(self._groups[(prev, chain)]))) for prev, chain in self._forked
        ]
        return Classification(applied, self.depth, self.reasons, forks)

    # -- internals ------------------------------------------------------------------------

    def _attach(self, node: Node, changed: list[str]) -> None:
        """Decide a new event under its prev (not None), as that prev stands now."""
        prev = node.prev_event
        assert prev is not None
        parent = self.nodes.get(prev)
        if parent is None:
            reason = Reason.INVALID_PREV if prev in self.admitted else Reason.MISSING_PREV
            self._set(node.event_id, reason, changed)
            return
        depth = self.depth.get(prev)
        if depth is None:
            self._set(node.event_id, self._below_unapplied(node.event_id), changed)
        elif node.chain != parent.chain:
            self._set(node.event_id, Reason.PREV_WRONG_CHAIN, changed)
        elif node.created_us < parent.created_us:
            self._set(node.event_id, Reason.CREATED_BEFORE_PREV, changed)
        else:
            self._join((prev, parent.chain), node.event_id, depth + 1, changed)

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
        if parent is None:
            reason = Reason.INVALID_PREV if parent_id in self.admitted else Reason.MISSING_PREV
            for child in children:
                self._set(child, reason, changed)
            return
        group_key = (parent_id, parent.chain)
        self._groups.pop(group_key, None)
        self._forked.discard(group_key)
        depth = self.depth.get(parent_id)
        if depth is None:
            for child in children:
                self._set(child, self._below_unapplied(child), changed)
            return
        for child in children:
            node = self.nodes[child]
            if node.chain != parent.chain:
                self._set(child, Reason.PREV_WRONG_CHAIN, changed)
            elif node.created_us < parent.created_us:
                self._set(child, Reason.CREATED_BEFORE_PREV, changed)
            else:
                self._join(group_key, child, depth + 1, changed)

    def _below_unapplied(self, event_id: str) -> Reason:
        # Under a valid prev that did not apply: invalid_prev, unless on a prev cycle (§7).
        return Reason.MISSING_PREV if event_id in self._on_cycle else Reason.INVALID_PREV

    def _close_cycle(self, node: Node, changed: list[str]) -> None:
        """``node`` closes a prev cycle: its prev descends from it. Everything on it is missing_prev."""
        members = [node.event_id]
        current = node.prev_event
        while current is not None and current != node.event_id:
            members.append(current)
            current = self.nodes[current].prev_event
        self._on_cycle.update(members)
        # Every member but the new one descends from an event that was not valid: none applied,
        # so their own children keep their status; only the members' reasons change.
        for member in members:
            self._set(member, Reason.MISSING_PREV, changed)

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
        for block in self._blocks:
            yield from block

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
