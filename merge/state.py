"""The merged state of spec §9: its typed, immutable msgspec Structs, and how it is assembled.

``canonical_json(state)`` gives the exact bytes the registry hashes; ``msgspec.json.decode(
data, type=State)`` reads a state back (decode(encode(state)) == state). :func:`assemble_state`
builds the state of classified verdicts, for the batch fold (:func:`build_state`) and the
incremental :class:`merge.Merger` alike; :func:`with_state_sha256` adds its hash (§2).
"""

from __future__ import annotations

import gc
import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Final

import msgspec

from .admission import Rejection
from .canonical import CanonicalStruct, encode_canonical_unchecked
from .chains import Classification, Fork, Node, classify, supersessions
from .checks import CURRENT_KEYS, EVENT_TYPES, ValidEvent
from .errors import InputError
from .identifiers import source_alias_pairs
from .reasons import Reason
from .schema import Signer  # an entry's signer is its event's §4 object; exported with the state's types

__all__ = [
    "MERGE_VERSION",
    "Chain",
    "Current",
    "Entry",
    "Equivocation",
    "FoldResult",
    "InvalidEvent",
    "Signer",
    "SourceAlias",
    "State",
    "StateDecodeError",
    "Supersession",
    "assemble_state",
    "build_state",
    "decode_state",
    "is_spliced_state",
    "source_aliases",
    "splice_state_sha256",
    "supersession_list",
    "with_state_sha256",
    "write_state",
]

#: The ``merge_version`` of every state (spec §9): the name of the rules it was folded by.
MERGE_VERSION: Final = "pith-open-graph-merge-v1"

# The Structs of a state are untracked by the cyclic garbage collector (``gc=False``, as
# ``merge.schema.Signer``): they are frozen and hold strings, tuples of each other and JSON
# payloads, never themselves, so no cycle can run through one. A state of 4,000 events is tens
# of thousands of them, which the collector would otherwise walk again and again for nothing
# (decoded in verify_bundle: about 7% of its time, docs/performance.md).


class Entry(CanonicalStruct, frozen=True, gc=False):
    """The entry of an applied event in ``current`` (§9); ``signer`` is its event's own object."""

    event_id: str
    target: str
    created_at: str
    signer: Signer
    payload: dict[str, Any]


class SourceAlias(CanonicalStruct, frozen=True, gc=False):
    """One alias derived from the applied ``record_created`` (§9)."""

    alias_kind: str
    alias_value: str
    created_at: str


class Current(CanonicalStruct, frozen=True, gc=False):
    """What is current: the record and, per event type, the applied entries not superseded."""

    canonical_record: dict[str, Any] | None
    source_aliases: tuple[SourceAlias, ...]
    graph_snapshots: tuple[Entry, ...]
    author_attestations: tuple[Entry, ...]
    timestamp_anchors: tuple[Entry, ...]
    storage_attestations: tuple[Entry, ...]
    citation_signatures: tuple[Entry, ...]
    replication_records: tuple[Entry, ...]
    corrections: tuple[Entry, ...]
    mirror_hints: tuple[Entry, ...]
    record_created: Entry | None

    def entry_ids(self) -> dict[str, tuple[str, ...]]:
        """The event ids of each entry field (the lists, then ``record_created``), in order."""
        ids = {key: tuple(entry.event_id for entry in getattr(self, key)) for key in CURRENT_KEYS}
        ids["record_created"] = (self.record_created.event_id,) if self.record_created else ()
        return ids


class Chain(CanonicalStruct, frozen=True, gc=False):
    """A chain (§7): ``key_id`` is ``None`` for the record chain."""

    target: str
    key_id: str | None


class Equivocation(CanonicalStruct, frozen=True, gc=False):
    """A fork: two or more eligible events of one chain naming one ``prev_event`` (§7)."""

    chain: Chain
    prev_event: str | None
    event_ids: tuple[str, ...]


class InvalidEvent(CanonicalStruct, frozen=True, gc=False):
    """An admitted event that did not apply, and the reason code why."""

    event_id: str
    reason: Reason


