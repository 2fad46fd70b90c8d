"""Auditing snapshots over time (merge.audit): extensions, rewrites, split views, causes.

Histories are built from signed test events (tests/builders.py) and bundles signed with test
key A (:func:`merge.signing.make_bundle`); key A is the trusted bundle signer.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from merge import InputError, canonical_json, native_available, verify_bundle
from merge.admission import MAX_INPUT_BYTES, Admitted, admit
from merge.audit import (
    ABSENT,
    Cause,
    KeyChanges,
    PairAudit,
    audit,
    audit_history,
    fates,
    snapshot_identity,
    snapshot_of_bundle,
    snapshot_of_events,
)
from merge.native import native_module
from merge.native.bundle import read_bundle
from merge.signing import make_bundle

from .builders import KEY_A, KEY_B, KEYS, RECORD, SUBJECT, event, record_event, run

TRUST = [KEY_A.key_object()]
T1, T2, T3 = "2026-07-06T00:00:00Z", "2026-07-07T00:00:00Z", "2026-07-08T00:00:00Z"

REC = record_event()
G1 = event(created_at="2026-07-05T07:00:00Z")
X1 = event(created_at="2026-07-05T08:00:00Z", prev_event=G1["event_id"], payload={"n": 2})
Y = event(created_at="2026-07-05T09:00:00Z", prev_event=X1["event_id"], payload={"n": 3})
# A second successor of G1 on the same chain: a retroactive fork of X1 (§7).
X2 = event(created_at="2026-07-05T08:30:00Z", prev_event=G1["event_id"], payload={"n": 4})
BASE = [REC, G1, X1, Y]


def bundle(events: list[dict[str, Any]], signed_at: str, *, keys: Any = None, signer: Any = KEY_A) -> Any:
    return make_bundle(signer, RECORD, events, public_keys=KEYS if keys is None else keys, built_at=signed_at)


#: Whether the bundles of a test reach the audit as JSON texts (set by ``bundle_form``).
FORM = {"text": False}


@pytest.fixture(autouse=True, params=["parsed", "text"])
def bundle_form(request: pytest.FixtureRequest) -> Iterator[None]:
    """Each test twice: bundles given as parsed values, and as JSON texts (written as a producer
    might, not canonically), whose events the compiled path reads as canonical texts (issue 26):
    the audits must be the same."""
    FORM["text"] = request.param == "text"
    yield
    FORM["text"] = False


def given(item: Any) -> Any:
    """``item`` (a bundle, or a list of them and other snapshots) in the test's form."""
    if isinstance(item, list):
        return [given(each) for each in item]
    if FORM["text"] and isinstance(item, dict) and "bundle_type" in item:
        return json.dumps(item, indent=1).encode()
    return item


def pair(old: Any, new: Any, trust: Any = None) -> PairAudit:
    return audit(given(old), given(new), trusted_keys=TRUST if trust is None else trust)


def forged(signed: dict[str, Any]) -> dict[str, Any]:
    """The same event id with a signature over other bytes: ``bad_signature`` (§6 check 12)."""
    copied = copy.deepcopy(signed)
    copied["signature"]["signature_b64"] = KEY_A.sign_digest("00" * 32)
    return copied


# --- extensions -------------------------------------------------------------------------------


def test_a_retroactive_fork_is_an_extension_and_each_change_has_its_cause() -> None:
    old, new = bundle(BASE, T1), bundle([*BASE, X2], T2)
    result = pair(old, new)
    assert result.verdict == "extension"
    assert result.append_only is True
    assert not result.identical
    assert [(a.event_id, a.fate) for a in result.added] == [(X2["event_id"], "equivocation")]
    assert result.dropped == ()
    changes = {c.event_id: c for c in result.changed}
    assert set(changes) == {X1["event_id"], Y["event_id"]}
    x1 = changes[X1["event_id"]]
    assert (x1.was, x1.now, x1.explained) == ("applied", "equivocation", True)
    assert x1.causes == (Cause("fork_sibling", X2["event_id"], ABSENT, "equivocation"),)
    y = changes[Y["event_id"]]
    assert (y.was, y.now, y.explained) == ("applied", "invalid_prev", True)
    assert y.causes == (Cause("prev", X1["event_id"], "applied", "equivocation"),)
    assert result.union_state_sha256 == new["state"]["state_sha256"]
    assert result.masked == ()
    assert result.problems == ()
    assert result.split_view is None


