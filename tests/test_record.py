"""Pith number records (spec §11, merge.record): the records/ vectors, the golden record, agreement."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from merge import (
    RECORD_CHECKS,
    REGISTRY_KEYS,
    InputError,
    KeySetError,
    RecordReport,
    State,
    decode_state,
    document_kind,
    fold,
    record_agrees,
    record_disagreement,
    verify_record,
)
from merge.record import text_kind

from .builders import KEY_A, KEY_B, KEY_STRANGER, KEYS, record_of_bundle
from .conftest import VECTORS

RECORD_VECTORS = sorted((VECTORS / "records").glob("*.json"))
Record = dict[str, Any]


def vector(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((VECTORS / "records" / f"{name}.json").read_text("utf-8"))
    return data


def verdict(report: RecordReport) -> dict[str, Any]:
    """A report in the vectors' ``expected`` form."""
    return {"ok": report.ok, "failed": sorted(c.name for c in report.failed), "title_note": report.title_note}


def test_every_vector_is_here() -> None:
    assert len(RECORD_VECTORS) == 35  # the brief says 34: the directory holds 35


@pytest.mark.parametrize("path", RECORD_VECTORS, ids=[path.stem for path in RECORD_VECTORS])
def test_vector(path: Path) -> None:
    """Each vector gives exactly its expected failed checks, as a JSON text and as a parsed value."""
    case = json.loads(path.read_text("utf-8"))
    text = msgspec.json.encode(case["record"])
    given = [text, text.decode("utf-8")]
    if not isinstance(case["record"], str):  # a str is a JSON text to verify_record
        given.append(case["record"])
    for document in given:
        report = verify_record(document, trusted_keys=case["trusted_keys"])
        assert [check.name for check in report.checks] == list(RECORD_CHECKS)
        assert verdict(report) == case["expected"], [(c.name, c.detail) for c in report.failed]


def test_golden_record_with_the_built_in_anchor(golden_record: Record) -> None:
    report = verify_record(golden_record)
    assert report.ok, report.failed
    assert report.trusted_key_id == "pith-v1-2026-05"
    assert report.title_note is True
    assert report.check("receipt").detail == "signed over canonical_sha256 by trusted key pith-v1-2026-05"


@pytest.mark.parametrize("trusted", [[KEY_A.key_object()], KEYS, []])
def test_golden_record_with_other_trust_fails_only_receipt(golden_record: Record, trusted: Any) -> None:
    """Trust is the verifier's: another key set fails ``receipt`` alone (pith_receipt not judged)."""
    report = verify_record(golden_record, trusted_keys=trusted)
    assert [check.name for check in report.failed] == ["receipt"]
    assert report.check("receipt").detail == "key 'pith-v1-2026-05' is not a trusted key"
    assert report.trusted_key_id is None


def test_a_key_under_the_registry_id_with_other_bytes(golden_record: Record) -> None:
    impostor = {**KEY_A.key_object(), "key_id": "pith-v1-2026-05"}
    report = verify_record(golden_record, trusted_keys=[impostor])
    assert [check.name for check in report.failed] == ["receipt", "verification_status"]
    assert "public_key_fingerprint is not the trusted key's" in report.check("receipt").detail


def test_the_record_is_not_mutated(golden_record: Record) -> None:
    before = copy.deepcopy(golden_record)
    verify_record(golden_record)
    assert golden_record == before


def test_a_broken_trusted_key_set_is_a_caller_error(golden_record: Record) -> None:
    with pytest.raises(KeySetError):
        verify_record(golden_record, trusted_keys=[{"key_id": "k"}])


def test_pith_receipt_is_judged_unless_the_key_is_merely_untrusted() -> None:
    """§11: an untrusted key leaves pith_receipt unjudged; any other receipt fault does not."""
    case = vector("arxiv_v2")
    only_b = [KEY_B.key_object()]
    for claimed in (True, False):
        record = copy.deepcopy(case["record"])
        record["verification_status"]["pith_receipt"] = claimed
        assert verdict(verify_record(record, trusted_keys=only_b))["failed"] == ["receipt"]
        record["receipt"]["kind"] = "pith_receipt_v2"  # untrusted, and broken besides: judged
        failed = verdict(verify_record(record, trusted_keys=only_b))["failed"]
        assert failed == (["receipt", "verification_status"] if claimed else ["receipt"])
    for receipt in (None, "a receipt", {}):  # no key_id at all: judged
        record = copy.deepcopy(case["record"])
        record["receipt"] = receipt
        failed = verdict(verify_record(record, trusted_keys=only_b))["failed"]
        assert failed == ["receipt", "verification_status"], receipt
    record = copy.deepcopy(case["record"])
    record["verification_status"]["pith_receipt"] = "true"  # not judged, but still a boolean
    assert verdict(verify_record(record, trusted_keys=only_b))["failed"] == ["receipt", "verification_status"]


