"""Bundle verification (spec §10, merge.bundle) on the golden bundle and altered copies.

To see one check fail on its own, an altered bundle is re-signed with test key A and A is
the trusted key: the bundle hash and signature then hold, and only the altered rule fails.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from merge import (
    BUNDLE_CHECKS,
    REGISTRY_KEYS,
    BundleReport,
    InputError,
    canonical_json,
    verify_bundle,
    verify_record,
)
from merge.signing import sign_bundle

from .builders import KEY_A, KEY_B
from .helpers import THREADS_REFUSED

Bundle = dict[str, Any]
TRUST_A = [KEY_A.key_object()]


def failed(report: BundleReport) -> set[str]:
    return {check.name for check in report.failed}


def test_golden_bundle_verifies(golden_bundle_bytes: bytes, golden_bundle: Bundle) -> None:
    report = verify_bundle(golden_bundle_bytes)
    assert report.ok, report.failed
    assert [check.name for check in report.checks] == list(BUNDLE_CHECKS)
    assert report.trusted_key_id == "pith-v1-2026-05"
    assert report.result is not None
    assert canonical_json(report.result.state) == canonical_json(golden_bundle["state"])
    assert report.result.state_sha256 == golden_bundle["state"]["state_sha256"]
    assert report.result.rejected == ()
    assert report.check("bundle_signature").detail == "signed by trusted key pith-v1-2026-05"


def test_golden_bundle_as_str_and_parsed(golden_bundle_bytes: bytes, golden_bundle: Bundle) -> None:
    assert verify_bundle(golden_bundle_bytes.decode(), trusted_keys=REGISTRY_KEYS).ok
    before = copy.deepcopy(golden_bundle)
    assert verify_bundle(golden_bundle, threads=1).ok
    assert golden_bundle == before  # not mutated


def test_the_bundle_own_keys_are_no_trust(golden_bundle_bytes: bytes) -> None:
    """Trust is the verifier's (§10): without the registry key, the signature check fails."""
    for trusted in ([], TRUST_A, [KEY_A.key_object(), KEY_B.key_object()]):
        report = verify_bundle(golden_bundle_bytes, trusted_keys=trusted)
        assert failed(report) == {"bundle_signature"}, trusted
        assert report.trusted_key_id is None
        assert report.result is not None  # the rest is still checked


def test_a_trusted_key_under_the_registry_id_with_other_bytes(golden_bundle_bytes: bytes) -> None:
    impostor = KEY_A.key_object()
    impostor["key_id"] = "pith-v1-2026-05"
    report = verify_bundle(golden_bundle_bytes, trusted_keys=[impostor])
    assert failed(report) == {"bundle_signature"}
    assert "fingerprint" in report.check("bundle_signature").detail


def resigned(bundle: Bundle, change: Callable[[Bundle], Any]) -> Bundle:
    altered = copy.deepcopy(bundle)
    change(altered)
    return sign_bundle(KEY_A, altered, signed_at="2026-08-14T00:32:51Z")


def test_resigned_golden_bundle_verifies_with_its_signer_trusted(golden_bundle: Bundle) -> None:
    bundle = resigned(golden_bundle, lambda b: None)
    assert verify_bundle(bundle, trusted_keys=TRUST_A).ok
    assert failed(verify_bundle(bundle)) == {"bundle_signature"}


def _flip_hex(text: str) -> str:
    return ("1" if text[0] != "1" else "2") + text[1:]


def _first_event(change: Callable[[dict[str, Any]], Any]) -> Callable[[Bundle], Any]:
    return lambda b: change(b["events"][0])