def test_a_supersede_and_a_late_prev_are_causes() -> None:
    orphan = event("author_attestation", created_at="2026-07-05T12:00:00Z", payload={"n": 6})
    child = event(
        "author_attestation",
        created_at="2026-07-05T13:00:00Z",
        prev_event=orphan["event_id"],
        payload={"n": 7},
    )
    superseding = event(
        created_at="2026-07-05T10:00:00Z",
        prev_event=Y["event_id"],
        supersedes=[G1["event_id"]],
        payload={"n": 5},
    )
    result = pair(bundle([*BASE, child], T1), bundle([*BASE, child, orphan, superseding], T2))
    assert result.append_only is True
    changes = {c.event_id: c for c in result.changed}
    assert (changes[G1["event_id"]].was, changes[G1["event_id"]].now) == ("applied", "superseded")
    assert changes[G1["event_id"]].causes == (
        Cause("superseder", superseding["event_id"], ABSENT, "applied"),
    )
    assert (changes[child["event_id"]].was, changes[child["event_id"]].now) == ("missing_prev", "applied")
    assert changes[child["event_id"]].causes == (Cause("prev", orphan["event_id"], ABSENT, "applied"),)
    assert all(change.explained for change in result.changed)


def test_a_new_copy_is_the_cause_of_a_verdict_that_changed() -> None:
    """§5: one valid copy is enough; NEW adding it turns bad_signature into applied."""
    extra = event("timestamp_anchor", created_at="2026-07-05T11:00:00Z", payload={"n": 8})
    result = pair(bundle([*BASE, forged(extra)], T1), bundle([*BASE, forged(extra), extra], T2))
    assert result.append_only is True
    assert result.added == ()  # the id was held already: only a copy is new
    [change] = result.changed
    assert (change.event_id, change.was, change.now) == (extra["event_id"], "bad_signature", "applied")
    assert change.causes == (Cause("copy", extra["event_id"]),)
    assert change.explained


def test_an_added_key_is_the_cause_of_events_it_signed() -> None:
    by_b = event("timestamp_anchor", KEY_B, created_at="2026-07-05T11:00:00Z")
    keys_a = [KEY_A.key_object()]
    result = pair(bundle([*BASE, by_b], T1, keys=keys_a), bundle([*BASE, by_b], T2, keys=KEYS))
    assert result.append_only is True
    assert result.keys.added == ("test-B", "test-expiring")
    [change] = result.changed
    assert (change.was, change.now) == ("unknown_key", "applied")
    assert change.causes == (Cause("keys", key_ids=("test-B", "test-expiring")),)


def test_identical_bundles_and_identical_contents() -> None:
    old = bundle(BASE, T1)
    same = pair(old, old)
    assert same.verdict == "extension"
    assert same.identical
    assert (same.added, same.dropped, same.changed) == ((), (), ())
    resigned = pair(old, bundle(BASE, T2))  # same events, signed again later
    assert resigned.identical
    assert resigned.old.bundle_sha256 != resigned.new.bundle_sha256


# --- rewrites ---------------------------------------------------------------------------------


def test_a_dropped_applied_event_is_a_rewrite() -> None:
    old = bundle(BASE, T1)
    result = pair(old, bundle([REC, G1, X1], T2))
    assert result.verdict == "rewrite"
    assert result.append_only is False
    assert [(d.event_id, d.old_fate, d.copy_only) for d in result.dropped] == [
        (Y["event_id"], "applied", False)
    ]
    # The union is OLD itself: the fold of the union is OLD's state.
    assert result.union_state_sha256 == old["state"]["state_sha256"]
    assert result.masked == ()
    assert "NEW lacks 1 event of OLD (dropped)" in result.problems
    assert result.split_view is None  # NEW holds nothing OLD lacks: a rollback, not a split view


