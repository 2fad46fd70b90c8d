"""The stateless checks of spec §6 (merge.checks): each reason on purpose, and their order.

Every broken event here is built from a valid signed one with exactly one rule broken; it is
re-hashed and re-signed whenever the rule allows, so the reason seen is THE reason: every
earlier check passes. The pairwise test then breaks two rules at once and expects the earlier.
"""

from __future__ import annotations

import base64
import copy
import itertools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from merge import canonical_json, pith_number
from merge.canonical import canonical_sha256_hex
from merge.checks import EVENT_TYPES
from merge.reasons import CHECK_ORDER, Reason
from merge.signing import TestKey, seal_event, sign_event, signed_receipt

from .builders import (
    KEY_A,
    KEY_B,
    KEY_EXPIRING,
    KEY_STRANGER,
    RECORD,
    ROTATES_AT,
    SUBJECT,
    body_of,
    event,
    reason_of,
    record_event,
    record_payload,
    resealed,
    run,
)

Event = dict[str, Any]
Change = Callable[[Event], Any]
OTHER_ID = "sha256:" + "ab" * 32
KEY_BY_ID = {key.key_id: key for key in (KEY_A, KEY_B, KEY_EXPIRING, KEY_STRANGER)}


def test_check_order_is_the_spec_table() -> None:
    """§6: the 16 checks in the table's order, with the table's strings."""
    assert [str(reason) for reason in CHECK_ORDER] == [
        "non_canonical_json",
        "unsupported_schema_version",
        "malformed",
        "event_id_mismatch",
        "content_hash_mismatch",
        "wrong_subject",
        "unknown_event_type",
        "target_mismatch",
        "unknown_key",
        "key_mismatch",
        "unsupported_signature",
        "bad_signature",
        "key_expired",
        "record_not_genesis",
        "bad_payload",
        "bad_receipt",
    ]
    assert [reason.rank for reason in CHECK_ORDER] == list(range(16))
    assert all(reason.stateless and reason.section == "§6" for reason in CHECK_ORDER)
    chain_rules = [reason for reason in Reason if reason not in CHECK_ORDER]
    assert [str(r) for r in chain_rules] == [
        "missing_prev",
        "invalid_prev",
        "prev_wrong_chain",
        "created_before_prev",
        "equivocation",
    ]
    assert all(not r.stateless and r.section == "§7" and r.rank == 16 for r in chain_rules)


@pytest.mark.parametrize("event_type", sorted(EVENT_TYPES))
def test_every_event_type_of_the_table_applies(event_type: str) -> None:
    made = record_event() if event_type == "record_created" else event(event_type)
    assert made["target"] == EVENT_TYPES[event_type][0]
    assert reason_of(made) is None


# --- One fault per check. A fault is (stage, change): "body" changes are made before the event
# is hashed and signed (so checks 4, 5 and 12 still pass), "sealed" changes after it, on the
# finished event. The base event is a valid record_created, so checks 14-16 can fire too.


def _set(path: str, value: Any) -> Change:
    def change(target: Event) -> None:
        *parents, last = path.split(".")
        for part in parents:
            target = target[part]
        target[last] = value

    return change


def _tamper_payload(target: Event) -> None:
    target["payload"]["tampered"] = True


def _flip_signature(target: Event) -> None:
    raw = bytearray(base64.b64decode(target["signature"]["signature_b64"]))
    raw[0] ^= 1
    target["signature"]["signature_b64"] = base64.b64encode(bytes(raw)).decode()


def _expiring_signer(target: Event) -> None:
    target["signer"]["key_id"] = KEY_EXPIRING.key_id
    target["signer"]["public_key_fingerprint"] = KEY_EXPIRING.fingerprint
    target["created_at"] = ROTATES_AT  # at rotates_at exactly: expired (>=)