# Each alteration, made on a re-signed bundle, and exactly the checks it must fail.
ALTERATIONS: dict[str, tuple[Callable[[Bundle], Any], set[str]]] = {
    "bundle_type": (lambda b: b.update(bundle_type="pith_bundle"), {"bundle_type"}),
    "canonical_sha256": (
        lambda b: b.update(canonical_sha256=_flip_hex(b["canonical_sha256"])),
        {"canonical_sha256", "pith_number", "short_pith_number"},
    ),
    "canonical_record": (
        lambda b: b["canonical_record"]["metadata"].update(primary_cat="cs.AI"),
        {"canonical_sha256", "pith_number", "short_pith_number"},
    ),
    "pith_number": (
        # The subject of the fold is the bundle's pith_number: every event is now wrong_subject.
        lambda b: b.update(pith_number=b["pith_number"][:-1] + "Q"),
        {"pith_number", "state", "source_aliases"},
    ),
    "short_pith_number": (lambda b: b.update(short_pith_number="pith:AAAAAAAA"), {"short_pith_number"}),
    "source": (lambda b: b["source"].update(version=2), {"source"}),
    "source as true": (lambda b: b["source"].update(version=True), {"source"}),
    "merge_version": (lambda b: b.update(merge_version="pith-open-graph-merge-v2"), {"merge_version"}),
    "state count": (lambda b: b["state"].update(valid_event_count=1), {"state"}),
    "state hash": (
        lambda b: b["state"].update(state_sha256=_flip_hex(b["state"]["state_sha256"])),
        {"state"},
    ),
    "state missing": (lambda b: b.pop("state"), {"state"}),
    "source_aliases": (lambda b: b["source_aliases"].pop(), {"source_aliases"}),
    "source_aliases time": (
        lambda b: b["source_aliases"][0].update(created_at="2026-07-05T05:49:25Z"),
        {"source_aliases"},
    ),
    "event dropped": (lambda b: b["events"].pop(), {"state"}),
    "record event dropped": (lambda b: b["events"].pop(0), {"state", "source_aliases"}),
    # The record event's body changes: content_hash_mismatch, so no record and no aliases.
    "event payload": (
        _first_event(lambda e: e["payload"].update(attestation_state="x")),
        {"state", "source_aliases"},
    ),
    "snapshot payload": (lambda b: b["events"][1]["payload"].update(extra=1), {"state"}),
    "event signature": (
        _first_event(lambda e: e["signature"].update(signature_b64=base64.b64encode(bytes(64)).decode())),
        {"state", "source_aliases"},
    ),
    # Not admitted, so not in the state (§5): the state still matches; the detail says so.
    "event not admitted": (lambda b: b["events"].append("not an event"), set()),
    "public key": (
        lambda b: b["public_keys"][0].update(fingerprint_sha256_hex="0" * 32),
        {"public_keys", "state", "source_aliases"},
    ),
    "public keys replaced": (
        lambda b: b.update(public_keys=[KEY_B.key_object()]),
        {"state", "source_aliases"},
    ),
    "events missing": (lambda b: b.pop("events"), {"state", "source_aliases"}),
    # No public_keys: an empty key set, every event unknown_key.
    "public_keys missing": (lambda b: b.pop("public_keys"), {"state", "source_aliases"}),
    "extra field": (lambda b: b.update(note="extra fields are covered by the signature only"), set()),
}


@pytest.mark.parametrize("name", sorted(ALTERATIONS))
def test_each_alteration_fails_its_check(golden_bundle: Bundle, name: str) -> None:
    change, expected = ALTERATIONS[name]
    report = verify_bundle(resigned(golden_bundle, change), trusted_keys=TRUST_A, threads=1)
    assert failed(report) == expected
    assert report.ok is (not expected)


def test_detail_says_what_was_seen(golden_bundle: Bundle) -> None:
    report = verify_bundle(resigned(golden_bundle, ALTERATIONS["state hash"][0]), trusted_keys=TRUST_A)
    detail = report.check("state").detail
    assert golden_bundle["state"]["state_sha256"] in detail
    assert "published state differs" in detail
    rejected = verify_bundle(
        resigned(golden_bundle, ALTERATIONS["event not admitted"][0]), trusted_keys=TRUST_A
    )
    assert "1 event(s) not admitted" in rejected.check("state").detail