def test_dropping_one_branch_of_a_fork_is_a_rewrite_that_the_union_unmasks() -> None:
    forked = bundle([*BASE, X2], T1)
    result = pair(forked, bundle(BASE, T2))
    assert result.verdict == "rewrite"
    assert [(d.event_id, d.old_fate) for d in result.dropped] == [(X2["event_id"], "equivocation")]
    assert result.union_state_sha256 == forked["state"]["state_sha256"]
    masked = {(m.event_id, m.new_fate, m.union_fate) for m in result.masked}
    assert masked == {(X1["event_id"], "applied", "equivocation"), (Y["event_id"], "applied", "invalid_prev")}
    changes = {c.event_id: c for c in result.changed}
    assert changes[X1["event_id"]].causes == (Cause("fork_sibling", X2["event_id"], "equivocation", ABSENT),)
    assert "NEW's state is not the fold of the union of both snapshots" in result.problems


def test_a_dropped_invalid_event_is_a_rewrite() -> None:
    bad = forged(event(created_at="2026-07-05T11:00:00Z", payload={"n": 9}))
    result = pair(bundle([*BASE, bad], T1), bundle(BASE, T2))
    assert result.verdict == "rewrite"
    assert [(d.event_id, d.old_fate) for d in result.dropped] == [(bad["event_id"], "bad_signature")]
    assert result.changed == ()
    assert result.masked == ()  # no applied event depended on it


def test_a_dropped_copy_is_a_rewrite_even_when_the_id_stays() -> None:
    extra = event("timestamp_anchor", created_at="2026-07-05T11:00:00Z", payload={"n": 8})
    result = pair(bundle([*BASE, extra, forged(extra)], T1), bundle([*BASE, extra], T2))
    assert result.verdict == "rewrite"
    assert [(d.event_id, d.old_fate, d.copy_only) for d in result.dropped] == [
        (extra["event_id"], "applied", True)
    ]
    assert result.masked == ()


def test_a_dropped_key_is_a_rewrite() -> None:
    by_b = event("timestamp_anchor", KEY_B, created_at="2026-07-05T11:00:00Z")
    result = pair(bundle([*BASE, by_b], T1, keys=KEYS), bundle([*BASE, by_b], T2, keys=[KEY_A.key_object()]))
    assert result.verdict == "rewrite"
    assert result.keys.dropped == ("test-B", "test-expiring")
    # With both key sets, B's event applies: NEW's unknown_key is what the drop hid.
    assert [(m.event_id, m.new_fate, m.union_fate) for m in result.masked] == [
        (by_b["event_id"], "unknown_key", "applied")
    ]


def test_a_fate_that_changes_with_no_cause_is_a_failure() -> None:
    """A snapshot whose state is not the fold of its inputs (built by hand, never verified)."""
    old = snapshot_of_events(BASE, subject=SUBJECT, keys=KEYS)
    liar = msgspec.structs.replace(old, result=run([*BASE, X2]))
    result = audit(old, liar)
    assert result.verdict == "rewrite"
    assert result.added == ()
    assert {c.event_id for c in result.changed} == {X1["event_id"], Y["event_id"]}
    assert not any(change.explained for change in result.changed)
    assert "2 fates changed with no cause in the new events" in result.problems


# --- split views ------------------------------------------------------------------------------


def test_a_split_view_is_reported_with_checkable_evidence() -> None:
    p = event("storage_attestation", created_at="2026-07-05T11:00:00Z", payload={"view": "p"})
    q = event("citation_signature", created_at="2026-07-05T11:00:00Z", payload={"view": "q"})
    first, second = bundle([*BASE, p], T1), bundle([*BASE, q], T2)
    result = pair(first, second)
    assert result.verdict == "split_view"
    assert result.append_only is False
    view = result.split_view
    assert view is not None
    assert view.key_id == "test-A"
    assert (view.only_in_first, view.only_in_second) == ((p["event_id"],), (q["event_id"],))
    # The evidence: both hashes and signatures, each bundle verifying on its own (§10).
    for info, published in ((view.first, first), (view.second, second)):
        assert info.bundle_sha256 == published["bundle_signature"]["bundle_sha256"]
        assert info.signature_b64 == published["bundle_signature"]["signature_b64"]
        assert info.signed_at == published["bundle_signature"]["signed_at"]
        assert verify_bundle(published, trusted_keys=TRUST).ok


