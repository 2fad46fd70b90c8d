"""Identifiers of spec §2 (merge.identifiers), checked against both golden files.

The expected values are the registry's own, read from the golden files; the code computes
them from the records, events, keys and states those files hold.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from typing import Any

import pytest

from merge import (
    RecordError,
    b32,
    bundle_sha256,
    canonical_json,
    content_sha256,
    event_body,
    event_id,
    fingerprint_b32,
    fingerprint_hex,
    fold,
    pith_number,
    short_pith_number,
    state_sha256,
)
from merge.identifiers import EVENT_ID_PATTERN, EVENT_ID_PREFIX, HEX64_PATTERN, derived_pith_number
from merge.signatures import verify_signature
from merge.signing import sign_event

from .builders import KEY_A, SUBJECT, record_payload, run

REGISTRY_KEY_ID = "pith-v1-2026-05"


def _reference_hash(value: Any) -> str:
    """H(v) with the spec's reference encoder (§1), independent of msgspec."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _registry_key(golden_bundle: dict[str, Any]) -> bytes:
    (key,) = [k for k in golden_bundle["public_keys"] if k["key_id"] == REGISTRY_KEY_ID]
    return base64.b64decode(key["public_key_b64"])


@pytest.mark.parametrize(
    ("hex_digest", "expected"),
    [
        ("", ""),
        ("66", "MY"),  # RFC 4648 §10: BASE32("f") = "MY======", padding dropped
        ("666f", "MZXQ"),
        ("666f6f", "MZXW6"),
        ("666f6f62", "MZXW6YQ"),
        ("666f6f6261", "MZXW6YTB"),
        ("666f6f626172", "MZXW6YTBOI"),
    ],
)
def test_b32_is_rfc4648_upper_case_without_padding(hex_digest: str, expected: str) -> None:
    assert b32(hex_digest) == expected


def test_b32_of_a_sha256_is_52_characters() -> None:
    digest = hashlib.sha256(b"pith").hexdigest()
    assert len(b32(digest)) == 52
    assert b32(digest) == base64.b32encode(bytes.fromhex(digest)).decode().rstrip("=")
    assert b32(digest.upper()) == b32(digest)  # bytes.fromhex reads either case


# --- First golden file: the bundle.


def test_golden_bundle_record_identifiers(golden_bundle: dict[str, Any]) -> None:
    record = golden_bundle["canonical_record"]
    digest = _reference_hash(record)
    assert digest == golden_bundle["canonical_sha256"]
    assert pith_number(record) == golden_bundle["pith_number"]
    assert short_pith_number(digest) == golden_bundle["short_pith_number"]
    assert golden_bundle["pith_number"] == f"pith:{record['metadata']['submitted_at'][:4]}:{b32(digest)[:26]}"


def test_golden_bundle_event_ids(golden_bundle: dict[str, Any]) -> None:
    for event in golden_bundle["events"]:
        body = event_body(event)
        assert set(event) - set(body) == {"signature", "content_sha256", "event_id"}
        assert content_sha256(event) == event["content_sha256"] == _reference_hash(body)
        assert event_id(event) == event["event_id"] == "sha256:" + event["content_sha256"]
        assert EVENT_ID_PATTERN.fullmatch(event["event_id"])


def test_golden_bundle_event_signatures(golden_bundle: dict[str, Any]) -> None:
    """Event signatures are over the 32 raw bytes of content_sha256 (§2), by the registry key."""
    public_key = _registry_key(golden_bundle)
    for event in golden_bundle["events"]:
        signature = base64.b64decode(event["signature"]["signature_b64"])
        digest = bytes.fromhex(event["content_sha256"])
        assert verify_signature(public_key, digest, signature)
        assert not verify_signature(public_key, event["content_sha256"].encode(), signature)


def test_golden_key_fingerprints(golden_bundle: dict[str, Any]) -> None:
    for key in golden_bundle["public_keys"]:
        raw = base64.b64decode(key["public_key_b64"])
        assert raw.hex() == key["public_key_hex"]
        assert fingerprint_hex(raw) == key["fingerprint_sha256_hex"]
        assert fingerprint_b32(raw) == key["fingerprint_sha256_b32_first128bits"]
        for event in golden_bundle["events"]:
            assert event["signer"]["public_key_fingerprint"] == fingerprint_hex(raw)