def test_the_receipt_must_name_a_hex_digest() -> None:
    record = copy.deepcopy(vector("arxiv_v2")["record"])
    record["canonical_sha256"] = record["canonical_sha256"].upper()
    report = verify_record(record, trusted_keys=KEYS)
    assert "not 64 lower hex" in report.check("receipt").detail
    assert {c.name for c in report.failed} == {"canonical_sha256", "receipt", "verification_status"}


def test_json_types_are_kept_apart(golden_bundle: dict[str, Any], golden_record: Record) -> None:
    """A number is no string and ``true`` no integer, though Python's == says otherwise."""
    text = msgspec.json.encode(vector("arxiv_v2")["record"]).decode()
    assert verify_record(text, trusted_keys=KEYS).ok
    source_id = json.loads(text)["source"]["id"]  # "2501.00002": also a JSON number's text
    for string, number, check in (
        (f'"alias_value":"{source_id}"', f'"alias_value":{source_id}', "aliases"),
        ('"schema_version":"1.0"', '"schema_version":1.0', "record_type"),
    ):
        assert string in text
        failed = verdict(verify_record(text.replace(string, number, 1), trusted_keys=KEYS))["failed"]
        assert failed == [check]
    record = record_of_bundle(golden_bundle, golden_record)
    assert record["canonical_record"]["source"]["version"] == 1
    record["source"]["version"] = True
    assert verdict(verify_record(record))["failed"] == ["source"]


def test_title_note_needs_two_strings() -> None:
    record = copy.deepcopy(vector("arxiv_v2")["record"])
    record["paper"]["title"] = "lone \ud800 surrogate"  # a parsed value: no UTF-8 exists for it
    assert verify_record(record, trusted_keys=KEYS).title_note is None
    del record["paper"]
    assert verify_record(record, trusted_keys=KEYS).title_note is None
    assert verify_record(record, trusted_keys=KEYS).ok  # informative only


ODD_DOCUMENTS: list[Any] = [
    b"",
    b"\xff",
    b"[" * 5000,
    "null",
    '{"record_type": "pith_number_record", "x": "\ud800"}',  # a str with a lone surrogate: no JSON text
    3,
    2.5,
    None,
    (1, 2),
    {1: 2},
    {"record_type": "pith_number_record", "canonical_record": {"x": float("nan")}},
    {"canonical_record": {"metadata": {"submitted_at": 2024}}, "receipt": {"key_id": ["x"]}},
    {"aliases": [None, 1, {"alias_kind": 1}], "verification_status": {"content_addressed": 1}},
    {"canonical_record": {"source": {"id": "x", "kind": "arxiv", "version": True}}},
]


CYCLE: dict[str, Any] = {}
CYCLE["self"] = CYCLE
ODD_DOCUMENTS.append({"canonical_record": CYCLE, "source": CYCLE, "aliases": [CYCLE], "paper": CYCLE})


@pytest.mark.parametrize("document", ODD_DOCUMENTS, ids=range(len(ODD_DOCUMENTS)))
def test_never_raises_and_fails(document: Any) -> None:
    report = verify_record(document, trusted_keys=KEYS)
    assert not report.ok
    assert [check.name for check in report.checks] == list(RECORD_CHECKS)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(field=st.sampled_from(sorted(vector("arxiv_v2")["record"])), value=json_values)
def test_any_field_set_to_any_value_never_raises(field: str, value: Any) -> None:
    record = copy.deepcopy(vector("arxiv_v2")["record"])
    record[field] = value
    report = verify_record(record, trusted_keys=KEYS)
    assert len(report.checks) == len(RECORD_CHECKS)