def test_two_trusted_signers_disagreeing_is_a_rewrite_not_a_split_view() -> None:
    p = event("storage_attestation", created_at="2026-07-05T11:00:00Z", payload={"view": "p"})
    q = event("citation_signature", created_at="2026-07-05T11:00:00Z", payload={"view": "q"})
    both = [KEY_A.key_object(), KEY_B.key_object()]
    result = pair(bundle([*BASE, p], T1), bundle([*BASE, q], T2, signer=KEY_B), trust=both)
    assert result.verdict == "rewrite"
    assert result.split_view is None


# --- what is not compared ---------------------------------------------------------------------


def test_an_unverified_bundle_is_reported_not_compared() -> None:
    tampered = copy.deepcopy(bundle(BASE, T2))
    tampered["events"].pop()  # its state is no longer the fold of its events
    result = pair(bundle(BASE, T1), tampered)
    assert result.verdict == "unverified"
    assert result.append_only is None
    assert not result.new.verified
    assert any(problem.startswith("state: ") for problem in result.new.problems)
    untrusted = pair(bundle(BASE, T1), bundle(BASE, T2), trust=[KEY_B.key_object()])
    assert untrusted.verdict == "unverified"
    assert "bundle_signature: key 'test-A' is not a trusted key" in untrusted.old.problems


def test_snapshots_of_different_subjects_cannot_be_paired() -> None:
    other = snapshot_of_events([], subject="pith:2024:OTHER", keys=KEYS)
    with pytest.raises(InputError, match="different subjects"):
        audit(given(bundle(BASE, T1)), other, trusted_keys=TRUST)


def test_a_state_with_its_events_is_a_snapshot() -> None:
    state = run(BASE).state
    good = snapshot_of_events(BASE, subject=SUBJECT, keys=KEYS, state=state, label="mine")
    assert good.info.verified
    assert pair(good, bundle([*BASE, X2], T2)).verdict == "extension"
    wrong = snapshot_of_events(BASE, subject=SUBJECT, keys=KEYS, state=run([*BASE, X2]).state)
    assert not wrong.info.verified
    assert audit(wrong, good).verdict == "unverified"


def test_fates_name_applied_superseded_and_reasons() -> None:
    # A correction may supersede any non-record event of its signer (§7).
    superseding = event("correction", created_at="2026-07-05T10:00:00Z", supersedes=[G1["event_id"]])
    state = run([*BASE, X2, superseding]).state
    got = fates(state)
    assert got[REC["event_id"]] == "applied"
    assert got[G1["event_id"]] == "superseded"
    assert got[X1["event_id"]] == got[X2["event_id"]] == "equivocation"
    assert got[Y["event_id"]] == "invalid_prev"
    assert got[superseding["event_id"]] == "applied"
    assert len(got) == state.event_count


# --- histories --------------------------------------------------------------------------------


def test_a_history_is_ordered_by_signed_at_then_by_hash() -> None:
    v1, v2, v3 = bundle(BASE, T1), bundle([*BASE, X2], T2), bundle([*BASE, X2], "2026-07-07T02:00:00+02:00")
    report = audit_history(given([v3, v2, v1]), trusted_keys=TRUST)
    [subject] = report.subjects
    hashes = [info.bundle_sha256 for info in subject.snapshots]
    # v3 is signed at the same instant as v2 (an offset, compared as an instant): tie by hash.
    later = sorted(b["bundle_signature"]["bundle_sha256"] for b in (v2, v3))
    assert hashes == [v1["bundle_signature"]["bundle_sha256"], *later]
    assert subject.snapshots[0].label == "#2"
    assert [p.verdict for p in subject.pairs] == ["extension", "extension"]
    assert subject.pairs[1].identical
    assert report.ok