def test_golden_state_and_bundle_hashes(golden_bundle: dict[str, Any]) -> None:
    state = golden_bundle["state"]
    assert state_sha256(state) == state["state_sha256"]
    assert state_sha256(state) == _reference_hash({k: v for k, v in state.items() if k != "state_sha256"})
    claimed = golden_bundle["bundle_signature"]["bundle_sha256"]
    assert bundle_sha256(golden_bundle) == claimed
    signature = base64.b64decode(golden_bundle["bundle_signature"]["signature_b64"])
    assert verify_signature(_registry_key(golden_bundle), bytes.fromhex(claimed), signature)


def test_state_and_bundle_hashes_leave_out_only_their_own_key(golden_bundle: dict[str, Any]) -> None:
    state = copy.deepcopy(golden_bundle["state"])
    before = state_sha256(state)
    state["state_sha256"] = "anything"
    assert state_sha256(state) == before
    state["valid_event_count"] += 1
    assert state_sha256(state) != before
    bundle = copy.deepcopy(golden_bundle)
    before = bundle_sha256(bundle)
    del bundle["bundle_signature"]
    assert bundle_sha256(bundle) == before
    bundle["built_at"] = "2026-08-14T00:32:52Z"
    assert bundle_sha256(bundle) != before


# --- Second golden file: a record view (no events) with a receipt.


def test_golden_record_pith_numbers(golden_record: dict[str, Any]) -> None:
    record = golden_record["canonical_record"]
    digest = _reference_hash(record)
    assert digest == golden_record["canonical_sha256"] == golden_record["receipt"]["canonical_sha256"]
    assert pith_number(record) == golden_record["pith_number"]
    assert short_pith_number(digest) == golden_record["short_pith_number"]
    # The links name the pith number by its 26-character hash part.
    assert golden_record["links"]["html"].endswith("/" + golden_record["pith_number"].split(":")[2])


def _receipt_verifies(receipt: dict[str, Any], public_key: bytes) -> bool:
    try:
        signature = base64.b64decode(receipt["signature_b64"], validate=True)
    except ValueError:
        return False
    return verify_signature(public_key, bytes.fromhex(receipt["canonical_sha256"]), signature)


def test_golden_record_receipt_verifies(golden_record: dict[str, Any], golden_bundle: dict[str, Any]) -> None:
    receipt = golden_record["receipt"]
    public_key = _registry_key(golden_bundle)
    assert receipt["key_id"] == REGISTRY_KEY_ID
    assert receipt["public_key_fingerprint"] == fingerprint_hex(public_key)
    assert _receipt_verifies(receipt, public_key)
    assert not _receipt_verifies(receipt, KEY_A.public_key)


@pytest.mark.parametrize("field", ["canonical_sha256", "signature_b64"])
@pytest.mark.parametrize("position", [0, 17, -3])
def test_golden_record_receipt_fails_when_altered(
    golden_record: dict[str, Any], golden_bundle: dict[str, Any], field: str, position: int
) -> None:
    receipt = copy.deepcopy(golden_record["receipt"])
    text = receipt[field]
    index = position % len(text)
    alphabet = "0123456789abcdef" if field == "canonical_sha256" else "ABCDEFGH"
    replacement = (
        alphabet[(alphabet.index(text[index]) + 1) % len(alphabet)] if text[index] in alphabet else "A"
    )
    receipt[field] = text[:index] + replacement + text[index + 1 :]
    assert receipt[field] != text
    assert not _receipt_verifies(receipt, _registry_key(golden_bundle))


def test_golden_record_receipt_in_a_fold(
    golden_record: dict[str, Any], golden_bundle: dict[str, Any]
) -> None:
    """The registry's real receipt inside a record_created signed by test key A (§8): valid
    with the registry key in the key set, bad_receipt when it is altered or the key is missing."""
    record = golden_record["canonical_record"]
    subject = golden_record["pith_number"]
    payload = {
        "canonical_record": record,
        "canonical_sha256": golden_record["canonical_sha256"],
        "receipt": golden_record["receipt"],
        "source_id": record["source"]["id"],
        "source_kind": record["source"]["kind"],
        "source_version": record["source"]["version"],
        "attestation_state": golden_record["attestation_state"],
    }
    made = sign_event(
        KEY_A,
        event_type="record_created",
        subject=subject,
        payload=payload,
        created_at="2026-07-05T04:52:36Z",
    )
    keys = [KEY_A.key_object(), *golden_bundle["public_keys"]]
    result = fold([made], subject=subject, keys=keys, threads=1)
    assert result.state.applied_event_ids == (made["event_id"],)
    # §9 aliases derived from this record are the registry's (kind and value; the time is the event's).
    derived = [(a.alias_kind, a.alias_value) for a in result.state.current.source_aliases]
    published = sorted((a["alias_kind"], a["alias_value"]) for a in golden_record["aliases"])
    assert derived == published

    without_registry = fold([made], subject=subject, keys=[KEY_A.key_object()], threads=1)
    assert without_registry.reasons == {made["event_id"]: "bad_receipt"}
    altered = copy.deepcopy(payload)
    altered["receipt"]["signature_b64"] = base64.b64encode(bytes(64)).decode()
    remade = sign_event(
        KEY_A,
        event_type="record_created",
        subject=subject,
        payload=altered,
        created_at="2026-07-05T04:52:36Z",
    )
    assert fold([remade], subject=subject, keys=keys, threads=1).reasons == {
        remade["event_id"]: "bad_receipt"
    }