class State(CanonicalStruct, frozen=True, omit_defaults=True, gc=False):
    """The state of one subject (spec §9).

    ``state_sha256`` is the only field with a default: a state whose ``state_sha256`` is
    ``""`` encodes without the key, which is exactly what the hash is taken over.
    """

    state_type: str
    state_version: str
    pith_number: str
    merge_version: str
    event_count: int
    valid_event_count: int
    invalid_event_count: int
    equivocation_count: int
    current: Current
    equivocations: tuple[Equivocation, ...]
    invalid_events: tuple[InvalidEvent, ...]
    applied_event_ids: tuple[str, ...]
    state_sha256: str = ""


_state_decoder: Final = msgspec.json.Decoder(State)


def decode_state_unchecked(data: bytes) -> State:
    """Decode a state pith-merge itself encoded (internal: no error translation).

    With the cyclic garbage collector paused: the decode makes only acyclic objects (Structs,
    tuples, dicts and lists of JSON values), tens of thousands for a large state, and the passes
    their allocation would set off find nothing to collect. What they cost depends on what else
    the process holds (27 against 64 ms for a state of 20,000 events in one process, no
    difference in another: docs/performance.md). Objects are still freed as they always are, by
    reference counting; the collector runs again as it did once it resumes.
    """
    with _collector_paused():
        return _state_decoder.decode(data)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The block with the collector paused, if it was running (it is never turned on here)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class StateDecodeError(InputError, msgspec.ValidationError):
    """What :func:`decode_state` raises: a :class:`merge.InputError` (a caller's mistake), and
    still the ``msgspec.ValidationError`` that version 0.1 raised, for code that catches that."""


def decode_state(data: bytes | str) -> State:
    """Read a state from JSON (for example one printed by ``pith-merge fold``).

    Raises :class:`merge.state.StateDecodeError` (an :class:`merge.InputError`) when ``data`` is not a §9
    state, with msgspec's account of where (``Expected `int`, got `str` - at `$.event_count```),
    also when it nests too deep for the decoder (``{"a":`` 2,000 times), which is no state either,
    or when it is a ``str`` holding a lone surrogate (no UTF-8, so no JSON text: §1).
    """
    try:
        return _state_decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, UnicodeEncodeError) as exc:
        raise StateDecodeError(f"not a merge-v1 state: {exc}") from None


class Supersession(msgspec.Struct, frozen=True):
    """An applied event that left ``current`` (§7 supersedes), and the applied events that removed it."""

    event_id: str
    superseded_by: tuple[str, ...]


class FoldResult(msgspec.Struct, frozen=True):
    """What :func:`merge.fold` returns: the state and the inputs that were not admitted.

    ``superseded``: every applied event that some applied event superseded (§7), sorted by
    ``event_id``, as the fold decided it; ``None`` when a store served the result from a
    checkpoint (which keeps the state alone) left by a fold it does not remember: another
    handle's, or one of a subject its engine cache let go.
    """

    state: State
    rejected: tuple[Rejection, ...]
    superseded: tuple[Supersession, ...] | None = ()

    @property
    def state_sha256(self) -> str:
        """``state.state_sha256``: the hash of the state without that key (§2)."""
        return self.state.state_sha256

    @property
    def reasons(self) -> dict[str, Reason]:
        """``event_id`` → reason, for every admitted event that did not apply."""
        return {item.event_id: item.reason for item in self.state.invalid_events}


def build_state(
    subject: str, verdicts: Mapping[str, Reason | ValidEvent]
) -> tuple[State, tuple[Supersession, ...]]:
    """Classify the valid events (§7) and build the state (§9), ``state_sha256`` included.

    Also returns who superseded whom (§7), as :attr:`FoldResult.superseded` reports it.
    """
    valid = {eid: v for eid, v in verdicts.items() if isinstance(v, ValidEvent)}
    nodes = {eid: Node.of(v) for eid, v in valid.items()}
    classification = classify(nodes, verdicts)
    removed = supersessions(classification.applied, valid)
    state = with_state_sha256(assemble_state(subject, verdicts, valid, classification, removed))
    return state, supersession_list(removed)


def supersession_list(removed: Mapping[str, tuple[str, ...]]) -> tuple[Supersession, ...]:
    """:func:`merge.chains.supersessions`' map as the sorted Structs of :attr:`FoldResult.superseded`."""
    return tuple(Supersession(event_id, removed[event_id]) for event_id in sorted(removed))