FAULTS: dict[Reason, tuple[str, Change]] = {
    # A float in an already-parsed input (a JSON text with 0.5 behaves the same, see below).
    Reason.NON_CANONICAL_JSON: ("sealed", _set("payload.weight", 0.5)),
    Reason.UNSUPPORTED_SCHEMA_VERSION: ("body", _set("schema_version", "1.1")),
    Reason.MALFORMED: ("body", _set("created_at", "2026-02-30T00:00:00Z")),
    Reason.EVENT_ID_MISMATCH: ("sealed", _set("event_id", "sha256:" + "0" * 64)),
    Reason.CONTENT_HASH_MISMATCH: ("sealed", _tamper_payload),
    Reason.WRONG_SUBJECT: ("body", _set("subject_pith_number", "pith:2024:AAAAAAAAAAAAAAAAAAAAAAAAAA")),
    Reason.UNKNOWN_EVENT_TYPE: ("body", _set("event_type", "comment")),
    Reason.TARGET_MISMATCH: ("body", _set("target", "graph")),
    Reason.UNKNOWN_KEY: ("body", _set("signer.key_id", KEY_STRANGER.key_id)),
    Reason.KEY_MISMATCH: ("body", _set("signer.public_key_fingerprint", KEY_B.fingerprint)),
    Reason.UNSUPPORTED_SIGNATURE: ("sealed", _set("signature.algorithm", "ed448")),
    Reason.BAD_SIGNATURE: ("sealed", _flip_signature),
    Reason.KEY_EXPIRED: ("body", _expiring_signer),
    Reason.RECORD_NOT_GENESIS: ("body", _set("prev_event", OTHER_ID)),
    Reason.BAD_PAYLOAD: ("body", _set("payload.source_id", "2405.99999")),
    Reason.BAD_RECEIPT: ("body", _set("payload.receipt.kind", "receipt")),
}


def with_faults(*reasons: Reason) -> Event:
    """A record_created with the faults of ``reasons``; where two touch one field, the earlier wins."""
    body = body_of(record_event())
    # Later checks' changes first, so an earlier check's change is the one left standing.
    ordered = sorted(reasons, key=lambda reason: reason.rank, reverse=True)
    for reason in ordered:
        stage, change = FAULTS[reason]
        if stage == "body":
            change(body)
    key = KEY_BY_ID[body["signer"]["key_id"]]
    sealed = seal_event(key, body, signed_at="2026-07-05T06:00:00Z")
    for reason in ordered:
        stage, change = FAULTS[reason]
        if stage == "sealed":
            change(sealed)
    return sealed


def test_the_unbroken_base_applies() -> None:
    assert reason_of(with_faults()) is None


@pytest.mark.parametrize("reason", CHECK_ORDER, ids=str)
def test_each_check_alone_gives_its_reason(reason: Reason) -> None:
    assert reason_of(with_faults(reason)) is reason


@pytest.mark.parametrize(("first", "second"), list(itertools.combinations(CHECK_ORDER, 2)), ids=str)
def test_the_first_failing_check_is_the_reason(first: Reason, second: Reason) -> None:
    assert reason_of(with_faults(first, second)) is first


# --- The rules behind each reason, one case per rule.


@pytest.mark.parametrize("number", ["0.5", "1.0", "1e2", "1E400", "-0.0", str(2**53), str(-(2**53))])
def test_non_canonical_json_from_text_inputs(number: str) -> None:
    """A float (any fraction or exponent, even 1E400 that no float holds) or an unsafe integer."""
    made = event()
    text = canonical_json(made)
    assert run([text]).reasons == {}
    changed = text.replace(b'"n":1', b'"n":' + number.encode())
    assert changed != text
    result = run([changed])
    assert not result.rejected
    assert result.reasons == {made["event_id"]: Reason.NON_CANONICAL_JSON}


def test_safe_integer_bounds_are_canonical() -> None:
    for number in (2**53 - 1, -(2**53 - 1)):
        assert reason_of(event(payload={"n": number})) is None


def test_missing_schema_version_is_unsupported() -> None:
    made = event()
    del made["schema_version"]
    assert reason_of(made) is Reason.UNSUPPORTED_SCHEMA_VERSION


