"""The laws of the document strategies (merge.testing.documents, .mutations): a good bundle or
record verifies, a faulted one fails exactly the check it names, a rewrite or a split view is
what the audit finds, and a mutated bundle text gets one verdict on every path and form."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fuzz.bundle_harness import verdict
from merge import RECORD_CHECKS, audit, verify_bundle, verify_record
from merge.native import native_module
from merge.testing import (
    BUNDLE_FAULT_CHECKS,
    PRESERVING,
    BundleFault,
    BundleText,
    SignedBundle,
    SignedRecord,
    bundle_texts,
    bundles,
    records,
)

FAILING = [fault for fault, check in BUNDLE_FAULT_CHECKS.items() if check is not None]
BETWEEN_TWO = [fault for fault, check in BUNDLE_FAULT_CHECKS.items() if check is None]


def _failed(report: Any) -> set[str]:
    return {check.name for check in report.failed}


@given(bundles())
def test_a_good_bundle_verifies_as_value_and_as_text(signed: SignedBundle) -> None:
    for given_as in (signed.bundle, signed.text, signed.text.decode()):
        report = verify_bundle(given_as, trusted_keys=signed.trusted_keys, threads=1)
        assert report.ok, report.failed
    assert signed.fault is None
    assert signed.failed_check is None


@pytest.mark.parametrize("fault", FAILING)
@given(data=st.data())
def test_a_faulted_bundle_fails_exactly_the_named_check(fault: BundleFault, data: st.DataObject) -> None:
    signed = data.draw(bundles(fault))
    for given_as in (signed.bundle, signed.text):
        report = verify_bundle(given_as, trusted_keys=signed.trusted_keys, threads=1)
        assert _failed(report) == {signed.failed_check}, (signed.fault, report.failed)


@given(st.sampled_from(BETWEEN_TWO).flatmap(bundles))
def test_a_rewrite_or_split_view_verifies_and_the_audit_names_it(signed: SignedBundle) -> None:
    assert signed.earlier is not None
    for bundle in (signed.earlier, signed.bundle):
        assert verify_bundle(bundle, trusted_keys=signed.trusted_keys, threads=1).ok
    pair = audit(signed.earlier, signed.bundle, trusted_keys=signed.trusted_keys)
    assert pair.verdict == signed.verdict == str(signed.fault)
    assert pair.append_only is False


@given(records())
def test_a_good_record_verifies(signed: SignedRecord) -> None:
    report = verify_record(signed.record, trusted_keys=signed.trusted_keys)
    assert report.ok, report.failed


@pytest.mark.parametrize("check", RECORD_CHECKS)
@given(data=st.data())
def test_a_faulted_record_fails_exactly_the_named_check(check: str, data: st.DataObject) -> None:
    signed = data.draw(records(check))
    report = verify_record(signed.record, trusted_keys=signed.trusted_keys)
    assert _failed(report) == {check} == {signed.failed_check}, (signed.detail, report.failed)


def test_records_refuses_a_check_that_is_not_one_of_section_11() -> None:
    with pytest.raises(ValueError, match="no check of §11"):
        records("state")


@given(bundle_texts())
def test_a_mutated_bundle_text_gets_one_verdict_on_every_path(mutated: BundleText) -> None:
    """Never an exception; the compiled path's verdict is the pure path's (the reference, what
    the bundle fuzzer compares: fuzz/bundle_harness.py)."""
    pure = verdict(mutated.text, mutated.trusted_keys, pure=True)
    assert pure[0] == "report", (mutated.mutations, pure)
    if native_module() is not None:
        assert verdict(mutated.text, mutated.trusted_keys, pure=False) == pure, mutated.mutations


@given(bundle_texts(kinds=PRESERVING))
def test_another_writing_of_a_good_bundle_verifies_on_every_path(mutated: BundleText) -> None:
    """The mutations of PRESERVING keep the text's value, so its verdict: every check passes."""
    assert set(mutated.mutations) <= PRESERVING
    for pure in (True, False) if native_module() is not None else (True,):
        report = verdict(mutated.text, mutated.trusted_keys, pure=pure)
        assert report[1] is True, (mutated.mutations, pure, report)