def with_state_sha256(state: State) -> State:
    """The state with ``state_sha256`` set to the hash of the rest (§2)."""
    body = msgspec.structs.replace(state, state_sha256="")
    digest = hashlib.sha256(encode_canonical_unchecked(body)).hexdigest()
    return msgspec.structs.replace(state, state_sha256=digest)


#: The top-level key after ``state_sha256`` in a state's canonical JSON (§1 orders keys): only
#: scalars follow it (``state_version``, ``valid_event_count``), so its last occurrence is
#: the top level's.
_AFTER_STATE_SHA256: Final = b',"state_type":'


def splice_state_sha256(unhashed: Any, state_sha256: str) -> bytes:
    """The canonical JSON of a state from that of the state without ``state_sha256`` (the bytes
    its hash is taken over, §2): the key and its value put in their sorted place (§1, §9), with
    no decode and no encode (the compiled path writes the state without its hash, which it
    computes meanwhile: :mod:`merge.native.fold`)."""
    data, at, field = _state_sha256_place(unhashed, state_sha256)
    return b"".join((data[:at], field, data[at:]))


def is_spliced_state(document: bytes, unhashed: Any, state_sha256: str) -> bool:
    """Whether ``document`` is :func:`splice_state_sha256` of ``unhashed``, compared in place."""
    data, at, field = _state_sha256_place(unhashed, state_sha256)
    # bytes' own methods compare buffers with memcmp (a memoryview's == compares item by item).
    return (
        len(document) == len(data) + len(field)
        and document.startswith(data[:at])
        and document.startswith(field, at)
        and document.endswith(data[at:])
    )


def _state_sha256_place(unhashed: Any, state_sha256: str) -> tuple[memoryview, int, bytes]:
    """The bytes of a state without ``state_sha256``, where that key goes in them, and the key
    with its value as it goes there."""
    data = memoryview(unhashed)
    tail = len(data) - 256 if len(data) > 256 else 0
    at = bytes(data[tail:]).rfind(_AFTER_STATE_SHA256)
    if at < 0:  # never, for a state the compiled path wrote
        raise AssertionError("a state's canonical JSON without its state_type key")
    return data, at + tail, b',"state_sha256":"' + state_sha256.encode() + b'"'


_STATE_TYPE: Final = "pith_open_graph_state"


def assemble_state(
    subject: str,
    verdicts: Mapping[str, Reason | ValidEvent],
    valid: Mapping[str, ValidEvent],
    classification: Classification,
    removed: Mapping[str, tuple[str, ...]] | None = None,
) -> State:
    """The §9 state of classified verdicts, without ``state_sha256`` (see :func:`with_state_sha256`).

    ``valid`` holds the :class:`merge.checks.ValidEvent` verdicts of ``verdicts``; ``removed`` is what
    :func:`merge.chains.supersessions` says of the applied ones (computed here when not given).
    Shared by :func:`build_state` (the batch fold) and the incremental :class:`merge.Merger`, so
    both build the state the same way.
    """
    if removed is None:
        removed = supersessions(classification.applied, valid)
    applied = classification.applied
    lists: dict[str, list[Entry]] = {key: [] for key in CURRENT_KEYS}
    record: Entry | None = None
    record_event: ValidEvent | None = None
    for event_id in applied:
        event = valid[event_id]
        if event_id in removed:
            continue
        entry = Entry(
            event_id=event_id,
            target=event.target,
            created_at=event.created_at,
            signer=event.signer,
            payload=event.payload,
        )
        if event.event_type == "record_created":
            record, record_event = entry, event
        else:
            lists[EVENT_TYPES[event.event_type][1]].append(entry)

    invalid = {eid: v for eid, v in verdicts.items() if isinstance(v, Reason)}
    invalid.update(classification.reasons)
    equivocations = sorted(
        (
            Equivocation(chain=Chain(*fork.chain), prev_event=fork.prev_event, event_ids=fork.event_ids)
            for fork in classification.forks
        ),
        key=encode_canonical_unchecked,
    )
    current = Current(
        canonical_record=record_event.payload["canonical_record"] if record_event else None,
        source_aliases=source_aliases(record_event) if record_event else (),
        record_created=record,
        **{key: tuple(entries) for key, entries in lists.items()},
    )
    return State(
        state_type=_STATE_TYPE,
        state_version="1.0",
        pith_number=subject,
        merge_version=MERGE_VERSION,
        event_count=len(verdicts),
        valid_event_count=len(applied),
        invalid_event_count=len(invalid),
        equivocation_count=len(equivocations),
        current=current,
        equivocations=tuple(equivocations),
        invalid_events=tuple(InvalidEvent(eid, invalid[eid]) for eid in sorted(invalid)),
        applied_event_ids=tuple(applied),
    )