# --- The rules on made-up values.


def test_event_body_leaves_out_exactly_three_keys() -> None:
    event = {"a": 1, "signature": {}, "content_sha256": "x", "event_id": "y", "payload": {}}
    assert event_body(event) == {"a": 1, "payload": {}}
    assert "signature" in event  # not mutated


def test_content_hash_changes_with_the_body_only() -> None:
    made = sign_event(
        KEY_A, event_type="mirror_hint", subject=SUBJECT, payload={}, created_at="2026-07-05T06:00:00Z"
    )
    same = dict(made, signature={}, content_sha256="0" * 64, event_id="sha256:" + "0" * 64)
    assert content_sha256(same) == content_sha256(made)
    assert content_sha256(dict(made, created_at="2026-07-05T06:00:01Z")) != content_sha256(made)


def test_pith_number_rules() -> None:
    payload = record_payload()
    record = payload["canonical_record"]
    digest = payload["canonical_sha256"]
    assert pith_number(record) == SUBJECT == f"pith:2024:{b32(digest)[:26]}"
    assert short_pith_number(digest) == f"pith:{b32(digest)[:8]}"
    # Only the first 4 characters of submitted_at count, whatever follows them.
    odd = copy.deepcopy(record)
    odd["metadata"]["submitted_at"] = "1999"
    assert pith_number(odd).startswith("pith:1999:")
    assert pith_number(odd) != pith_number(record)
    # Keys order does not matter: the hash is over canonical JSON.
    reordered = dict(reversed(list(record.items())))
    assert pith_number(reordered) == pith_number(record)


@pytest.mark.parametrize(
    "record",
    [
        {},
        {"metadata": None},
        {"metadata": {}},
        {"metadata": {"submitted_at": 2024}},
        {"metadata": {"submitted_at": "202"}},
    ],
)
def test_pith_number_needs_submitted_at(record: dict[str, Any]) -> None:
    with pytest.raises(RecordError, match="submitted_at") as caught:
        pith_number(record)
    assert "submitted_at" in caught.value.problem


def test_fingerprints_of_the_test_key() -> None:
    raw = KEY_A.public_key
    digest = hashlib.sha256(raw).digest()
    assert fingerprint_hex(raw) == digest[:16].hex() == KEY_A.fingerprint
    assert len(fingerprint_hex(raw)) == 32
    assert fingerprint_b32(raw) == base64.b32encode(digest).decode()[:26]


def test_state_hash_of_a_fold_is_the_spec_rule() -> None:
    result = run([])
    state = json.loads(canonical_json(result.state))
    assert (
        result.state_sha256
        == state["state_sha256"]
        == _reference_hash({k: v for k, v in state.items() if k != "state_sha256"})
    )


def test_derived_pith_number_is_none_without_a_year_and_else_the_record_s() -> None:
    record = record_payload()["canonical_record"]
    digest = record_payload()["canonical_sha256"]
    assert derived_pith_number(record, digest) == pith_number(record) == SUBJECT
    short = copy.deepcopy(record)
    short["metadata"]["submitted_at"] = "202"
    assert derived_pith_number(short, digest) is None
    assert derived_pith_number("not a record", digest) is None


def test_the_event_id_pattern_is_the_prefix_and_a_sha256_digest() -> None:
    digest = hashlib.sha256(b"x").hexdigest()
    assert HEX64_PATTERN.fullmatch(digest)
    assert EVENT_ID_PATTERN.fullmatch(EVENT_ID_PREFIX + digest)
    assert not EVENT_ID_PATTERN.fullmatch(EVENT_ID_PREFIX + digest.upper())
    assert not EVENT_ID_PATTERN.fullmatch(EVENT_ID_PREFIX + digest + "\n")
    assert not EVENT_ID_PATTERN.fullmatch("sha512:" + digest)