def test_a_grown_snapshot_is_paired_as_one_built_apart() -> None:
    """A history's snapshot whose events begin with the one's before it is paired from what it
    added as it was built (its events, its new copies of events held already, §5): the same pair
    as the two snapshots built apart and compared whole."""
    held = event("timestamp_anchor", created_at="2026-07-05T11:00:00Z", payload={"n": 9})
    twice = event("timestamp_anchor", created_at="2026-07-05T12:00:00Z", payload={"n": 10})
    first = [*BASE, forged(held)]
    second = [*first, held, X2, forged(twice), twice]
    third = [*second, event(created_at="2026-07-05T10:00:00Z", prev_event=Y["event_id"], payload={"n": 11})]
    texts = [
        json.dumps(bundle(events, at), indent=1).encode()
        for events, at in ((first, T1), (second, T2), (third, T3))
    ]
    [subject] = audit_history(texts, trusted_keys=TRUST).subjects
    apart = [snapshot_of_bundle(text, label=f"#{at}", trusted_keys=TRUST) for at, text in enumerate(texts)]
    expected = tuple(audit(old, new, trusted_keys=TRUST) for old, new in itertools.pairwise(apart))
    assert subject.pairs == expected
    assert [len(p.added) for p in subject.pairs] == [2, 1]
    assert any(cause.kind == "copy" for change in subject.pairs[0].changed for cause in change.causes)


def test_a_history_finds_a_split_view_between_snapshots_that_are_not_neighbours() -> None:
    p = event("storage_attestation", created_at="2026-07-05T11:00:00Z", payload={"view": "p"})
    q = event("citation_signature", created_at="2026-07-05T11:00:00Z", payload={"view": "q"})
    a, c, b = bundle([*BASE, p], T1), bundle([*BASE, p, q], T2), bundle([*BASE, q], T3)
    report = audit_history(given([a, c, b]), trusted_keys=TRUST)
    [subject] = report.subjects
    assert [p.verdict for p in subject.pairs] == ["extension", "rewrite"]  # C -> B is a rollback
    [view] = subject.split_views
    assert (view.first.bundle_sha256, view.second.bundle_sha256) == (
        a["bundle_signature"]["bundle_sha256"],
        b["bundle_signature"]["bundle_sha256"],
    )
    assert not subject.ok
    assert not report.ok


def test_a_history_of_several_subjects_groups_them_and_reports_the_rest() -> None:
    other_record = {**RECORD, "source": {"id": "2405.00002", "kind": "arxiv", "version": 1}}
    other = make_bundle(KEY_A, other_record, [], public_keys=KEYS, built_at=T1)
    unsigned_time = copy.deepcopy(bundle(BASE, T3))
    unsigned_time["bundle_signature"]["signed_at"] = "yesterday"  # not covered by the signature
    broken = b"{not json"
    report = audit_history(
        given([bundle(BASE, T1), other, canonical_json(bundle([*BASE, X2], T2)), unsigned_time, broken]),
        trusted_keys=TRUST,
    )
    assert [s.subject for s in report.subjects] == sorted([SUBJECT, other["pith_number"]])
    by_subject = {s.subject: s for s in report.subjects}
    assert [p.verdict for p in by_subject[SUBJECT].pairs] == ["extension"]
    assert by_subject[other["pith_number"]].pairs == ()
    assert [info.label for info in report.unordered] == ["#3"]
    assert [info.label for info in report.unverified] == ["#4"]
    assert not report.ok


def test_a_callable_given_to_audit_history_is_an_unverified_snapshot_never_called() -> None:
    """Only the command hands the reader a file's loader (merge.audit.history.audit_sources): a
    caller's object that happens to be callable is a snapshot that is no bundle, never run."""
    called: list[bool] = []

    def looks_like_a_loader() -> bytes:
        called.append(True)
        return canonical_json(bundle(BASE, T1))

    report = audit_history([bundle(BASE, T1), looks_like_a_loader], trusted_keys=TRUST)
    assert called == []
    assert [info.label for info in report.unverified] == ["#1"]
    assert not report.ok


