"""Making signed events, receipts and bundles (spec §2): for tests, fuzzers and examples.

Producers of real events use the same rules; pith-merge itself only verifies. Everything
here is deterministic (Ed25519 signing is), so generated histories are reproducible.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, Required, TypedDict, Unpack

import msgspec
from nacl.signing import SigningKey

from .batch import fold
from .canonical import canonical_sha256_hex, encode_canonical_unchecked
from .checks import EVENT_TYPES
from .identifiers import (
    ALGORITHM,
    BUNDLE_SIGNED_MESSAGE,
    EVENT_ID_PREFIX,
    EVENT_SIGNED_MESSAGE,
    RECEIPT_KIND,
    RECEIPT_SIGNED_MESSAGE,
    SIGNATURE_STATUS,
    event_body,
    fingerprint_hex,
    pith_number,
    short_pith_number,
)
from .keys import Key

__all__ = [
    "EventFields",
    "TestKey",
    "make_bundle",
    "record_created_payload",
    "seal_event",
    "sign_bundle",
    "sign_event",
    "signed_receipt",
    "unsigned_event",
]


class TestKey:
    """A signing key with its key id, derived from a seed: ``SigningKey(sha256(seed))``.

    ``TestKey("merge-v1 vector key A", "test-A")`` is the conformance vectors' key ``A``.
    """

    __test__ = False  # not a pytest test class
    __slots__ = ("fingerprint", "key_id", "rotates_at", "signing_key")

    def __init__(self, seed: str | bytes, key_id: str, rotates_at: str | None = None) -> None:
        raw_seed = seed.encode() if isinstance(seed, str) else seed
        self.signing_key = SigningKey(hashlib.sha256(raw_seed).digest())
        self.key_id = key_id
        self.rotates_at = rotates_at
        self.fingerprint = fingerprint_hex(self.public_key)

    @property
    def public_key(self) -> bytes:
        """The raw 32-byte public key."""
        return bytes(self.signing_key.verify_key)

    def key_object(self) -> dict[str, Any]:
        """This key as an entry of a key set (spec §3)."""
        key = Key(
            key_id=self.key_id,
            public_key=self.public_key,
            fingerprint_hex=self.fingerprint,
            rotates_at=self.rotates_at,
        )
        return key.as_json()

    def sign_digest(self, hex_digest: str) -> str:
        """Base64 Ed25519 signature over the 32 raw bytes of a SHA-256 hex digest."""
        signature = self.signing_key.sign(bytes.fromhex(hex_digest)).signature
        return base64.b64encode(signature).decode("ascii")


def unsigned_event(
    key: TestKey,
    *,
    event_type: str,
    subject: str,
    payload: Mapping[str, Any],
    created_at: str,
    prev_event: str | None = None,
    supersedes: Sequence[str] = (),
    target: str | None = None,
    signer_id: str = "pith.science",
    signer_type: str = "pith_registry",
) -> dict[str, Any]:
    """The body of an event of schema 1.0 (spec §4) signed by ``key``, before :func:`seal_event`.

    ``target`` defaults to the §8 target of ``event_type``.
    """
    if target is None:
        target = EVENT_TYPES[event_type][0] if event_type in EVENT_TYPES else event_type
    return {
        "event_type": event_type,
        "subject_pith_number": subject,
        "target": target,
        "payload": dict(payload),
        "signer": {
            "signer_id": signer_id,
            "signer_type": signer_type,
            "key_id": key.key_id,
            "public_key_fingerprint": key.fingerprint,
        },
        "created_at": created_at,
        "supersedes": list(supersedes),
        "prev_event": prev_event,
        "schema_version": "1.0",
    }


class EventFields(TypedDict, total=False):
    """The fields :func:`sign_event` takes, as :func:`unsigned_event` names them."""

    event_type: Required[str]
    subject: Required[str]
    payload: Required[Mapping[str, Any]]
    created_at: Required[str]
    prev_event: str | None
    supersedes: Sequence[str]
    target: str | None
    signer_id: str
    signer_type: str


def sign_event(
    key: TestKey, *, signed_at: str | None = None, **fields: Unpack[EventFields]
) -> dict[str, Any]:
    """A signed event of schema 1.0 (spec §4), with ``content_sha256`` and ``event_id``: the body
    :func:`unsigned_event` makes of ``fields``, sealed at ``signed_at`` (default: ``created_at``).

    ``target`` defaults to the §8 target of ``event_type``.
    """
    body = unsigned_event(key, **fields)
    return seal_event(key, body, signed_at=signed_at or fields["created_at"])


def _signature(key: TestKey, signed_message: str, digest: str, signed_at: str) -> dict[str, Any]:
    """A v1 signature object by ``key`` over the 32 bytes of ``digest`` (spec §2)."""
    return {
        "signature_status": SIGNATURE_STATUS,
        "algorithm": ALGORITHM,
        "key_id": key.key_id,
        "public_key_fingerprint": key.fingerprint,
        "signature_b64": key.sign_digest(digest),
        "signed_message": signed_message,
        "signed_at": signed_at,
    }


def seal_event(
    key: TestKey, body: Mapping[str, Any], *, signed_at: str, content_sha256: str | None = None
) -> dict[str, Any]:
    """Add ``signature``, ``content_sha256`` and ``event_id`` to an event body (spec §2).

    ``content_sha256``: the hash to claim and sign instead of ``H(body)``; for making events
    whose body is not canonical-able (``H`` is then undefined) or whose claim is wrong.
    """
    content = canonical_sha256_hex(event_body(body)) if content_sha256 is None else content_sha256
    event = dict(event_body(body))
    event["signature"] = _signature(key, EVENT_SIGNED_MESSAGE, content, signed_at)
    event["content_sha256"] = content
    event["event_id"] = EVENT_ID_PREFIX + content
    return event


def signed_receipt(key: TestKey, canonical_record: Mapping[str, Any], *, signed_at: str) -> dict[str, Any]:
    """A ``pith_receipt`` over ``H(canonical_record)`` (spec §8)."""
    digest = canonical_sha256_hex(canonical_record)
    # The fields in the registry's order (the vectors keep it: their JSON is not canonical).
    return {
        "kind": RECEIPT_KIND,
        "key_id": key.key_id,
        "algorithm": ALGORITHM,
        "signed_at": signed_at,
        "signature_b64": key.sign_digest(digest),
        "signed_message": RECEIPT_SIGNED_MESSAGE,
        "canonical_sha256": digest,
        "signature_status": SIGNATURE_STATUS,
        "public_key_fingerprint": key.fingerprint,
    }


def record_created_payload(
    key: TestKey, canonical_record: Mapping[str, Any], *, signed_at: str
) -> tuple[str, dict[str, Any]]:
    """``(subject, payload)`` of a valid ``record_created`` for ``canonical_record`` (§8)."""
    source = canonical_record["source"]
    payload = {
        "canonical_record": dict(canonical_record),
        "canonical_sha256": canonical_sha256_hex(canonical_record),
        "receipt": signed_receipt(key, canonical_record, signed_at=signed_at),
        "source_id": source["id"],
        "source_kind": source["kind"],
        "source_version": source["version"],
        "attestation_state": "computed",
    }
    return pith_number(canonical_record), payload


def sign_bundle(key: TestKey, bundle: Mapping[str, Any], *, signed_at: str) -> dict[str, Any]:
    """The bundle with a ``bundle_signature`` over ``bundle_sha256`` (spec §2, §10)."""
    unsigned = {k: v for k, v in bundle.items() if k != "bundle_signature"}
    digest = canonical_sha256_hex(unsigned)
    return {
        **unsigned,
        "bundle_signature": {
            **_signature(key, BUNDLE_SIGNED_MESSAGE, digest, signed_at),
            "bundle_sha256": digest,
        },
    }


def make_bundle(
    key: TestKey,
    canonical_record: Mapping[str, Any],
    events: Sequence[Any],
    *,
    public_keys: Sequence[Mapping[str, Any]],
    built_at: str,
    signed_at: str | None = None,
) -> dict[str, Any]:
    """A bundle of ``events`` that verifies (spec §10) once ``key`` is trusted.

    Its state is the fold of ``events`` with ``public_keys``, and ``key`` signs it at
    ``signed_at`` (default ``built_at``).
    """
    subject = pith_number(canonical_record)
    state = fold(events, subject=subject, keys=public_keys, threads=1).state
    digest = canonical_sha256_hex(canonical_record)
    bundle = {
        "bundle_type": "pith_open_graph_bundle",
        "bundle_version": "1.0",
        "pith_number": subject,
        "short_pith_number": short_pith_number(digest),
        "canonical_record": dict(canonical_record),
        "canonical_sha256": digest,
        "source": canonical_record["source"],
        "source_aliases": msgspec.json.decode(msgspec.json.encode(state.current.source_aliases)),
        "events": list(events),
        "public_keys": [dict(k) for k in public_keys],
        "merge_version": state.merge_version,
        "built_at": built_at,
        "state": msgspec.json.decode(encode_canonical_unchecked(state)),
    }
    return sign_bundle(key, bundle, signed_at=signed_at or built_at)
