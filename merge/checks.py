"""The event schema (spec §4), the event types (§8) and the stateless checks (§6).

Each admitted copy of an event is judged on its own, in the spec's order; the first failure
is its reason. The checks are split around signature verification (check 12) so that the
fold can verify many signatures at once, in parallel, between :func:`precheck` and
:func:`postcheck`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any, Final, NamedTuple, TypeGuard

import msgspec

from .admission import Admitted
from .canonical import encode_canonical_unchecked
from .identifiers import (
    EVENT_ID_PATTERN,
    HEX32_PATTERN,
    HEX64_PATTERN,
    pith_number_from_digest,
)
from .keys import Key, KeySet, decode_b64
from .reasons import Reason
from .schema import Event, EventSigner, body_of
from .signatures import SignatureVerifier
from .timestamps import parse_timestamp

__all__ = [
    "CURRENT_KEYS",
    "EVENT_TYPES",
    "Candidate",
    "ValidEvent",
    "postcheck",
    "precheck",
]

#: §8: event_type → (target, key of its list in ``state.current``).
EVENT_TYPES: Final[Mapping[str, tuple[str, str]]] = {
    "record_created": ("record", "record_created"),
    "graph_snapshot": ("graph", "graph_snapshots"),
    "author_attestation": ("author", "author_attestations"),
    "timestamp_anchor": ("timestamp", "timestamp_anchors"),
    "storage_attestation": ("storage", "storage_attestations"),
    "citation_signature": ("citation", "citation_signatures"),
    "replication_record": ("replication", "replication_records"),
    "correction": ("correction", "corrections"),
    "mirror_hint": ("mirror", "mirror_hints"),
}
#: The list keys of ``state.current``, every type but ``record_created``.
CURRENT_KEYS: Final = tuple(key for _, key in EVENT_TYPES.values() if key != "record_created")

_HEX32: Final = HEX32_PATTERN.fullmatch
_HEX64: Final = HEX64_PATTERN.fullmatch
_EVENT_ID: Final = EVENT_ID_PATTERN.fullmatch


class ValidEvent(NamedTuple):
    """An event that passed §6: the fields the chain rules (§7) and the state (§9) use."""

    event_id: str
    event_type: str
    target: str
    created_at: str
    created_us: int
    prev_event: str | None
    supersedes: tuple[str, ...]
    signer: EventSigner
    payload: dict[str, Any]

    @property
    def chain(self) -> tuple[str, str | None]:
        """``(target, key_id)``; ``("record", None)`` for ``record_created`` (§7)."""
        if self.event_type == "record_created":
            return ("record", None)
        return (self.target, self.signer.key_id)


class Candidate(NamedTuple):
    """A copy that passed checks 1–11 and waits for its signature to be verified (check 12)."""

    event: Event
    key: Key
    digest: bytes
    signature: bytes | None
    created_us: int

    @property
    def signature_job(self) -> tuple[bytes, bytes, bytes] | None:
        """``(public key, message, signature)`` to verify, or None when the base64 was bad."""
        if self.signature is None:
            return None
        return (self.key.public_key, self.digest, self.signature)


def precheck(copy: Admitted, subject: str, keys: KeySet) -> Reason | Candidate:
    """Checks 1–11 of §6 on one copy, and the decoding of its signature for check 12."""
    if copy.non_canonical is not None:
        return Reason.NON_CANONICAL_JSON
    event = copy.decoded
    if isinstance(event, dict):
        # Not decoded as an Event: some key or value type of §4 is off (or the input came by
        # the slow path). Check 2 looks at schema_version alone, then check 3 at the shape.
        if event.get("schema_version") != "1.0":
            return Reason.UNSUPPORTED_SCHEMA_VERSION
        try:
            event = msgspec.convert(event, Event)
        except msgspec.ValidationError:
            return Reason.MALFORMED
    elif event.schema_version != "1.0":
        return Reason.UNSUPPORTED_SCHEMA_VERSION
    created_us = _schema_instant(event)
    if created_us is None:
        return Reason.MALFORMED
    content = event.content_sha256
    if event.event_id != "sha256:" + content:
        return Reason.EVENT_ID_MISMATCH
    if hashlib.sha256(encode_canonical_unchecked(body_of(event))).hexdigest() != content:
        return Reason.CONTENT_HASH_MISMATCH
    if event.subject_pith_number != subject:
        return Reason.WRONG_SUBJECT
    kind = EVENT_TYPES.get(event.event_type)
    if kind is None:
        return Reason.UNKNOWN_EVENT_TYPE
    if event.target != kind[0]:
        return Reason.TARGET_MISMATCH
    signer, signature = event.signer, event.signature
    key = keys.get(signer.key_id)
    if key is None:
        return Reason.UNKNOWN_KEY
    if (
        signature.key_id != signer.key_id
        or signer.public_key_fingerprint != key.fingerprint_hex
        or signature.public_key_fingerprint != key.fingerprint_hex
    ):
        return Reason.KEY_MISMATCH
    if (
        signature.algorithm != "ed25519"
        or signature.signed_message != "open_graph_event_sha256_bytes"
        or signature.signature_status != "signed_v1"
    ):
        return Reason.UNSUPPORTED_SIGNATURE
    raw_signature = decode_b64(signature.signature_b64)
    if raw_signature is not None and len(raw_signature) != 64:
        raw_signature = None
    return Candidate(event, key, bytes.fromhex(content), raw_signature, created_us)


def postcheck(candidate: Candidate, keys: KeySet, verifier: SignatureVerifier) -> Reason | ValidEvent:
    """Checks 12–16 of §6; a copy that passes them all is a :class:`ValidEvent`."""
    job = candidate.signature_job
    if job is None or not verifier.verify(*job):
        return Reason.BAD_SIGNATURE
    event, key = candidate.event, candidate.key
    if key.rotates_at_us is not None and candidate.created_us >= key.rotates_at_us:
        return Reason.KEY_EXPIRED
    event_type, payload = event.event_type, event.payload
    if event_type == "record_created":
        if event.prev_event is not None or event.supersedes:
            return Reason.RECORD_NOT_GENESIS
        if not _record_payload_ok(payload, event.subject_pith_number):
            return Reason.BAD_PAYLOAD
        if not _receipt_ok(payload, keys, verifier):
            return Reason.BAD_RECEIPT
    elif event_type == "graph_snapshot" and not isinstance(payload.get("graph_snapshot"), dict):
        return Reason.BAD_PAYLOAD
    return ValidEvent(
        event.event_id,
        event_type,
        event.target,
        event.created_at,
        candidate.created_us,
        event.prev_event,
        tuple(event.supersedes),
        event.signer,
        payload,
    )


def _is_str(value: Any) -> TypeGuard[str]:
    # Exactly str: a FloatLiteral (a str subclass) is a number, not a string.
    return type(value) is str


def _schema_instant(event: Event) -> int | None:
    """The ``created_at`` instant when the rules of §4 that no type says hold, else ``None``."""
    if not (_HEX32(event.signer.public_key_fingerprint) and _HEX64(event.content_sha256)):
        return None
    prev = event.prev_event
    if prev is not None and not _EVENT_ID(prev):
        return None
    supersedes = event.supersedes
    if supersedes:
        if not all(_EVENT_ID(item) for item in supersedes):
            return None
        if len(set(supersedes)) != len(supersedes) or event.event_id in supersedes:
            return None
    return parse_timestamp(event.created_at)


def _record_payload_ok(payload: dict[str, Any], subject: str) -> bool:
    record = payload.get("canonical_record")
    if type(record) is not dict:
        return False
    digest = hashlib.sha256(encode_canonical_unchecked(record)).hexdigest()
    if payload.get("canonical_sha256") != digest:
        return False
    source = record.get("source")
    if type(source) is not dict:
        return False
    source_version = payload.get("source_version")
    if not (
        _is_str(payload.get("source_id"))
        and _is_str(payload.get("source_kind"))
        and type(source_version) is int
        and _is_str(payload.get("attestation_state"))
        and payload["source_id"] == source.get("id")
        and payload["source_kind"] == source.get("kind")
        # type check: True == 1 in Python, but JSON true is no integer (§4).
        and type(source.get("version")) is int
        and source_version == source["version"]
    ):
        return False
    metadata = record.get("metadata")
    submitted_at = metadata.get("submitted_at") if type(metadata) is dict else None
    if not _is_str(submitted_at) or len(submitted_at) < 4:
        return False
    return bool(pith_number_from_digest(digest, submitted_at) == subject)


_RECEIPT_CONSTANTS: Final = {
    "kind": "pith_receipt",
    "algorithm": "ed25519",
    "signed_message": "canonical_sha256_bytes",
    "signature_status": "signed_v1",
}
_RECEIPT_DIGEST: Final = re.compile(r"[0-9a-f]{64}")


def _receipt_ok(payload: dict[str, Any], keys: KeySet, verifier: SignatureVerifier) -> bool:
    receipt = payload.get("receipt")
    if type(receipt) is not dict:
        return False
    if any(receipt.get(field) != want for field, want in _RECEIPT_CONSTANTS.items()):
        return False
    digest = receipt.get("canonical_sha256")
    # The payload's canonical_sha256 was checked against H(canonical_record) already (§8).
    if digest != payload["canonical_sha256"] or not _RECEIPT_DIGEST.fullmatch(digest):
        return False
    key_id = receipt.get("key_id")
    key = keys.get(key_id) if _is_str(key_id) else None
    if key is None or receipt.get("public_key_fingerprint") != key.fingerprint_hex:
        return False
    encoded = receipt.get("signature_b64")
    signature = decode_b64(encoded) if _is_str(encoded) else None
    if signature is None or len(signature) != 64:
        return False
    return verifier.verify(key.public_key, bytes.fromhex(digest), signature)