def test_snapshots_given_as_data_take_the_labels_given() -> None:
    """audit_history's labels name the bundles in order (a Snapshot keeps its own); audit's name
    OLD and NEW; a label list of another length is the caller's mistake."""
    v1, v2 = bundle(BASE, T1), bundle([*BASE, X2], T2)
    mine = snapshot_of_events(BASE, subject=SUBJECT, keys=KEYS, label="mine")
    report = audit_history([canonical_json(v2), v1, mine], trusted_keys=TRUST, labels=["v2.json", "v1", "x"])
    [subject] = report.subjects
    assert [info.label for info in subject.snapshots] == ["v1", "v2.json"]
    assert [info.label for info in report.unordered] == ["mine"]  # (no signed_at)
    pair = audit(canonical_json(v1), v2, trusted_keys=TRUST, labels=("old.json", "new.json"))
    assert (pair.old.label, pair.new.label, pair.verdict) == ("old.json", "new.json", "extension")
    with pytest.raises(InputError, match="2 label"):
        audit_history([v1, v2, v1], trusted_keys=TRUST, labels=["a", "b"])


def test_inputs_are_not_mutated() -> None:
    old, new = bundle(BASE, T1), bundle([*BASE, X2], T2)
    before = copy.deepcopy((old, new))
    pair(old, new)
    audit_history(given([new, old]), trusted_keys=TRUST)
    assert (old, new) == before


def test_snapshot_of_bundle_reads_text_and_values_alike() -> None:
    published = bundle(BASE, T1)
    from_text = snapshot_of_bundle(canonical_json(published), trusted_keys=TRUST)
    from_value = snapshot_of_bundle(published, trusted_keys=TRUST)
    assert from_text.info == from_value.info
    assert from_text.copies == from_value.copies


def test_a_bundle_text_is_read_as_canonical_texts_on_the_compiled_path() -> None:
    """A snapshot of a bundle text holds its events as their canonical texts where the compiled
    path wrote them (issue 26): what folds again, and what a log's canonical lines dedupe with."""
    published = bundle([*BASE, X2], T1)
    snapshot = snapshot_of_bundle(json.dumps(published, indent=2).encode(), trusted_keys=TRUST)
    assert snapshot.info.verified
    if native_available():
        assert snapshot.events == tuple(canonical_json(e) for e in published["events"])
    else:
        assert snapshot.events == tuple(published["events"])
    assert snapshot.copies == snapshot_of_bundle(published, trusted_keys=TRUST).copies


def test_a_changed_key_is_a_rewrite() -> None:
    """Same key id, other material (here a rotates_at): OLD's history is no longer reproducible."""
    by_b = event("timestamp_anchor", KEY_B, created_at="2026-07-05T11:00:00Z")
    rotated = {**KEY_B.key_object(), "rotates_at": "2026-07-05T10:00:00Z"}
    result = pair(bundle([*BASE, by_b], T1), bundle([*BASE, by_b], T2, keys=[KEY_A.key_object(), rotated]))
    assert result.verdict == "rewrite"
    assert result.keys == KeyChanges(added=(), dropped=("test-expiring",), changed=("test-B",))
    [change] = result.changed
    assert (change.was, change.now) == ("applied", "key_expired")
    assert change.causes == (Cause("keys", key_ids=("test-expiring", "test-B")),)
    # The union keeps NEW's key on the clash (KeySet.union, "keep" from NEW): nothing is masked.
    assert result.union_state_sha256 == result.new.state_sha256
    assert result.masked == ()


def test_a_superseded_event_is_current_again_when_its_superseder_is_forked() -> None:
    """Being superseded is still being applied (§7): it is no cause for the prev's children."""
    a1 = event("author_attestation", created_at="2026-07-05T10:00:00Z")
    a2 = event(
        "author_attestation",
        created_at="2026-07-05T11:00:00Z",
        prev_event=a1["event_id"],
        supersedes=[a1["event_id"]],
    )
    a2b = event(
        "author_attestation", created_at="2026-07-05T12:00:00Z", prev_event=a1["event_id"], payload={"n": 2}
    )
    result = pair(bundle([*BASE, a1, a2], T1), bundle([*BASE, a1, a2, a2b], T2))
    assert result.append_only is True
    changes = {c.event_id: c for c in result.changed}
    assert (changes[a1["event_id"]].was, changes[a1["event_id"]].now) == ("superseded", "applied")
    assert changes[a1["event_id"]].causes == (Cause("superseder", a2["event_id"], "applied", "equivocation"),)
    assert changes[a2["event_id"]].causes == (Cause("fork_sibling", a2b["event_id"], ABSENT, "equivocation"),)