# Altered without re-signing: the registry signature must catch it.
UNSIGNED: dict[str, tuple[Callable[[Bundle], Any], set[str]]] = {
    "signature_b64": (
        lambda b: b["bundle_signature"].update(signature_b64=base64.b64encode(bytes(64)).decode()),
        {"bundle_signature"},
    ),
    "signature not base64": (
        lambda b: b["bundle_signature"].update(signature_b64="%%%"),
        {"bundle_signature"},
    ),
    "claimed bundle_sha256": (
        lambda b: b["bundle_signature"].update(
            bundle_sha256=_flip_hex(b["bundle_signature"]["bundle_sha256"])
        ),
        {"bundle_sha256"},
    ),
    "signed_message": (
        lambda b: b["bundle_signature"].update(signed_message="canonical_sha256_bytes"),
        {"bundle_signature"},
    ),
    "algorithm": (lambda b: b["bundle_signature"].update(algorithm="ed448"), {"bundle_signature"}),
    "signature_status": (
        lambda b: b["bundle_signature"].update(signature_status="draft"),
        {"bundle_signature"},
    ),
    "signature key_id": (lambda b: b["bundle_signature"].update(key_id="test-A"), {"bundle_signature"}),
    "built_at": (lambda b: b.update(built_at="2026-08-14T00:32:52Z"), {"bundle_sha256", "bundle_signature"}),
    "a link": (
        lambda b: b["links"].update(bundle="https://evil.example/"),
        {"bundle_sha256", "bundle_signature"},
    ),
    "no bundle_signature": (lambda b: b.pop("bundle_signature"), {"bundle_sha256", "bundle_signature"}),
    "bundle_signature a string": (
        lambda b: b.update(bundle_signature="signed"),
        {"bundle_sha256", "bundle_signature"},
    ),
    "a float somewhere": (lambda b: b.update(weight=0.5), {"bundle_sha256", "bundle_signature"}),
}


@pytest.mark.parametrize("name", sorted(UNSIGNED))
def test_unsigned_alterations(golden_bundle: Bundle, name: str) -> None:
    change, expected = UNSIGNED[name]
    altered = copy.deepcopy(golden_bundle)
    change(altered)
    report = verify_bundle(altered, threads=1)
    assert failed(report) == expected


def test_a_flipped_byte_in_the_signature_text(golden_bundle_bytes: bytes, golden_bundle: Bundle) -> None:
    signature = golden_bundle["bundle_signature"]["signature_b64"].encode()
    start = golden_bundle_bytes.index(signature)
    for offset in (0, 20, 60):
        data = bytearray(golden_bundle_bytes)
        data[start + offset] = ord("A") if data[start + offset] != ord("A") else ord("B")
        assert failed(verify_bundle(bytes(data))) == {"bundle_signature"}


@pytest.mark.parametrize(
    "bundle",
    [
        b"not json",
        b"",
        b"\xff\xfe",
        b"[]",
        b"null",
        b'"bundle"',
        b"1.5",
        "[1, 2]",
        b"[" * 100_000,
        [],
        42,
        None,
    ],
)
def test_non_objects_give_failed_checks(bundle: Any) -> None:
    report = verify_bundle(bundle)
    assert not report.ok
    assert [check.name for check in report.checks] == list(BUNDLE_CHECKS)
    assert failed(report) == set(BUNDLE_CHECKS)
    assert report.result is None
    assert report.trusted_key_id is None


FILE_FIX = r"pass the file's bytes \(path\.read_bytes\(\)\)$"


def test_a_path_or_an_open_file_is_a_caller_mistake_naming_the_fix(
    each_path: str, golden_bundle_bytes: bytes, tmp_path: Path
) -> None:
    """Not a bundle that fails every check: an InputError that says what to pass instead (and
    the same of a record, which reads its document the same way)."""
    path = tmp_path / "bundle.json"
    path.write_bytes(golden_bundle_bytes)
    for verify in (verify_bundle, verify_record):
        with pytest.raises(InputError, match=rf"^a document is .*, not a path \(PosixPath\): {FILE_FIX}"):
            verify(path)
        for mode in ("rb", "r"):
            with path.open(mode) as file, pytest.raises(InputError, match=f"not an open file .*{FILE_FIX}"):
                verify(file)
    assert verify_bundle(path.read_bytes()).ok


