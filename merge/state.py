"""The merged state of spec §9, as typed, immutable msgspec Structs.

``canonical_json(state)`` gives the exact bytes the registry hashes; ``msgspec.json.decode(
data, type=State)`` reads a state back (decode(encode(state)) == state).
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from .canonical import CanonicalStruct
from .errors import InputError
from .reasons import Reason

__all__ = [
    "MERGE_VERSION",
    "Chain",
    "Current",
    "Entry",
    "Equivocation",
    "InvalidEvent",
    "Signer",
    "SourceAlias",
    "State",
    "decode_state",
]

MERGE_VERSION: Final = "pith-open-graph-merge-v1"


class Signer(CanonicalStruct, frozen=True):
    """Who signed an event (the event's ``signer`` object)."""

    signer_id: str
    signer_type: str
    key_id: str
    public_key_fingerprint: str


class Entry(CanonicalStruct, frozen=True):
    """The entry of an applied event in ``current`` (§9)."""

    event_id: str
    target: str
    created_at: str
    signer: Signer
    payload: dict[str, Any]


class SourceAlias(CanonicalStruct, frozen=True):
    """One alias derived from the applied ``record_created`` (§9)."""

    alias_kind: str
    alias_value: str
    created_at: str


class Current(CanonicalStruct, frozen=True):
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


class Chain(CanonicalStruct, frozen=True):
    """A chain (§7): ``key_id`` is ``None`` for the record chain."""

    target: str
    key_id: str | None


class Equivocation(CanonicalStruct, frozen=True):
    """A fork: two or more eligible events of one chain naming one ``prev_event`` (§7)."""

    chain: Chain
    prev_event: str | None
    event_ids: tuple[str, ...]


class InvalidEvent(CanonicalStruct, frozen=True):
    """An admitted event that did not apply, and the reason code why."""

    event_id: str
    reason: Reason


class State(CanonicalStruct, frozen=True, omit_defaults=True):
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
    """Decode a state pith-merge itself encoded (internal: no error translation)."""
    return _state_decoder.decode(data)


def decode_state(data: bytes | str) -> State:
    """Read a state from JSON (for example one printed by ``pith-merge fold``).

    Raises :class:`merge.InputError` when ``data`` is not a §9 state, with msgspec's account of
    where (``Expected `int`, got `str` - at `$.event_count```).
    """
    try:
        return _state_decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise InputError(f"not a merge-v1 state: {exc}") from None
