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

from .admission import Admitted
from .canonical import encode_canonical_unchecked
from .identifiers import (
    EVENT_ID_PATTERN,
    HEX32_PATTERN,
    HEX64_PATTERN,
    NOT_IN_BODY,
    pith_number_from_digest,
)
from .keys import Key, KeySet, decode_b64
from .reasons import Reason
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

EVENT_KEYS: Final = frozenset(
    {
        "event_type",
        "subject_pith_number",
        "target",
        "payload",
        "signer",
        "created_at",
        "supersedes",
        "prev_event",
        "signature",
        "content_sha256",
        "schema_version",
        "event_id",
    }
)
SIGNER_KEYS: Final = frozenset({"signer_id", "signer_type", "key_id", "public_key_fingerprint"})
SIGNATURE_KEYS: Final = frozenset(
    {
        "signature_status",
        "algorithm",
        "key_id",
        "public_key_fingerprint",
        "signature_b64",
        "signed_message",
        "signed_at",
    }
)
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
    signer: dict[str, str]
    payload: dict[str, Any]

    @property
    def chain(self) -> tuple[str, str | None]:
        """``(target, key_id)``; ``("record", None)`` for ``record_created`` (§7)."""
        if self.event_type == "record_created":
            return ("record", None)
        return (self.target, self.signer["key_id"])


class Candidate(NamedTuple):
    """A copy that passed checks 1–11 and waits for its signature to be verified (check 12)."""

    value: dict[str, Any]
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
    event = copy.value
    if copy.non_canonical is not None:
        return Reason.NON_CANONICAL_JSON
    if event.get("schema_version") != "1.0":
        return Reason.UNSUPPORTED_SCHEMA_VERSION
    created_us = _schema_instant(event)
    if created_us is None:
        return Reason.MALFORMED
    content = event["content_sha256"]
    if event["event_id"] != "sha256:" + content:
        return Reason.EVENT_ID_MISMATCH
    # A C-level copy, then the three keys out (all present: the schema check saw every key).
    body = dict(event)
    for name in NOT_IN_BODY:
        del body[name]
    if hashlib.sha256(encode_canonical_unchecked(body)).hexdigest() != content:
        return Reason.CONTENT_HASH_MISMATCH
    if event["subject_pith_number"] != subject:
        return Reason.WRONG_SUBJECT
    kind = EVENT_TYPES.get(event["event_type"])
    if kind is None:
        return Reason.UNKNOWN_EVENT_TYPE
    if event["target"] != kind[0]:
        return Reason.TARGET_MISMATCH
    signer, signature = event["signer"], event["signature"]
    key = keys.get(signer["key_id"])
    if key is None:
        return Reason.UNKNOWN_KEY
    if (
        signature["key_id"] != signer["key_id"]
        or signer["public_key_fingerprint"] != key.fingerprint_hex
        or signature["public_key_fingerprint"] != key.fingerprint_hex
    ):
        return Reason.KEY_MISMATCH
    if (
        signature["algorithm"] != "ed25519"
        or signature["signed_message"] != "open_graph_event_sha256_bytes"
        or signature["signature_status"] != "signed_v1"
    ):
        return Reason.UNSUPPORTED_SIGNATURE
    raw_signature = decode_b64(signature["signature_b64"])
    if raw_signature is not None and len(raw_signature) != 64:
        raw_signature = None
    return Candidate(event, key, bytes.fromhex(content), raw_signature, created_us)


def postcheck(candidate: Candidate, keys: KeySet, verifier: SignatureVerifier) -> Reason | ValidEvent:
    """Checks 12–16 of §6; a copy that passes them all is a :class:`ValidEvent`."""
    job = candidate.signature_job
    if job is None or not verifier.verify(*job):
        return Reason.BAD_SIGNATURE
    event, key = candidate.value, candidate.key
    if key.rotates_at_us is not None and candidate.created_us >= key.rotates_at_us:
        return Reason.KEY_EXPIRED
    event_type, payload = event["event_type"], event["payload"]
    if event_type == "record_created":
        if event["prev_event"] is not None or event["supersedes"]:
            return Reason.RECORD_NOT_GENESIS
        if not _record_payload_ok(payload, event["subject_pith_number"]):
            return Reason.BAD_PAYLOAD
        if not _receipt_ok(payload, keys, verifier):
            return Reason.BAD_RECEIPT
    elif event_type == "graph_snapshot" and not isinstance(payload.get("graph_snapshot"), dict):
        return Reason.BAD_PAYLOAD
    return ValidEvent(
        event_id=event["event_id"],
        event_type=event_type,
        target=event["target"],
        created_at=event["created_at"],
        created_us=candidate.created_us,
        prev_event=event["prev_event"],
        supersedes=tuple(event["supersedes"]),
        signer=event["signer"],
        payload=payload,
    )


_ONLY_STR: Final = frozenset({str})
# The top-level fields of §4 that must be strings (exactly str: a FloatLiteral is a number).
_STRING_FIELDS: Final = ("event_type", "subject_pith_number", "target", "content_sha256", "created_at")


def _is_str(value: Any) -> TypeGuard[str]:
    # Exactly str: a FloatLiteral (a str subclass) is a number, not a string.
    return type(value) is str


def _schema_instant(event: dict[str, Any]) -> int | None:
    """Return the ``created_at`` instant when every rule of §4 holds, else ``None``."""
    if event.keys() != EVENT_KEYS:
        return None
    signer, signature = event["signer"], event["signature"]
    # Type tests inline and in C (map, issuperset): this runs once per event (docs/performance.md).
    if not (
        type(signer) is dict
        and type(signature) is dict
        and type(event["payload"]) is dict
        and signer.keys() == SIGNER_KEYS
        and signature.keys() == SIGNATURE_KEYS
        and _ONLY_STR.issuperset(map(type, signer.values()))
        and _ONLY_STR.issuperset(map(type, signature.values()))
        and _ONLY_STR.issuperset(map(type, map(event.__getitem__, _STRING_FIELDS)))
        and _HEX32(signer["public_key_fingerprint"])
        and _HEX64(event["content_sha256"])
    ):
        return None
    prev = event["prev_event"]
    if prev is not None and not (_is_str(prev) and _EVENT_ID(prev)):
        return None
    supersedes = event["supersedes"]
    if type(supersedes) is not list:
        return None
    if supersedes:
        if not all(_is_str(item) and _EVENT_ID(item) for item in supersedes):
            return None
        if len(set(supersedes)) != len(supersedes) or event["event_id"] in supersedes:
            return None
    return parse_timestamp(event["created_at"])


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