def test_a_thread_count_is_checked_before_the_bundle(each_path: str) -> None:
    """As :func:`merge.fold` checks it, even when the bundle fails before its fold."""
    with pytest.raises(InputError, match=THREADS_REFUSED):
        verify_bundle(b"{}", threads=-1)


def test_an_empty_object_fails_every_check() -> None:
    report = verify_bundle(b"{}")
    assert failed(report) == set(BUNDLE_CHECKS) - {"public_keys"}  # no keys: an empty, valid key set
    assert report.result is None


@pytest.mark.parametrize(
    "change",
    [
        lambda b: b.update(canonical_record="record"),
        lambda b: b.update(canonical_record={"metadata": None}),
        lambda b: b.update(public_keys="keys"),
        lambda b: b.update(events={"0": "x"}),
        lambda b: b.update(pith_number=5),
        lambda b: b.update(state=[0.5]),
        lambda b: b.update(source_aliases={"a": 1.5}),
        lambda b: b.update(source=None),
        lambda b: b["state"].update(current=None),
    ],
)
def test_odd_shapes_never_raise(golden_bundle: Bundle, change: Callable[[Bundle], Any]) -> None:
    altered = copy.deepcopy(golden_bundle)
    change(altered)
    for form in (altered, json.dumps(altered), json.dumps(altered).encode()):
        report = verify_bundle(form, threads=1)
        assert not report.ok
        assert [check.name for check in report.checks] == list(BUNDLE_CHECKS)


def test_check_lookup(golden_bundle_bytes: bytes) -> None:
    report = verify_bundle(golden_bundle_bytes)
    assert report.check("state").ok
    with pytest.raises(KeyError):
        report.check("no_such_check")


SIGNED = {"bundle_sha256", "bundle_signature"}
# Text that ends inside (or right before) a value of the bundle text, and the checks a changed
# byte right after it must fail. The first occurrence is used.
FLIPS: list[tuple[str, set[str]]] = [
    ('"bundle_type":"', SIGNED | {"bundle_type"}),
    ('"pith_number":"', SIGNED | {"pith_number", "state", "source_aliases"}),
    ('"short_pith_number":"', SIGNED | {"short_pith_number"}),
    ('"title_canon_sha256":"', SIGNED | {"canonical_sha256", "pith_number", "short_pith_number"}),
    ('"canonical_sha256":"068d', SIGNED | {"canonical_sha256", "pith_number", "short_pith_number"}),
    ('"merge_version":"', SIGNED | {"merge_version"}),
    ('"state_sha256":"', SIGNED | {"state"}),
    ('"valid_event_count":', SIGNED | {"state"}),
    ('"public_key_b64":"', SIGNED | {"public_keys", "state", "source_aliases"}),
    ('"alias_value":"', SIGNED | {"source_aliases"}),
    ('"bundle_sha256":"', {"bundle_sha256"}),
    ('"signature_b64":"0I4x', {"bundle_signature"}),
]


@pytest.mark.parametrize(("key", "expected"), FLIPS, ids=[key for key, _ in FLIPS])
def test_a_flipped_byte_in_a_field_fails_its_check(
    golden_bundle_bytes: bytes, key: str, expected: set[str]
) -> None:
    """One byte of the published text changed (a digit or letter for another): no re-signing."""
    at = golden_bundle_bytes.index(key.encode()) + len(key)
    data = bytearray(golden_bundle_bytes)
    data[at] = ord("2") if data[at] != ord("2") else ord("3")
    report = verify_bundle(bytes(data), threads=1)
    assert failed(report) == expected
