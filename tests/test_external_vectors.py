"""Third-party vectors (tests/vectors/external, see its README): Ed25519 and canonical JSON.

Signatures are pinned to libsodium: every Wycheproof, RFC 8032, CCTV and PyNaCl case goes through
:func:`merge.signatures.verify_signature` (the engine's one verification function) and through
:class:`~merge.signatures.SignatureVerifier` (its cache and thread pool). Events sign a 32-byte
digest, not the cases' arbitrary messages, so the fold path is exercised by events that carry the
cases' keys and signatures (spec §6 check 12: they must end as ``bad_signature``), by events signed
with the RFC 8032 secret keys (they must apply), and by malleated copies of valid event signatures.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from nacl.signing import SigningKey

from merge import KeySetError, NotCanonicalError, Reason, canonical_json, fingerprint_hex, fold
from merge.admission import RejectCode, Rejection, admit
from merge.canonical import decode_json
from merge.identifiers import content_sha256
from merge.keys import KeySet
from merge.signatures import SignatureVerifier, verify_signature
from merge.signing import TestKey, sign_event

EXTERNAL = Path(__file__).parent / "vectors" / "external"
SUBJECT = "pith:2024:EXTERNALVECTORSAAAAAAAAAAAAA"
#: Order of the Ed25519 group (RFC 8032 §5.1): S must be < L (libsodium rejects S >= L).
GROUP_ORDER = 2**252 + 27742317777372353535851937790883648493


def load(relative: str) -> Any:
    return json.loads((EXTERNAL / relative).read_text("utf-8"))


# ---------------------------------------------------------------------------------------------
# Vector files and the engine's event path
# ---------------------------------------------------------------------------------------------

WYCHEPROOF = load("wycheproof/ed25519_test.json")
WYCHEPROOF_CASES = [
    (group["publicKey"]["pk"], case) for group in WYCHEPROOF["testGroups"] for case in group["tests"]
]
CCTV = load("cctv/ed25519vectors.json")
CCTV_ACCEPTED = frozenset(load("cctv/pynacl_1.6.2_accepts.json")["accepted_numbers"])
RFC8032 = load("rfc8032/rfc8032_7_1_ed25519.json")["vectors"]
PYNACL_LINES = (EXTERNAL / "pynacl" / "ed25519_sign.sample.input").read_text("ascii").splitlines()


def key_object(key_id: str, public_key: bytes) -> dict[str, Any]:
    """A key set entry (spec §3) for a raw public key, fingerprints filled in."""
    return {
        "key_id": key_id,
        "algorithm": "ed25519",
        "public_key_b64": base64.b64encode(public_key).decode("ascii"),
        "fingerprint_sha256_hex": fingerprint_hex(public_key),
    }


def unsigned_event(key_id: str, public_key: bytes, note: str) -> dict[str, Any]:
    """A well-formed event by ``key_id`` whose ``signature_b64`` is still to be filled in."""
    fingerprint = fingerprint_hex(public_key)
    event: dict[str, Any] = {
        "event_type": "mirror_hint",
        "subject_pith_number": SUBJECT,
        "target": "mirror",
        "payload": {"note": note},
        "signer": {
            "signer_id": "external-vectors",
            "signer_type": "test",
            "key_id": key_id,
            "public_key_fingerprint": fingerprint,
        },
        "created_at": "2024-05-01T00:00:00Z",
        "supersedes": [],
        "prev_event": None,
        "schema_version": "1.0",
    }
    digest = content_sha256(event)
    event["signature"] = {
        "signature_status": "signed_v1",
        "algorithm": "ed25519",
        "key_id": key_id,
        "public_key_fingerprint": fingerprint,
        "signature_b64": "",
        "signed_message": "open_graph_event_sha256_bytes",
        "signed_at": "2024-05-01T00:00:00Z",
    }
    event["content_sha256"] = digest
    event["event_id"] = "sha256:" + digest
    return event


def with_signature(event: dict[str, Any], signature: bytes) -> dict[str, Any]:
    """The event with ``signature_b64`` replaced (outside the body: the event id is unchanged)."""
    signed = json.loads(json.dumps(event))
    signed["signature"]["signature_b64"] = base64.b64encode(signature).decode("ascii")
    return signed


def fold_reasons(events: list[dict[str, Any]], keys: list[dict[str, Any]]) -> dict[str, Reason | None]:
    """``event_id`` → reason (``None`` when applied), folding the events as JSON texts."""
    result = fold([canonical_json(event) for event in events], subject=SUBJECT, keys=keys, threads=1)
    assert result.rejected == ()
    reasons: dict[str, Reason | None] = dict.fromkeys(result.state.applied_event_ids)
    reasons.update(result.reasons)
    assert len(reasons) == result.state.event_count
    return reasons


# ---------------------------------------------------------------------------------------------
# Ed25519: Wycheproof
# ---------------------------------------------------------------------------------------------


def test_wycheproof_file_is_the_described_one() -> None:
    assert len(WYCHEPROOF_CASES) == WYCHEPROOF["numberOfTests"] == 151
    results = [case["result"] for _, case in WYCHEPROOF_CASES]
    assert (results.count("valid"), results.count("invalid")) == (88, 63)


@pytest.mark.parametrize(
    ("public_key", "case"), WYCHEPROOF_CASES, ids=[f"tc{case['tcId']}" for _, case in WYCHEPROOF_CASES]
)
def test_wycheproof_verify_signature(public_key: str, case: dict[str, Any]) -> None:
    verdict = verify_signature(
        bytes.fromhex(public_key), bytes.fromhex(case["msg"]), bytes.fromhex(case["sig"])
    )
    assert verdict is (case["result"] == "valid"), case["flags"]


def test_wycheproof_through_the_parallel_verifier() -> None:
    """The thread-pool path gives libsodium's verdict on every case (and caches it)."""
    jobs = [
        (bytes.fromhex(pk), bytes.fromhex(case["msg"]), bytes.fromhex(case["sig"]))
        for pk, case in WYCHEPROOF_CASES
    ]
    verifier = SignatureVerifier(threads=2)
    verifier.prefetch(jobs)
    verdicts = [verifier.verify(*job) for job in jobs]
    assert verdicts == [case["result"] == "valid" for _, case in WYCHEPROOF_CASES]