MALFORMED_BODY: dict[str, Change] = {
    "extra key": _set("extra", 1),
    "event_type not a string": _set("event_type", 7),
    "subject not a string": _set("subject_pith_number", None),
    "target not a string": _set("target", ["mirror"]),
    "payload not an object": _set("payload", [1]),
    "signer not an object": _set("signer", "pith.science"),
    "signer extra key": _set("signer.extra", "x"),
    "signer_id not a string": _set("signer.signer_id", True),
    "signer_type not a string": _set("signer.signer_type", 1),
    "fingerprint upper case": _set("signer.public_key_fingerprint", KEY_A.fingerprint.upper()),
    "fingerprint too short": _set("signer.public_key_fingerprint", KEY_A.fingerprint[:31]),
    "created_at not a string": _set("created_at", 1767225600),
    "created_at not a date": _set("created_at", "2025-02-29T00:00:00Z"),
    "created_at leap second": _set("created_at", "2026-06-30T23:59:60Z"),
    "created_at lower-case z": _set("created_at", "2026-07-05T06:00:00z"),
    "created_at trailing newline": _set("created_at", "2026-07-05T06:00:00Z\n"),
    "created_at no offset": _set("created_at", "2026-07-05T06:00:00"),
    "supersedes not a list": _set("supersedes", OTHER_ID),
    "supersedes holds a non-id": _set("supersedes", ["sha256:" + "AB" * 32]),
    "supersedes holds a duplicate": _set("supersedes", [OTHER_ID, OTHER_ID]),
    "prev_event not an id": _set("prev_event", "sha256:abc"),
    "prev_event with a newline": _set("prev_event", OTHER_ID + "\n"),
    "prev_event a number": _set("prev_event", 0),
}


@pytest.mark.parametrize("name", sorted(MALFORMED_BODY))
def test_malformed_body(name: str) -> None:
    assert reason_of(resealed(event(), MALFORMED_BODY[name])) is Reason.MALFORMED


def _delete(path: str) -> Change:
    def change(target: Event) -> None:
        *parents, last = path.split(".")
        for part in parents:
            target = target[part]
        del target[last]

    return change


MALFORMED_SEALED: dict[str, Change] = {
    "no supersedes": _delete("supersedes"),
    "no signature": _delete("signature"),
    "no content_sha256": _delete("content_sha256"),
    "signature not an object": _set("signature", None),
    "signature extra key": _set("signature.extra", "x"),
    "signature missing signed_at": _delete("signature.signed_at"),
    "signature field not a string": _set("signature.signed_at", None),
    "content_sha256 upper case": lambda e: e.update(content_sha256=e["content_sha256"].upper()),
    "content_sha256 with newline": lambda e: e.update(content_sha256=e["content_sha256"] + "\n"),
    # The event's own id cannot be in the body it hashes (a fixed point of SHA-256), yet an
    # event claiming it is malformed before its id is even compared (check 3 before 4).
    "supersedes its own id": lambda e: e.update(supersedes=[e["event_id"]]),
}


@pytest.mark.parametrize("name", sorted(MALFORMED_SEALED))
def test_malformed_after_sealing(name: str) -> None:
    made = event()
    MALFORMED_SEALED[name](made)
    assert reason_of(made) is Reason.MALFORMED


def test_content_hash_mismatch_with_consistent_claim() -> None:
    """event_id == "sha256:" + content_sha256, both naming a hash the body does not have."""
    made = event()
    made["content_sha256"] = "f" * 64
    made["event_id"] = "sha256:" + "f" * 64
    assert reason_of(made) is Reason.CONTENT_HASH_MISMATCH


def test_body_hash_ignores_only_the_three_keys() -> None:
    """The signature object is outside the body: changing signed_at keeps the event valid."""
    made = event()
    made["signature"]["signed_at"] = "2030-01-01T00:00:00Z"
    assert reason_of(made) is None


def test_wrong_subject_even_when_valid_for_its_own_subject() -> None:
    other = event(subject="pith:2024:BBBBBBBBBBBBBBBBBBBBBBBBBB")
    assert reason_of(other) is Reason.WRONG_SUBJECT


def test_unknown_event_type_and_target_mismatch() -> None:
    assert reason_of(event("comment")) is Reason.UNKNOWN_EVENT_TYPE
    for event_type, (target, _) in EVENT_TYPES.items():
        wrong = "graph" if target != "graph" else "record"
        assert reason_of(event(event_type, target=wrong)) is Reason.TARGET_MISMATCH, event_type


