"""Making signed events, receipts and bundles (merge.signing): what the vectors' producer did."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from nacl.signing import SigningKey

from merge import KeySet, bundle_sha256, canonical_json, event_id, fingerprint_hex, pith_number, verify_bundle
from merge.signatures import verify_signature
from merge.signing import TestKey, record_created_payload, seal_event, sign_bundle, sign_event, signed_receipt

from .builders import KEY_A, KEYS, RECORD, SPEC_EVENT_KEYS, SUBJECT, reason_of, run
from .conftest import load_vector


def test_test_keys_are_the_vectors_keys() -> None:
    vector_keys = load_vector("every_reason")["keys"]
    for name, key_object in zip(("A", "B", "expiring"), vector_keys, strict=True):
        rotates_at = key_object["rotates_at"]
        key = TestKey(f"merge-v1 vector key {name}", f"test-{name}", rotates_at=rotates_at)
        assert key.key_object() == key_object
    assert vector_keys == KEYS


def test_a_key_is_sha256_of_its_seed() -> None:
    key = TestKey(b"seed bytes", "k")
    assert key.public_key == bytes(SigningKey(hashlib.sha256(b"seed bytes").digest()).verify_key)
    assert TestKey("seed bytes", "k").public_key == key.public_key
    assert key.fingerprint == fingerprint_hex(key.public_key)
    KeySet.parse([key.key_object()])


def test_sign_digest_signs_the_raw_digest_bytes() -> None:
    digest = hashlib.sha256(b"message").hexdigest()
    signature = base64.b64decode(KEY_A.sign_digest(digest))
    assert verify_signature(KEY_A.public_key, bytes.fromhex(digest), signature)
    assert not verify_signature(KEY_A.public_key, digest.encode(), signature)
    assert KEY_A.sign_digest(digest) == KEY_A.sign_digest(digest)  # Ed25519 is deterministic


def test_sign_event_makes_a_valid_event() -> None:
    made = sign_event(
        KEY_A, event_type="mirror_hint", subject=SUBJECT, payload={"u": 1}, created_at="2026-07-05T06:00:00Z"
    )
    assert set(made) == SPEC_EVENT_KEYS
    assert made["target"] == "mirror"
    assert made["event_id"] == event_id(made) == "sha256:" + made["content_sha256"]
    assert made["signature"]["signed_at"] == made["created_at"]
    assert reason_of(made) is None


def test_sign_event_copies_its_arguments() -> None:
    payload = {"nested": {"a": 1}}
    supersedes = ["sha256:" + "a" * 64]
    made = sign_event(
        KEY_A,
        event_type="correction",
        subject=SUBJECT,
        payload=payload,
        created_at="2026-07-05T06:00:00Z",
        supersedes=supersedes,
    )
    made["supersedes"].append("x")
    made["payload"]["b"] = 2
    assert supersedes == ["sha256:" + "a" * 64]
    assert payload == {"nested": {"a": 1}}


def test_vector_events_are_reproduced_by_resealing() -> None:
    """Every valid vector event signed by test-A comes out byte for byte from seal_event."""
    vector = load_vector("all_types")
    count = 0
    for text in vector["inputs"]:
        original = json.loads(text)
        if original["signature"]["key_id"] != "test-A":
            continue
        resealed = seal_event(KEY_A, original, signed_at=original["signature"]["signed_at"])
        assert canonical_json(resealed) == canonical_json(original)
        count += 1
    assert count >= 2


def test_record_created_payload_and_receipt() -> None:
    subject, payload = record_created_payload(KEY_A, RECORD, signed_at="2026-07-05T05:49:24Z")
    assert subject == pith_number(RECORD) == SUBJECT
    receipt = payload["receipt"]
    assert receipt == signed_receipt(KEY_A, RECORD, signed_at="2026-07-05T05:49:24Z")
    digest = payload["canonical_sha256"]
    assert receipt["canonical_sha256"] == digest
    assert verify_signature(
        KEY_A.public_key, bytes.fromhex(digest), base64.b64decode(receipt["signature_b64"])
    )
    assert (payload["source_id"], payload["source_kind"], payload["source_version"]) == (
        "2405.00001",
        "arxiv",
        1,
    )
    assert payload["canonical_record"] == RECORD
    assert payload["canonical_record"] is not RECORD


def test_sign_bundle_replaces_the_signature(golden_bundle: dict[str, Any]) -> None:
    signed = sign_bundle(KEY_A, golden_bundle, signed_at="2026-08-14T00:00:00Z")
    signature = signed["bundle_signature"]
    assert signature["bundle_sha256"] == bundle_sha256(golden_bundle) == bundle_sha256(signed)
    assert signature["key_id"] == "test-A"
    assert signature["public_key_fingerprint"] == KEY_A.fingerprint
    assert verify_bundle(signed, trusted_keys=[KEY_A.key_object()]).ok
    assert golden_bundle["bundle_signature"]["key_id"] == "pith-v1-2026-05"  # not mutated


def test_a_history_from_the_builders_folds_deterministically() -> None:
    subject, payload = record_created_payload(KEY_A, RECORD, signed_at="2026-07-05T05:49:24Z")
    record = sign_event(
        KEY_A,
        event_type="record_created",
        subject=subject,
        payload=payload,
        created_at="2026-07-05T06:00:00Z",
    )
    again = sign_event(
        KEY_A,
        event_type="record_created",
        subject=subject,
        payload=payload,
        created_at="2026-07-05T06:00:00Z",
    )
    assert record == again
    assert run([record]).state_sha256 == run([again, record]).state_sha256