def test_wycheproof_keys_and_signatures_in_events_are_bad_signature() -> None:
    """Every case's key in the key set, its signature on an event: §6 check 12 fails for all.

    The valid ones too: a signature over another message must never verify over an event's
    digest. Truncated signatures and signatures with garbage are not 64 bytes and fail there.
    """
    keys, events = {}, []
    for number, (public_key, case) in enumerate(WYCHEPROOF_CASES):
        raw = bytes.fromhex(public_key)
        key_id = f"wycheproof-{public_key[:16]}"
        keys[key_id] = key_object(key_id, raw)
        event = unsigned_event(key_id, raw, f"tcId {case['tcId']} #{number}")
        events.append(with_signature(event, bytes.fromhex(case["sig"])))
    reasons = fold_reasons(events, list(keys.values()))
    assert len(reasons) == len(WYCHEPROOF_CASES)
    assert set(reasons.values()) == {Reason.BAD_SIGNATURE}


@pytest.mark.parametrize("size", [0, 31, 33, 64])
def test_wycheproof_key_of_the_wrong_size_is_a_key_set_error(size: int) -> None:
    public_key = bytes.fromhex(WYCHEPROOF_CASES[0][0])
    raw = (public_key * 2)[:size]
    with pytest.raises(KeySetError) as caught:
        KeySet.parse([key_object("wrong-size", raw)])
    assert caught.value.field == "public_key_b64"
    assert caught.value.index == 0


# ---------------------------------------------------------------------------------------------
# Ed25519: RFC 8032 §7.1 and PyNaCl's sign.input (known answers, with secret keys)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("vector", RFC8032, ids=[vector["name"] for vector in RFC8032])
def test_rfc8032_known_answers(vector: dict[str, str]) -> None:
    signing_key = SigningKey(bytes.fromhex(vector["secret_key"]))
    public_key, message = bytes.fromhex(vector["public_key"]), bytes.fromhex(vector["message"])
    assert bytes(signing_key.verify_key) == public_key
    assert signing_key.sign(message).signature == bytes.fromhex(vector["signature"])
    assert verify_signature(public_key, message, bytes.fromhex(vector["signature"]))
    assert not verify_signature(public_key, message + b"\x00", bytes.fromhex(vector["signature"]))