def test_a_predated_rollback_reads_as_an_extension_in_a_history() -> None:
    """The documented limit (docs/security.md §4): a history trusts signed_at, which is not signed."""
    later, predated = bundle([*BASE, X2], T2), bundle(BASE, "2026-07-01T00:00:00Z")
    [subject] = audit_history(given([later, predated]), trusted_keys=TRUST).subjects
    assert [p.verdict for p in subject.pairs] == ["extension"]
    assert pair(later, predated).verdict == "rewrite"  # in the order a monitor downloaded them


@pytest.mark.parametrize("garbage", ["\ud800", '{"a": "\ud800"}', b"\xff", b"[]", "{}", 5, None])
def test_garbage_is_an_unverified_snapshot_never_an_exception(garbage: Any) -> None:
    snapshot = snapshot_of_bundle(garbage, trusted_keys=TRUST)
    assert not snapshot.info.verified
    assert snapshot.info.problems
    assert pair(bundle(BASE, T1), garbage).verdict == "unverified"


def test_a_history_verifies_each_signature_once_a_run(verifications: list[Any]) -> None:
    """The snapshots of one run share a verifier: an event several hold is verified once."""
    v1, v2, v3 = bundle(BASE, T1), bundle([*BASE, X2], T2), bundle([*BASE, X2, X1], T3)
    verifications.clear()
    assert audit_history(given([v1, v2, v3]), trusted_keys=TRUST).ok
    assert verifications
    assert len(verifications) == len(set(verifications))
    verifications.clear()
    assert pair(v1, v2).append_only
    assert len(verifications) == len(set(verifications))


# --- the copy rule on both sides --------------------------------------------------------------


def _copy_rule_inputs() -> list[bytes]:
    """Event texts of every kind the rule tells apart: canonical-able or not, admitted or not,
    padded, escaped, with duplicate keys, at and over the size bound."""
    texts = [json.dumps(e).encode() for e in (REC, G1, X1, Y, X2)]
    x1 = json.dumps(X1).encode()
    texts += [
        json.dumps(X1, indent=3, ensure_ascii=True).encode(),  # the same value, written otherwise
        b'{"event_id": "not an id", "prev_event": 7, ' + x1[1:],  # overridden by X1's own keys
        b'{"x": 1.5, ' + x1[1:],  # a float: not canonical-able
        b'{"x": -0, ' + x1[1:],
        json.dumps({**X1, "prev_event": 7}).encode(),  # a prev_event that is no string
        json.dumps({**X1, "prev_event": None}).encode(),
        json.dumps({**X1, "event_id": X1["event_id"].upper()}).encode(),
        json.dumps({k: v for k, v in X1.items() if k != "event_id"}).encode(),
        b"[1]",
        b'"x"',
        b"7",
        b'{"deep": ' + b"[" * 70 + b"]" * 70 + b", " + x1[1:],
    ]
    for extra in (0, 1):  # a canonical text of exactly 1 MiB, and one byte over
        short = canonical_json({**X1, "pad": ""})
        texts.append(canonical_json({**X1, "pad": "x" * (MAX_INPUT_BYTES - len(short) + extra)}))
    return texts


@pytest.mark.skipif(not native_available(), reason="the compiled path does not serve here")
def test_the_copy_rule_is_the_same_on_both_sides() -> None:
    """``merge.audit.snapshot_identity`` and its Rust twin (``bundle::snapshot_identity``, read off
    each event the compiled bundle reader writes) agree on every input: where Rust writes a text,
    its identity is the pure rule's of that text, and where it gives none, the text is not admitted."""
    texts = _copy_rule_inputs()
    bundle_text = b'{"events": [' + b", ".join(texts) + b"]}"
    read = read_bundle(bundle_text, 1, native_module().BundleCache())
    assert read is not None
    assert len(read.identities) == len(texts)
    compared = 0
    for raw, written, twin in zip(texts, read.events, read.identities, strict=True):
        if written is None:  # not written there (not canonical-able, too deep): the pure path decides
            assert twin is None
            continue
        outcome = admit(written)
        pure = snapshot_identity(outcome) if isinstance(outcome, Admitted) else None
        assert twin == pure, raw[:80]
        compared += twin is not None
    assert compared >= 8