def test_unknown_key_signed_by_a_stranger() -> None:
    assert reason_of(event(key=KEY_STRANGER)) is Reason.UNKNOWN_KEY


KEY_MISMATCHES: dict[str, Change] = {
    "signature key_id": _set("signature.key_id", KEY_B.key_id),
    "signature fingerprint": _set("signature.public_key_fingerprint", KEY_B.fingerprint),
}


@pytest.mark.parametrize("name", sorted(KEY_MISMATCHES))
def test_key_mismatch_in_signature(name: str) -> None:
    made = event()
    KEY_MISMATCHES[name](made)
    assert reason_of(made) is Reason.KEY_MISMATCH


def test_key_mismatch_in_signer() -> None:
    wrong = resealed(event(), _set("signer.public_key_fingerprint", "0" * 32))
    assert reason_of(wrong) is Reason.KEY_MISMATCH


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("algorithm", "Ed25519"),
        ("signed_message", "canonical_sha256_bytes"),
        ("signature_status", "unsigned"),
    ],
)
def test_unsupported_signature(field: str, value: str) -> None:
    made = event()
    made["signature"][field] = value
    assert reason_of(made) is Reason.UNSUPPORTED_SIGNATURE


def _signature_b64(made: Event) -> bytes:
    return base64.b64decode(made["signature"]["signature_b64"])


BAD_SIGNATURES: dict[str, Callable[[Event], str]] = {
    "not base64": lambda e: "not base64!",
    "63 bytes": lambda e: base64.b64encode(_signature_b64(e)[:63]).decode(),
    "65 bytes": lambda e: base64.b64encode(_signature_b64(e) + b"\0").decode(),
    "no padding": lambda e: e["signature"]["signature_b64"].rstrip("="),
    "with a newline": lambda e: e["signature"]["signature_b64"] + "\n",
    "url-safe alphabet": lambda e: base64.urlsafe_b64encode(b"\xfb\xff" * 32).decode(),
    "signed by another key": lambda e: KEY_B.sign_digest(e["content_sha256"]),
    "over another digest": lambda e: KEY_A.sign_digest("0" * 64),
    "all zero": lambda e: base64.b64encode(bytes(64)).decode(),
}


@pytest.mark.parametrize("name", sorted(BAD_SIGNATURES))
def test_bad_signature(name: str) -> None:
    made = event()
    made["signature"]["signature_b64"] = BAD_SIGNATURES[name](made)
    assert reason_of(made) is Reason.BAD_SIGNATURE


def test_non_canonical_s_is_a_bad_signature() -> None:
    """S + L (the group order) verifies in lax Ed25519, never in libsodium (§2)."""
    made = event()
    raw = _signature_b64(made)
    order = 2**252 + 27742317777372353535851937790883648493
    s_plus_l = (int.from_bytes(raw[32:], "little") + order).to_bytes(32, "little")
    made["signature"]["signature_b64"] = base64.b64encode(raw[:32] + s_plus_l).decode()
    assert reason_of(made) is Reason.BAD_SIGNATURE


@pytest.mark.parametrize(
    ("created_at", "expired"),
    [
        ("2026-07-31T23:59:59.999999Z", False),
        ("2026-08-01T00:00:00Z", True),
        ("2026-08-01T00:00:00.000001Z", True),
        # The same instants with offsets: compared as instants, not as strings (§4).
        ("2026-08-01T01:59:59.999999+02:00", False),
        ("2026-08-01T02:00:00+02:00", True),
        ("2026-07-31T22:00:00-02:00", True),
        ("2026-07-31T21:59:59-02:00", False),
    ],
)
def test_key_expired_compares_instants(created_at: str, expired: bool) -> None:
    made = event(key=KEY_EXPIRING, created_at=created_at)
    assert reason_of(made) is (Reason.KEY_EXPIRED if expired else None)


def test_key_without_rotation_never_expires() -> None:
    assert reason_of(event(created_at="9999-12-31T23:59:59Z")) is None


@pytest.mark.parametrize(
    "fields", [{"prev_event": OTHER_ID}, {"supersedes": [OTHER_ID]}], ids=["prev_event", "supersedes"]
)
def test_record_not_genesis(fields: dict[str, Any]) -> None:
    assert reason_of(record_event(**fields)) is Reason.RECORD_NOT_GENESIS