def test_rfc8032_keys_sign_events_that_apply() -> None:
    """Events signed with the RFC 8032 secret keys apply; with the RFC's own signatures they do not."""
    keys, good, foreign = [], [], []
    for vector in RFC8032:
        signing_key = SigningKey(bytes.fromhex(vector["secret_key"]))
        public_key = bytes(signing_key.verify_key)
        key_id = f"rfc8032-{vector['name']}"
        keys.append(key_object(key_id, public_key))
        event = unsigned_event(key_id, public_key, vector["name"])
        digest = bytes.fromhex(event["content_sha256"])
        good.append(with_signature(event, signing_key.sign(digest).signature))
        other = unsigned_event(key_id, public_key, vector["name"] + " (the RFC's signature)")
        foreign.append(with_signature(other, bytes.fromhex(vector["signature"])))
    reasons = fold_reasons(good + foreign, keys)
    assert [reasons[event["event_id"]] for event in good] == [None] * len(RFC8032)
    assert [reasons[event["event_id"]] for event in foreign] == [Reason.BAD_SIGNATURE] * len(RFC8032)


def test_pynacl_sample_is_deterministic_subset() -> None:
    """The sample holds lines 1-4, every 16th line and line 1024 of upstream (see the README)."""
    assert len(PYNACL_LINES) == 68
    lengths = [len(bytes.fromhex(line.split(":")[2])) for line in PYNACL_LINES]
    assert lengths[:4] == [0, 1, 2, 3]
    assert lengths[4:] == [n - 1 for n in range(16, 1025, 16)]


@pytest.mark.parametrize("line", PYNACL_LINES, ids=[f"line{n}" for n in range(len(PYNACL_LINES))])
def test_pynacl_sign_input_known_answers(line: str) -> None:
    secret_and_public, public_hex, message_hex, signed_hex, _ = line.split(":")
    public_key, message = bytes.fromhex(public_hex), bytes.fromhex(message_hex)
    signature = bytes.fromhex(signed_hex)[:64]
    assert bytes.fromhex(signed_hex)[64:] == message
    signing_key = SigningKey(bytes.fromhex(secret_and_public)[:32])
    assert bytes(signing_key.verify_key) == public_key
    assert signing_key.sign(message).signature == signature
    assert verify_signature(public_key, message, signature)
    tampered = bytearray(signature)
    tampered[0] ^= 1
    assert not verify_signature(public_key, message, bytes(tampered))


# ---------------------------------------------------------------------------------------------
# Ed25519: CCTV edge cases (small order, non-canonical encodings, mixed order)
# ---------------------------------------------------------------------------------------------


def test_cctv_every_case_agrees_with_libsodium() -> None:
    """PyNaCl 1.6.2 accepts exactly the 43 listed cases and rejects the other 871."""
    assert len(CCTV) == 914
    jobs = [(bytes.fromhex(c["key"]), c["msg"].encode("utf-8"), bytes.fromhex(c["sig"])) for c in CCTV]
    accepted = {case["number"] for case, job in zip(CCTV, jobs, strict=True) if verify_signature(*job)}
    assert accepted == CCTV_ACCEPTED
    verifier = SignatureVerifier(threads=2)
    verifier.prefetch(jobs)
    assert {case["number"] for case, job in zip(CCTV, jobs, strict=True) if verifier.verify(*job)} == accepted


def test_cctv_keys_are_32_bytes_so_the_key_set_takes_them() -> None:
    """§3 checks length and encoding only: small-order keys enter a key set, then never verify."""
    raw_keys = {bytes.fromhex(case["key"]) for case in CCTV}
    key_set = KeySet.parse([key_object(f"cctv-{n}", raw) for n, raw in enumerate(sorted(raw_keys))])
    assert len(key_set) == len(raw_keys)