def source_aliases(record: ValidEvent) -> tuple[SourceAlias, ...]:
    """§9 source aliases of a valid ``record_created``, sorted by (alias_kind, alias_value) as code points."""
    payload = record.payload
    pairs = source_alias_pairs(payload["canonical_record"]["source"], payload["canonical_sha256"])
    assert pairs is not None  # the §8 payload rule held: the source has its id, kind and version
    return tuple(SourceAlias(alias_kind=k, alias_value=v, created_at=record.created_at) for k, v in pairs)


def write_state(
    subject: str,
    *,
    event_count: int,
    applied: Sequence[str],
    current: Mapping[str, bytes],
    record: tuple[bytes, bytes, bytes] | None,
    forks: Iterable[Fork],
    invalid: Mapping[str, Reason],
) -> tuple[list[bytes], bytes]:
    """The canonical JSON of a state (§1, §9) from canonical pieces, without ``state_sha256``:
    the pieces before that key's place and the bytes after it (§2: its hash is taken over them
    all, in order; they are joined only when the bytes are wanted). The twin of
    ``native/src/state.rs``'s ``write_state``, for the incremental :class:`merge.Merger`, which
    keeps each applied event's entry written and each list of ``current`` joined (issue 38: a
    state after one more event costs its new pieces, not every event's).

    ``applied``: the applied ids in apply order (§7); ``current``: each list of ``current``
    written (a JSON array of the entries of its applied events not superseded, in apply
    order), by its key (:data:`merge.checks.CURRENT_KEYS`; a key not given is an empty list);
    ``record``: the applied ``record_created``'s written entry, ``canonical_record`` and
    ``source_aliases``, or ``None``; ``forks``: the equivocations; ``invalid``: the reason of
    every admitted event that did not apply.
    """
    equivocations = sorted(
        encode_canonical_unchecked(
            Equivocation(chain=Chain(*fork.chain), prev_event=fork.prev_event, event_ids=fork.event_ids)
        )
        for fork in forks
    )
    entry, canonical_record, aliases = record or (b"null", b"null", b"[]")
    invalid_events = (
        encode_canonical_unchecked([InvalidEvent(eid, invalid[eid]) for eid in sorted(invalid)])
        if invalid
        else b"[]"
    )
    lists = {key: current.get(key, b"[]") for key in CURRENT_KEYS}
    # Keys in code point order (§1), as the state's Structs encode them.
    head = [
        *(
            b'{"applied_event_ids":',
            encode_canonical_unchecked(applied),
            b',"current":{"author_attestations":',
            lists["author_attestations"],
            b',"canonical_record":',
            canonical_record,
            b',"citation_signatures":',
            lists["citation_signatures"],
            b',"corrections":',
            lists["corrections"],
            b',"graph_snapshots":',
            lists["graph_snapshots"],
            b',"mirror_hints":',
            lists["mirror_hints"],
            b',"record_created":',
            entry,
            b',"replication_records":',
            lists["replication_records"],
            b',"source_aliases":',
            aliases,
            b',"storage_attestations":',
            lists["storage_attestations"],
            b',"timestamp_anchors":',
            lists["timestamp_anchors"],
            b'},"equivocation_count":%d,"equivocations":[' % len(equivocations),
            b",".join(equivocations),
            b'],"event_count":%d,"invalid_event_count":%d' % (event_count, len(invalid)),
            b',"invalid_events":',
            invalid_events,
            b',"merge_version":"' + MERGE_VERSION.encode() + b'","pith_number":',
            encode_canonical_unchecked(subject),
        )
    ]
    tail = b',"state_type":"%s","state_version":"1.0","valid_event_count":%d}' % (
        _STATE_TYPE.encode(),
        len(applied),
    )
    return head, tail