def test_document_kind() -> None:
    assert document_kind({"bundle_type": None}) == "bundle"
    assert document_kind({"bundle_type": "x", "record_type": "pith_number_record"}) == "bundle"
    assert document_kind({"record_type": None}) == "record"
    assert document_kind({"pith_number": "pith:2021:X"}) is None
    assert document_kind([{"record_type": "pith_number_record"}]) is None


@pytest.mark.parametrize(
    "document",
    [
        {"bundle_type": None},
        {"bundle_type": "x", "record_type": "pith_number_record"},
        {"record_type": None, "events": [{"bundle_type": 1}]},
        {"pith_number": "pith:2021:X", "nested": {"record_type": 1}},
        [{"record_type": "pith_number_record"}],
        "a string",
        None,
    ],
)
def test_text_kind_is_the_kind_of_the_decoded_text(document: Any) -> None:
    """text_kind reads a text for its two type keys alone, and says what document_kind says of
    the decoded value, as bytes and as str; a key given twice is there, whatever its values."""
    text = json.dumps(document)
    assert text_kind(text) == text_kind(text.encode()) == document_kind(document)
    if isinstance(document, dict) and document:
        twice = text[:-1] + ", " + text[1:]  # every key again
        assert text_kind(twice) == document_kind(document)


@pytest.mark.parametrize(
    "text", [b"{not json", b"", b'{"bundle_type": 1', b"\xff", '{"record_type": "\ud800"}']
)
def test_text_kind_of_what_is_no_json_text_is_none(text: bytes | str) -> None:
    assert text_kind(text) is None


# --- a record and a state (§11 agreement) -----------------------------------------------------


def state_of(bundle: dict[str, Any]) -> State:
    return fold(bundle["events"], subject=bundle["pith_number"], keys=bundle["public_keys"], threads=1).state


def test_the_golden_bundle_subject_record_agrees_with_its_state(
    golden_bundle: dict[str, Any], golden_record: Record
) -> None:
    record = record_of_bundle(golden_bundle, golden_record)
    report = verify_record(record)
    assert report.ok, report.failed  # registry-signed receipt, derived identifiers
    assert report.title_note is True
    state = state_of(golden_bundle)
    assert record_agrees(record, state)
    assert record_agrees(record, decode_state(json.dumps(golden_bundle["state"])))


def test_a_record_of_another_subject_disagrees(golden_bundle: dict[str, Any], golden_record: Record) -> None:
    state = state_of(golden_bundle)
    assert not record_agrees(golden_record, state)
    assert (
        record_disagreement(golden_record, state)
        == "canonical_record differs from state.current.canonical_record"
    )


def test_agreement_compares_alias_pairs_not_their_times(
    golden_bundle: dict[str, Any], golden_record: Record
) -> None:
    record = record_of_bundle(golden_bundle, golden_record)
    state = state_of(golden_bundle)
    record["aliases"].reverse()
    record["aliases"][0]["created_at"] = "2020-01-01T00:00:00-05:00"
    assert record_agrees(record, state)
    record["aliases"].pop()
    assert (
        record_disagreement(record, state)
        == "the alias pairs differ from those of state.current.source_aliases"
    )
    assert not record_agrees("not a record", state)


def test_a_state_without_a_record_agrees_with_no_record(
    golden_bundle: dict[str, Any], golden_record: Record
) -> None:
    record = record_of_bundle(golden_bundle, golden_record)
    empty = fold([], subject=golden_bundle["pith_number"], keys=REGISTRY_KEYS).state
    assert "no applied record_created" in (record_disagreement(record, empty) or "")
    with pytest.raises(InputError):
        record_agrees(record, golden_bundle["state"])  # a caller's mistake


def test_a_record_given_as_a_stranger_signed_copy_still_agrees(
    golden_bundle: dict[str, Any], golden_record: Record
) -> None:
    """Agreement is about content; trust is verify_record's business."""
    record = record_of_bundle(golden_bundle, golden_record)
    record["receipt"]["signature_b64"] = KEY_STRANGER.sign_digest(record["canonical_sha256"])
    assert record_agrees(record, state_of(golden_bundle))
    assert [c.name for c in verify_record(record).failed] == ["receipt", "verification_status"]