def test_cctv_keys_and_signatures_in_events_are_bad_signature() -> None:
    """One event per distinct CCTV key, carrying one of that key's signatures: all bad_signature."""
    first_case: dict[str, dict[str, Any]] = {}
    for case in CCTV:
        first_case.setdefault(case["key"], case)
    keys, events = [], []
    for number, case in enumerate(first_case.values()):
        raw = bytes.fromhex(case["key"])
        keys.append(key_object(f"cctv-{number}", raw))
        event = unsigned_event(f"cctv-{number}", raw, f"cctv {case['number']}")
        events.append(with_signature(event, bytes.fromhex(case["sig"])))
    assert len(events) > 10
    reasons = fold_reasons(events, keys)
    assert set(reasons.values()) == {Reason.BAD_SIGNATURE}


# Small-order points (RFC 8032 encodings of the identity and of 2-torsion): keys a forger might
# hope verify "anything". libsodium refuses them.
SMALL_ORDER_KEYS = [
    bytes(32),
    bytes([1]) + bytes(31),
    bytes(31) + b"\x80",
    bytes([0xEC]) + b"\xff" * 30 + b"\x7f",
]


@pytest.mark.parametrize("public_key", SMALL_ORDER_KEYS, ids=lambda raw: raw.hex()[:8])
def test_small_order_key_never_verifies_an_event(public_key: bytes) -> None:
    """A key set holding a small-order key: neither zero nor identity-like signatures pass."""
    event = unsigned_event("small", public_key, public_key.hex())
    identity = bytes([1]) + bytes(31)
    attempts = [bytes(64), identity + bytes(32), public_key + bytes(32)]
    events = [with_signature(event, signature) for signature in attempts]
    result = fold(
        [canonical_json(copy) for copy in events],
        subject=SUBJECT,
        keys=[key_object("small", public_key)],
        threads=1,
    )
    assert result.reasons == {event["event_id"]: Reason.BAD_SIGNATURE}
    assert result.state.valid_event_count == 0


# ---------------------------------------------------------------------------------------------
# Malleability through the fold: our own valid signatures, altered as Wycheproof does
# ---------------------------------------------------------------------------------------------

MALLEATE = TestKey("merge-v1 external vectors", "test-malleate")


def _malleated(signature: bytes) -> dict[str, bytes]:
    r, s = signature[:32], int.from_bytes(signature[32:], "little")
    variants = {f"S+{k}L": r + (s + k * GROUP_ORDER).to_bytes(32, "little") for k in (1, 2, 4, 8)}
    variants["S=0"] = r + bytes(32)
    variants["S=L"] = r + GROUP_ORDER.to_bytes(32, "little")
    variants["R=0"] = bytes(32) + signature[32:]
    variants["R high bit"] = r[:31] + bytes([r[31] ^ 0x80]) + signature[32:]
    variants["truncated"] = signature[:63]
    variants["garbage"] = signature + b"\x00"
    variants["empty"] = b""
    return variants


def test_malleated_event_signatures_are_bad_signature_and_cannot_mask_the_valid_copy() -> None:
    event = sign_event(
        MALLEATE,
        event_type="mirror_hint",
        subject=SUBJECT,
        payload={"url": "https://example.org/"},
        created_at="2024-05-01T00:00:00Z",
    )
    signature = base64.b64decode(event["signature"]["signature_b64"])
    variants = _malleated(signature)
    keys = [MALLEATE.key_object()]
    for name, altered in variants.items():
        assert not verify_signature(MALLEATE.public_key, bytes.fromhex(event["content_sha256"]), altered), (
            name
        )
        result = fold([canonical_json(with_signature(event, altered))], subject=SUBJECT, keys=keys, threads=1)
        assert result.reasons == {event["event_id"]: Reason.BAD_SIGNATURE}, name
    # §5: copies of one event id are judged one by one; the valid copy wins whatever the others say.
    copies = [canonical_json(with_signature(event, altered)) for altered in variants.values()]
    result = fold([*copies, canonical_json(event)], subject=SUBJECT, keys=keys, threads=1)
    assert result.state.applied_event_ids == (event["event_id"],)
    assert result.state.invalid_event_count == 0