def _payload_change(change: Change) -> dict[str, Any]:
    payload = record_payload()
    change(payload)
    return payload


BAD_RECORD_PAYLOADS: dict[str, Change] = {
    "no canonical_record": _delete("canonical_record"),
    "canonical_record not an object": _set("canonical_record", []),
    "canonical_sha256 wrong": _set("canonical_sha256", "0" * 64),
    "canonical_sha256 missing": _delete("canonical_sha256"),
    "source_id differs": _set("source_id", "2405.00002"),
    "source_id missing": _delete("source_id"),
    "source_kind differs": _set("source_kind", "doi"),
    "source_version differs": _set("source_version", 2),
    "source_version a string": _set("source_version", "1"),
    # version 1 == True in Python; JSON true is no integer (§4).
    "source_version true": _set("source_version", True),
    "attestation_state missing": _delete("attestation_state"),
    "attestation_state not a string": _set("attestation_state", 1),
}


@pytest.mark.parametrize("name", sorted(BAD_RECORD_PAYLOADS))
def test_bad_record_payload(name: str) -> None:
    payload = _payload_change(BAD_RECORD_PAYLOADS[name])
    assert reason_of(record_event(payload=payload)) is Reason.BAD_PAYLOAD


def _record_with(change: Change) -> Event:
    """A record_created for a changed canonical record, with a valid receipt for it."""
    record = copy.deepcopy(RECORD)
    change(record)
    payload = record_payload()
    payload["canonical_record"] = record
    payload["canonical_sha256"] = canonical_sha256_hex(record)
    payload["receipt"] = signed_receipt(KEY_A, record, signed_at="2026-07-05T05:49:24Z")
    return record_event(payload=payload)


@pytest.mark.parametrize(
    ("name", "change"),
    [
        # The record hashes to another pith number than the subject it claims (§8).
        ("another record", _set("metadata.primary_cat", "cs.AI")),
        ("no submitted_at", _delete("metadata.submitted_at")),
        ("submitted_at too short", _set("metadata.submitted_at", "202")),
        ("source not an object", _set("source", "arxiv:2405.00001")),
        ("source version true", _set("source.version", True)),
    ],
)
def test_bad_payload_record_subject_and_source(name: str, change: Change) -> None:
    assert reason_of(_record_with(change)) is Reason.BAD_PAYLOAD


def test_pith_number_year_comes_from_submitted_at() -> None:
    """§2: YYYY is the first 4 characters of metadata.submitted_at; the hash part must match too."""
    record = copy.deepcopy(RECORD)
    record["metadata"]["submitted_at"] = "2025-05-01T12:00:00Z"
    subject = pith_number(record)
    assert subject.startswith("pith:2025:")
    payload = record_payload()
    payload["canonical_record"] = record
    payload["canonical_sha256"] = canonical_sha256_hex(record)
    payload["receipt"] = signed_receipt(KEY_A, record, signed_at="2026-07-05T05:49:24Z")
    assert reason_of(record_event(payload=payload, subject=subject), subject=subject) is None
    wrong_year = "pith:2024:" + subject.removeprefix("pith:2025:")
    made = record_event(payload=payload, subject=wrong_year)
    assert reason_of(made, subject=wrong_year) is Reason.BAD_PAYLOAD


def test_record_payload_may_hold_extra_keys() -> None:
    payload = record_payload()
    payload["note"] = {"anything": ["goes"]}
    assert reason_of(record_event(payload=payload)) is None


@pytest.mark.parametrize(
    "payload",
    [{}, {"graph_snapshot": None}, {"graph_snapshot": []}, {"graph_snapshot": "x"}, {"snapshot": {}}],
)
def test_bad_payload_graph_snapshot(payload: dict[str, Any]) -> None:
    assert reason_of(event("graph_snapshot", payload=payload)) is Reason.BAD_PAYLOAD


def test_other_types_take_any_object() -> None:
    assert reason_of(event("graph_snapshot", payload={"graph_snapshot": {}})) is None
    for event_type in sorted(set(EVENT_TYPES) - {"record_created", "graph_snapshot"}):
        assert reason_of(event(event_type, payload={})) is None, event_type


