"""The audit's copy rule: what makes copies of an event one copy across snapshots (the same
JSON value, §5), and an event's copies as a snapshot holds them, each admitted when first asked
for. Its twin is ``snapshot_identity`` in ``native/src/bundle.rs``."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from ..admission import Admitted, admit, copy_identity
from ..canonical import decode_json, encode_canonical_unchecked, string_value
from ..identifiers import EVENT_ID_PREFIX, event_body
from ..schema import Event

__all__ = ["CopyIdentity", "snapshot_identity"]


class _AdmittedCopies(Mapping[str, tuple[Admitted, ...]]):
    """event_id -> its distinct admitted copies, each admitted (§5) when first asked for: an
    audit reads the copies of the few events whose fate changed (their ``prev_event``)."""

    def __init__(self, held: dict[str, list[Admitted | tuple[int, bytes, Any]]]) -> None:
        #: Each copy: admitted, or a canonical text the compiled path wrote, ``(its index, the
        #: text, its identity as that path read it)``.
        self._held = held
        self._admitted: dict[str, tuple[Admitted, ...]] = {}

    def __getitem__(self, event_id: str) -> tuple[Admitted, ...]:
        admitted = self._admitted.get(event_id)
        if admitted is None:
            admitted = tuple(
                copy if isinstance(copy, Admitted) else _admitted_text(copy[0], copy[1])
                for copy in self._held[event_id]
            )
            self._admitted[event_id] = admitted
        return admitted

    def bound_value(self, event_id: str, *, passed: bool = False) -> dict[str, Any] | None:
        """The value of a copy of ``event_id`` whose body hashes to it (:attr:`Admitted.bound`),
        if one is held; a canonical text's without admitting it: its body is canonical-able
        (a part of a canonical value), so it is hashed without a walk. ``passed``: the event
        passed §6 in this snapshot's fold, so one of its copies did, and is bound: when it is
        the one copy held, nothing is hashed."""
        held = self._held.get(event_id, ())
        if passed and len(held) == 1 and not isinstance(held[0], Admitted):
            return {"prev_event": held[0][2][2]}  # (its identity's)
        for copy in held:
            if isinstance(copy, Admitted):
                if copy.bound:
                    return copy.value
                continue
            value: dict[str, Any] = decode_json(copy[1])  # a canonical text of an object
            body = encode_canonical_unchecked(event_body(value))
            if EVENT_ID_PREFIX + hashlib.sha256(body).hexdigest() == event_id:
                return value
        return None

    def __iter__(self) -> Iterator[str]:
        return iter(self._held)

    def __len__(self) -> int:
        return len(self._held)


def _admitted_text(index: int, text: bytes) -> Admitted:
    outcome = admit(text, index)
    assert isinstance(outcome, Admitted), "a canonical identity is only read off an admitted text"
    return outcome


class CopyIdentity(NamedTuple):
    """What makes copies of an event one copy across snapshots (:func:`snapshot_identity`)."""

    event_id: str
    #: SHA-256 of the copy's canonical JSON (§1); of its text, and a byte for its floats, when it
    #: is not canonical-able.
    digest: bytes
    #: Its ``prev_event`` when that is a string, else ``None``.
    prev_event: str | None


def snapshot_identity(copy: Admitted) -> CopyIdentity:
    """The audit's rule for "the same event copy" across snapshots: the same JSON value (§5
    judges values). Its twin, ``snapshot_identity`` in ``native/src/bundle.rs``, reads it off
    each canonical text the compiled path writes of a bundle's events; tests/test_audit.py
    holds the two equal on the same inputs.

    Value, not text (the fold's rule, :func:`merge.admission.copy_identity`): the audit asks
    whether NEW still holds what OLD held, and a registry that wrote a copy again with another
    key order or spacing dropped nothing. So the digest is of the canonical bytes when the copy
    is canonical-able; else of the text as :func:`merge.admission.copy_identity` has it.
    """
    if copy.non_canonical is None:
        digest = hashlib.sha256(encode_canonical_unchecked(copy.decoded)).digest()
    else:
        raw, non_canonical = copy_identity(copy)
        digest = hashlib.sha256(raw).digest() + bytes([non_canonical])
    decoded = copy.decoded
    prev = decoded.prev_event if isinstance(decoded, Event) else decoded.get("prev_event")
    return CopyIdentity(copy.event_id, digest, string_value(prev))