def test_signature_in_non_strict_base64_is_bad_signature() -> None:
    """§4: strict RFC 4648 base64 only; URL-safe letters, whitespace or no padding do not decode."""
    event = sign_event(
        MALLEATE, event_type="mirror_hint", subject=SUBJECT, payload={}, created_at="2024-05-01T00:00:00Z"
    )
    encoded = event["signature"]["signature_b64"]
    raw = base64.b64decode(encoded)
    forms = [
        base64.urlsafe_b64encode(raw).decode("ascii"),
        encoded.rstrip("="),
        encoded[:10] + "\n" + encoded[10:],
        " " + encoded,
    ]
    forms = [form for form in forms if form != encoded]
    assert len(forms) >= 3
    for form in forms:
        copy = json.loads(json.dumps(event))
        copy["signature"]["signature_b64"] = form
        result = fold([canonical_json(copy)], subject=SUBJECT, keys=[MALLEATE.key_object()], threads=1)
        assert result.reasons == {event["event_id"]: Reason.BAD_SIGNATURE}, form


# ---------------------------------------------------------------------------------------------
# Canonical JSON: JCS (RFC 8785) test data under our rules
# ---------------------------------------------------------------------------------------------

JCS_CASES = load("jcs-cyberphone/codepoint_expected.json")["cases"]


@pytest.mark.parametrize("case", JCS_CASES, ids=[Path(case["input"]).stem for case in JCS_CASES])
def test_jcs_cases(case: dict[str, Any]) -> None:
    text = (EXTERNAL / "jcs-cyberphone" / case["input"]).read_bytes()
    jcs_output = (EXTERNAL / "jcs-cyberphone" / case["jcs_output"]).read_bytes()
    value = decode_json(text)
    if case["expect"] == "reject":
        # A float anywhere: not canonical-able (§1), and an event holding it is non_canonical_json.
        with pytest.raises(NotCanonicalError):
            canonical_json(value)
        admitted = admit({"event_id": "sha256:" + "0" * 64, "payload": value})
        assert not isinstance(admitted, Rejection)
        assert admitted.non_canonical is not None
        return
    expected = bytes.fromhex(case["canonical_utf8_hex"])
    assert canonical_json(value) == expected
    assert canonical_json(json.loads(text)) == expected
    if case["same_as_jcs"]:
        assert expected == jcs_output
    else:
        # Only key order differs: JCS sorts by UTF-16 code units, we by code point (§1).
        assert expected != jcs_output
        assert sorted(expected) == sorted(jcs_output)
        assert decode_json(jcs_output) == value
        keys = list(decode_json(expected))
        assert keys == sorted(keys)
        assert list(decode_json(jcs_output)) != keys


def test_jcs_utf16_order_differs_exactly_on_the_astral_key() -> None:
    value = decode_json((EXTERNAL / "jcs-cyberphone" / "input" / "weird.json").read_bytes())
    ours = list(decode_json(canonical_json(value)))
    assert ours.index("\ufb33") < ours.index("\U0001f602")
    utf16 = sorted(value, key=lambda key: key.encode("utf-16-be"))
    assert utf16.index("\U0001f602") < utf16.index("\ufb33")
    assert [key for key in ours if key not in ("\ufb33", "\U0001f602")] == [
        key for key in utf16 if key not in ("\ufb33", "\U0001f602")
    ]


# ---------------------------------------------------------------------------------------------
# Canonical JSON: matrix-org/python-canonicaljson and the Matrix spec appendix
# ---------------------------------------------------------------------------------------------

MATRIX_CASES = load("canonicaljson-matrix/cases.json")
MATRIX_SPEC = load("matrix-spec/appendix_vectors.json")


@pytest.mark.parametrize("case", MATRIX_CASES["encode_cases"], ids=lambda case: case["name"][:40])
def test_matrix_canonicaljson_encode(case: dict[str, str]) -> None:
    expected = bytes.fromhex(case["expect_utf8_hex"])
    assert canonical_json(decode_json(case["value_json"])) == expected
    assert canonical_json(json.loads(case["value_json"])) == expected