def _receipt_change(change: Change, *, resign: TestKey | None = None) -> Event:
    payload = record_payload()
    change(payload["receipt"])
    if resign is not None:
        payload["receipt"]["signature_b64"] = resign.sign_digest(payload["canonical_sha256"])
    return record_event(payload=payload)


BAD_RECEIPTS: dict[str, Callable[[], Event]] = {
    "kind": lambda: _receipt_change(_set("kind", "pith_receipt_v2")),
    "algorithm": lambda: _receipt_change(_set("algorithm", "ed448")),
    "signed_message": lambda: _receipt_change(_set("signed_message", "bundle_sha256_bytes")),
    "signature_status": lambda: _receipt_change(_set("signature_status", "unsigned")),
    "canonical_sha256 differs": lambda: _receipt_change(_set("canonical_sha256", "0" * 64)),
    "canonical_sha256 missing": lambda: _receipt_change(_delete("canonical_sha256")),
    "key not in the key set": lambda: _receipt_change(
        lambda r: r.update(key_id=KEY_STRANGER.key_id, public_key_fingerprint=KEY_STRANGER.fingerprint),
        resign=KEY_STRANGER,
    ),
    "fingerprint not the key's": lambda: _receipt_change(_set("public_key_fingerprint", KEY_B.fingerprint)),
    "signed by another key": lambda: _receipt_change(lambda r: None, resign=KEY_B),
    "signature over another digest": lambda: _receipt_change(
        _set("signature_b64", KEY_A.sign_digest("0" * 64))
    ),
    "signature not base64": lambda: _receipt_change(_set("signature_b64", "****")),
    "signature missing": lambda: _receipt_change(_delete("signature_b64")),
    "receipt missing": lambda: record_event(payload=_payload_change(_delete("receipt"))),
    "receipt not an object": lambda: record_event(payload=_payload_change(_set("receipt", "signed"))),
}


@pytest.mark.parametrize("name", sorted(BAD_RECEIPTS))
def test_bad_receipt(name: str) -> None:
    assert reason_of(BAD_RECEIPTS[name]()) is Reason.BAD_RECEIPT


def test_receipt_by_another_key_of_the_set_is_fine() -> None:
    """The receipt key need not be the event's signer: any key of the set (§8)."""
    made = _receipt_change(
        lambda r: r.update(key_id=KEY_B.key_id, public_key_fingerprint=KEY_B.fingerprint), resign=KEY_B
    )
    assert made["signer"]["key_id"] == KEY_A.key_id
    assert reason_of(made) is None


def test_receipt_key_past_its_rotation_still_verifies() -> None:
    """§8 asks only that the receipt key is in the set; rotates_at limits event signers (§6 #13)."""
    made = _receipt_change(
        lambda r: r.update(key_id=KEY_EXPIRING.key_id, public_key_fingerprint=KEY_EXPIRING.fingerprint),
        resign=KEY_EXPIRING,
    )
    assert reason_of(made) is None


def test_signed_events_of_every_signer_are_independent() -> None:
    """Two keys' events of one type both apply: each key has its own chain (§7)."""
    first, second = event(key=KEY_A), event(key=KEY_B)
    assert reason_of(first, second) is None
    assert reason_of(second, first) is None


def test_sign_event_rejects_nothing_itself() -> None:
    """The builder signs whatever it is given: the checks, not the signer, judge it."""
    made = sign_event(KEY_A, event_type="comment", subject=SUBJECT, payload={}, created_at="x")
    assert made["target"] == "comment"
    assert reason_of(made) is Reason.MALFORMED


DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_every_reason_is_documented() -> None:
    """docs/reason-codes.md has a row per reason; docs/merge-v1.md lists §6 in check order."""
    codes = (DOCS / "reason-codes.md").read_text("utf-8")
    for reason in Reason:
        assert f"| `{reason}` |" in codes, reason
    rules = (DOCS / "merge-v1.md").read_text("utf-8")
    rows = re.findall(r"^\| (\d+) \| `([a-z_]+)` \|", rules, flags=re.MULTILINE)
    assert rows == [(str(i + 1), str(reason)) for i, reason in enumerate(CHECK_ORDER)]