@pytest.mark.parametrize("case", MATRIX_CASES["reject_cases"], ids=lambda case: case["name"])
def test_matrix_canonicaljson_rejects_non_finite(case: dict[str, str]) -> None:
    with pytest.raises(NotCanonicalError):
        canonical_json(float(case["value_json_like"]))
    # As text it is not even JSON: an input holding it is rejected at admission (§5).
    text = '{"event_id":"sha256:' + "0" * 64 + '","x":' + case["value_json_like"] + "}"
    rejection = admit(text.encode("ascii"))
    assert isinstance(rejection, Rejection)
    assert rejection.code is RejectCode.NOT_JSON
    # Parsed by a lenient parser first, it is still refused: a float is never canonical-able.
    admitted = admit(json.loads(text))
    assert not isinstance(admitted, Rejection)
    assert admitted.non_canonical is not None


@pytest.mark.parametrize(
    "example",
    MATRIX_SPEC["canonical_json_examples"],
    ids=[f"example{n}" for n in range(len(MATRIX_SPEC["canonical_json_examples"]))],
)
def test_matrix_spec_canonical_examples(example: dict[str, str]) -> None:
    assert canonical_json(decode_json(example["input"])) == example["expected"].encode("utf-8")


def test_matrix_spec_number_edge_is_refused_not_normalised() -> None:
    """Matrix turns ``1e10`` into ``10000000000``; merge-v1 refuses the float (§1). ``-0`` is 0."""
    edge = MATRIX_SPEC["canonical_json_number_edge"]
    with pytest.raises(NotCanonicalError) as caught:
        canonical_json(decode_json(edge["input"]))
    assert caught.value.path == "/b"
    assert canonical_json(decode_json('{"a":-0}')) == b'{"a":0}'


def _unpadded_b64(text: str) -> bytes:
    return base64.b64decode(text + "=" * (-len(text) % 4))


@pytest.mark.parametrize(
    "vector",
    MATRIX_SPEC["json_signing"],
    ids=[f"signing{n}" for n in range(len(MATRIX_SPEC["json_signing"]))],
)
def test_matrix_spec_json_signing(vector: dict[str, Any]) -> None:
    """Matrix signs CJ(object): our CJ bytes and our verifier reproduce its signatures."""
    seed = _unpadded_b64(MATRIX_SPEC["signing_key_seed_b64"])
    public_key = _unpadded_b64(MATRIX_SPEC["public_key_b64"])
    assert bytes(SigningKey(seed).verify_key) == public_key
    message = canonical_json(vector["object"])
    signature = _unpadded_b64(vector["signature"])
    assert SigningKey(seed).sign(message).signature == signature
    assert verify_signature(public_key, message, signature)


def test_matrix_spec_event_content_hashes() -> None:
    """SHA-256 of CJ(event minus unsigned/signatures/hashes): Matrix's analogue of our content hash."""
    for vector in MATRIX_SPEC["event_signing"]:
        body = {
            k: v for k, v in vector["input_event"].items() if k not in ("unsigned", "signatures", "hashes")
        }
        digest = hashlib.sha256(canonical_json(body)).digest()
        assert digest == _unpadded_b64(vector["content_hash_sha256_b64"])


# ---------------------------------------------------------------------------------------------
# The copies themselves
# ---------------------------------------------------------------------------------------------


def test_external_vectors_match_their_checksums() -> None:
    """Every data and licence file here is pinned by SHA256SUMS (the notes, *.md, are not)."""
    sums = (EXTERNAL / "SHA256SUMS").read_text("ascii").splitlines()
    listed = {}
    for line in sums:
        digest, name = line.split("  ", 1)
        listed[name.removeprefix("./")] = digest
    present = {
        str(path.relative_to(EXTERNAL))
        for path in EXTERNAL.rglob("*")
        if path.is_file() and path.name != "SHA256SUMS" and path.suffix != ".md"
    }
    assert present == set(listed)
    for name, digest in listed.items():
        assert hashlib.sha256((EXTERNAL / name).read_bytes()).hexdigest() == digest, name
